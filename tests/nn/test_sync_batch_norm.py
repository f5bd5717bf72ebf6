"""SyncBatchNorm: in two data-parallel ranks (gloo, CPU, uneven shards) the outputs, the input
and parameter gradients and the running statistics equal one process's BatchNorm2d on the whole
batch; a rank with an empty batch contributes nothing and still joins the backward; ranks that
are all empty leave the statistics; autocast changes nothing; in one process it is BatchNorm;
the conversion swaps complex and real batch norms and keeps their tensors."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks
from torch import nn

import cplxnet.functional as CF
import cplxnet.nn as cnn

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable"),
]
SHARDS = (slice(0, 2), slice(2, 6))  # 2 and 4 samples
DTYPE = torch.complex128


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        cnn.Conv2d(2, 4, 3, padding=1, dtype=DTYPE),
        cnn.BatchNorm2d(4, momentum=None, dtype=DTYPE),
        cnn.Conv2d(4, 1, 1, dtype=DTYPE),
    )


def _data() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(6, 2, 5, 5, dtype=DTYPE) + (0.5 - 1j)  # a mean away from zero


def _loss(y: torch.Tensor, total: int) -> torch.Tensor:
    return (y.abs() ** 2).sum() / total  # the sum over a shard over the global count


def _rank(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(cnn.SyncBatchNorm.convert_sync_batchnorm(_model()))
    x = _data()[SHARDS[rank]].requires_grad_()
    y = model(x)
    (2 * _loss(y, 6 * 25)).backward()  # DDP averages over the 2 ranks: the global mean's grads
    bn = model.module[1]
    lone = cnn.SyncBatchNorm(2, dtype=DTYPE)  # rank 0 brings an empty batch
    alone = (_data()[:0] if rank == 0 else _data()[2:]).requires_grad_()
    z = lone(alone)
    (z.abs() ** 2).sum().backward()  # the empty rank joins the backward's collective
    raw = cnn.SyncBatchNorm(2, dtype=DTYPE)(_data()[:0] if rank == 0 else _data()[2:])
    (raw.abs() ** 2).sum().backward()  # data not requiring grad: the empty rank joins too
    ddp = nn.parallel.DistributedDataParallel(cnn.SyncBatchNorm.convert_sync_batchnorm(_model()))
    step = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for n in (3, 0 if rank == 0 else 3):  # rank 0's second batch is empty: DDP still reduces
        step.zero_grad()
        (ddp(_data()[:n]).abs() ** 2).sum().backward()
        step.step()
    trained = ddp.module[1].eval()  # eval: the running statistics, no collective, no update
    before = {k: v.clone() for k, v in trained.state_dict().items()}
    local = cnn.BatchNorm2d(4, dtype=DTYPE).eval()
    local.load_state_dict(before)
    h = torch.randn(1 + 2 * rank, 4, 3, 3, dtype=DTYPE) + rank  # each rank its own data
    evaluated = (trained(h), local(h), all(torch.equal(v, before[k])
                                           for k, v in trained.state_dict().items()))  # fmt: skip
    empty = cnn.SyncBatchNorm(2, dtype=DTYPE)  # every rank empty: the statistics stay
    empty(_data()[:0])
    torch.manual_seed(rank)  # single precision under autocast: as without it, bit for bit
    low, data = cnn.SyncBatchNorm(2), torch.randn(3, 2, 4, 4, dtype=torch.complex64) + 2j
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = low(data)
    plain = cnn.SyncBatchNorm(2)(data)
    result = {"y": y.detach(), "x_grad": x.grad, "z": z.detach(), "lone": lone.state_dict(),
              "grads": {n: p.grad for n, p in model.module.named_parameters()},
              "stats": bn.state_dict(), "z_grad": alone.grad, "empty": empty.state_dict(),
              "autocast": (autocast, plain, low.state_dict()),
              "ddp": [p.detach() for p in ddp.parameters()], "eval": evaluated}  # fmt: skip
    torch.save(result, os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow  # two spawned processes
def test_two_ranks_equal_batch_norm_on_the_whole_batch(tmp_path):
    spawn_ranks(_rank, (str(tmp_path / "init"), str(tmp_path)), timeout=120)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    model, x = _model(), _data().requires_grad_()
    y = model(x)
    _loss(y, 6 * 25).backward()
    close = {"rtol": 0, "atol": 1e-10}
    for r, shard in enumerate(SHARDS):
        torch.testing.assert_close(ranks[r]["y"], y.detach()[shard], **close)
        # rank r's input gradient is that of the sum of both ranks' losses: 2x the global mean's
        torch.testing.assert_close(ranks[r]["x_grad"], 2 * x.grad[shard], **close)
        for name, p in model.named_parameters():
            torch.testing.assert_close(ranks[r]["grads"][name], p.grad, **close, msg=name)
        for name, value in model[1].state_dict().items():  # unbiased over all 150 values
            torch.testing.assert_close(ranks[r]["stats"][name], value, **close, msg=name)
    lone, alone = cnn.BatchNorm2d(2, dtype=DTYPE), _data()[2:].requires_grad_()
    z = lone(alone)
    (z.abs() ** 2).sum().backward()
    torch.testing.assert_close(ranks[1]["z"], z.detach(), **close)
    torch.testing.assert_close(ranks[1]["z_grad"], alone.grad, **close)
    assert ranks[0]["z"].shape == ranks[0]["z_grad"].shape == (0, 2, 5, 5)
    fresh = cnn.BatchNorm2d(2, dtype=DTYPE).state_dict()
    for r in range(2):
        for name, value in lone.state_dict().items():
            torch.testing.assert_close(ranks[r]["lone"][name], value, **close, msg=name)
        for name, value in fresh.items():  # counted, not updated (as BatchNorm on no values)
            want = value + 1 if name == "num_batches_tracked" else value
            torch.testing.assert_close(ranks[r]["empty"][name], want, rtol=0, atol=0, msg=name)
        for mine, other in zip(ranks[r]["ddp"], ranks[1 - r]["ddp"]):  # one model after steps
            torch.testing.assert_close(mine, other, rtol=0, atol=0)
        synced, by_running_stats, unchanged = ranks[r]["eval"]
        torch.testing.assert_close(synced, by_running_stats, rtol=0, atol=0)
        assert unchanged
        autocast, plain, stats = ranks[r]["autocast"]
        assert autocast.dtype == torch.complex64 and torch.equal(autocast, plain)
        assert not torch.equal(stats["running_mean"], fresh["running_mean"].to(torch.complex64))


def test_in_one_process_it_is_batch_norm_and_the_conversion_keeps_the_tensors():
    untracked = cnn.BatchNorm1d(5, affine=False, track_running_stats=False)
    inner = nn.Sequential(nn.BatchNorm1d(3), untracked)
    model = nn.Sequential(cnn.Conv2d(2, 4, 3), cnn.BatchNorm2d(4), inner)
    model[1].eval()
    old = model[1]
    tensors = [*old.parameters(), *old.buffers()]
    converted = cnn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert converted is model
    assert [type(m) for m in (model[1], model[2][0], model[2][1])] == [
        cnn.SyncBatchNorm, nn.SyncBatchNorm, cnn.SyncBatchNorm]  # fmt: skip
    new = model[1]
    assert not new.training and all(
        a is b for a, b in zip(tensors, [*new.parameters(), *new.buffers()])
    )
    assert model[2][1].running_mean is None and model[2][1].weight is None
    x = torch.randn(3, 4, 5, 5, dtype=torch.complex64)
    for training in (True, False):
        ref = cnn.BatchNorm2d(4).train(training)
        ref.load_state_dict(new.state_dict())
        assert torch.equal(new.train(training)(x), ref(x))
    assert torch.equal(new.running_cov, ref.running_cov)  # both updated once
    for rank in (6, 70):  # any rank, as torch's
        many = torch.randn(2, 4, 2, 3, *[1] * (rank - 4), dtype=torch.complex64)
        for training in (True, False):
            want = ref.train(training)(many.flatten(2)[..., None])
            got = new.train(training)(many)  # compared flat: torch's comparison stops at 64 dims
            assert got.shape == many.shape
            torch.testing.assert_close(got.reshape(want.shape), want)
    with pytest.raises(RuntimeError, match="init_process_group"):
        CF.sync_batch_norm(x, None, None)


def test_the_conversion_keeps_every_hyperparameter_and_the_process_group():
    group = object()  # any handle: it is only stored until a distributed forward
    bn = cnn.BatchNorm1d(3, eps=1e-3, momentum=None, affine=True, bias=False,
                         dtype=torch.complex128)  # fmt: skip
    untracked = cnn.BatchNorm3d(2, momentum=0.25, affine=False, track_running_stats=False)
    model = nn.Sequential(bn, nn.Sequential(untracked, nn.BatchNorm2d(4, eps=1e-2)))
    cnn.SyncBatchNorm.convert_sync_batchnorm(model, process_group=group)
    new, new_untracked, real = model[0], model[1][0], model[1][1]
    assert isinstance(new, cnn.SyncBatchNorm) and isinstance(new_untracked, cnn.SyncBatchNorm)
    assert isinstance(real, nn.SyncBatchNorm)
    assert new.process_group is group and new_untracked.process_group is group
    assert real.process_group is group
    assert (new.num_features, new.eps, new.momentum, new.affine) == (3, 1e-3, None, True)
    assert new.track_running_stats and new.bias is None and new.weight is not None
    assert new.dtype == torch.complex128 and new.running_mean.dtype == torch.complex128
    assert (new_untracked.num_features, new_untracked.momentum) == (2, 0.25)
    assert not new_untracked.affine and not new_untracked.track_running_stats
    assert real.eps == 1e-2
