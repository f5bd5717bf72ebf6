"""cplxnet.utils.update_bn and replace_all_batch_norm_modules_: torch's batch-norm utilities for
cplxnet's complex batch norms as well as torch's (torch's own find only torch.nn's)."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.optim.swa_utils import update_bn as torch_update_bn

import cplxnet.nn as cnn
from cplxnet.utils import replace_all_batch_norm_modules_, update_bn


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        cnn.Conv2d(2, 3, 3, dtype=torch.complex128),
        cnn.BatchNorm2d(3, momentum=0.3, dtype=torch.complex128),
        cnn.Magnitude(),
        nn.BatchNorm2d(3, dtype=torch.float64),
    )


def _batches():
    torch.manual_seed(1)
    return [torch.randn(4, 2, 6, 6, dtype=torch.complex128) + 1j for _ in range(3)]


def test_update_bn_recomputes_complex_and_real_running_statistics():
    model, batches = _model(), _batches()
    model.eval()
    with torch.no_grad():  # running statistics far from what the data give
        model[1].running_mean.fill_(5.0)
        model[3].running_mean.fill_(5.0)
    theirs = copy.deepcopy(model)
    update_bn([(x, "label") for x in batches], model)  # a list's first element is the input
    torch_update_bn(batches, theirs)
    assert not model.training and model[1].momentum == 0.3 and model[3].momentum == 0.1
    assert int(model[1].num_batches_tracked) == 3
    with torch.no_grad():  # the cumulative average of each batch's statistics
        feats = [model[0](x).transpose(0, 1).reshape(3, -1) for x in batches]
        mean = torch.stack([f.mean(1) for f in feats]).mean(0)
        parts = [torch.view_as_real(f - f.mean(1, keepdim=True)) for f in feats]  # (C, M, 2)
        cov = torch.stack([p.mT @ p / (p.shape[1] - 1) for p in parts]).mean(0)  # (C, 2, 2)
    torch.testing.assert_close(model[1].running_mean, mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(model[1].running_cov, cov.permute(1, 2, 0), rtol=0, atol=1e-12)
    for name, value in theirs[3].state_dict().items():  # torch's batch norm as torch's update
        torch.testing.assert_close(model[3].state_dict()[name], value, rtol=0, atol=1e-12)
    # torch's own leaves cplxnet's at a moving average that still holds the old statistics
    assert (theirs[1].running_mean - mean).abs().min() > 1.0


def test_replace_all_batch_norm_modules_lets_vmap_run_a_training_model():
    model = replace_all_batch_norm_modules_(_model())
    for bn in (model[1], model[3]):
        assert not bn.track_running_stats and bn.running_mean is None
        assert bn.num_batches_tracked is None and not list(bn.buffers())
    x = _batches()[0]
    per_sample = torch.func.vmap(model)(x[:, None])  # each sample its own batch of one
    loop = torch.stack([model(xi[None]) for xi in x])
    torch.testing.assert_close(per_sample, loop, rtol=0, atol=1e-12)


def test_update_bn_after_training_forgets_the_old_statistics_and_unpacks_lists():
    model, batches = _model(), _batches()
    for x in batches * 2:  # trained: 6 batches tracked, statistics of shifted data
        model(x + 3)
    update_bn([[x, 0] for x in batches], model)
    assert int(model[1].num_batches_tracked) == int(model[3].num_batches_tracked) == 3
    fresh = nn.Sequential(
        model[0],
        cnn.BatchNorm2d(3, momentum=None, dtype=torch.complex128),
        model[2],
        nn.BatchNorm2d(3, momentum=None, dtype=torch.float64),
    )
    with torch.no_grad():
        for x in batches:
            fresh(x)
    for i in (1, 3):
        for name, value in fresh[i].state_dict().items():
            torch.testing.assert_close(model[i].state_dict()[name], value, rtol=0, atol=1e-12)


def test_update_bn_and_replace_find_cplxnets_sync_batch_norm():
    torch.manual_seed(0)
    model = nn.Sequential(cnn.SyncBatchNorm(3, momentum=0.3, dtype=torch.complex128))
    batches = [torch.randn(4, 3, 5, 5, dtype=torch.complex128) + 1j * k for k in range(3)]
    with torch.no_grad():
        model[0].running_mean.fill_(5.0)
    model.eval()
    update_bn(batches, model)  # one process: SyncBatchNorm is BatchNorm
    ref = cnn.BatchNorm2d(3, momentum=None, dtype=torch.complex128)
    with torch.no_grad():
        for x in batches:
            ref(x)
    assert model[0].momentum == 0.3 and not model.training
    for name, value in ref.state_dict().items():
        torch.testing.assert_close(model[0].state_dict()[name], value, rtol=0, atol=1e-12)
    replace_all_batch_norm_modules_(model)
    assert not model[0].track_running_stats and not list(model[0].buffers())


def test_update_bn_moves_each_batch_to_the_given_device():
    seen = []

    class Spy(nn.Module):
        def forward(self, x):
            seen.append(x.device.type)
            return x

    # meta: a second device on any machine; the model lives there, the loader's batches do not
    model = nn.Sequential(Spy(), cnn.BatchNorm2d(3, dtype=torch.complex128, device="meta"))
    loader = [(torch.randn(4, 3, 5, 5, dtype=torch.complex128), 0) for _ in range(2)]
    update_bn(loader, model, device=torch.device("meta"))
    assert seen == ["meta", "meta"]
