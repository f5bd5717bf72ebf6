"""cplxnet's layers inside the torch machinery a researcher wraps around them: parametrizations,
activation checkpointing, gradient clipping, pruning, optimisers and hooks behave as with
torch's own layers (values against the unwrapped run or the definition)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize, prune
from torch.utils.checkpoint import checkpoint

import cplxnet.nn as cnn


def _block() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        cnn.Conv2d(2, 4, 3, padding=1), cnn.BatchNorm2d(4), cnn.CReLU(), cnn.Dropout2d(0.3),
        cnn.Conv2d(4, 1, 1),
    )  # fmt: skip


def test_orthogonal_parametrization_gives_a_unitary_weight_that_trains():
    layer = parametrizations.orthogonal(cnn.Linear(6, 6))
    w = layer.weight
    assert torch.allclose(w.conj().T @ w, torch.eye(6, dtype=w.dtype), atol=1e-5)
    x = torch.randn(3, 6, dtype=torch.complex64)
    torch.testing.assert_close((x @ w.T).norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    before = layer.weight.detach().clone()
    layer(x).real.sum().backward()  # a norm-dependent loss would give a unitary W no gradient
    opt.step()
    w = layer.weight
    assert not torch.allclose(w, before)
    assert torch.allclose(w.conj().T @ w, torch.eye(6, dtype=w.dtype), atol=1e-5)


def test_a_custom_parametrization_equals_the_weight_changed_by_hand():
    class Half(nn.Module):
        def forward(self, w):
            return 0.5 * w

    layer = cnn.Conv2d(2, 3, 3)
    x = torch.randn(1, 2, 5, 5, dtype=torch.complex64)
    plain = cnn.Conv2d(2, 3, 3)
    with torch.no_grad():
        plain.weight.copy_(0.5 * layer.weight)
        plain.bias.copy_(layer.bias)
    parametrize.register_parametrization(layer, "weight", Half())
    assert torch.equal(layer(x), plain(x))


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointing_equals_the_plain_run_with_dropout_and_batch_norm(reentrant):
    x = torch.randn(4, 2, 6, 6, dtype=torch.complex64)
    runs = []
    for wrap in (False, True):
        block, inp = _block(), x.clone().requires_grad_()
        torch.manual_seed(1)
        y = checkpoint(block, inp, use_reentrant=reentrant) if wrap else block(inp)
        (y.abs() ** 2).sum().backward()
        runs.append([y.detach(), inp.grad, *(p.grad for p in block.parameters())])
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_gradient_clipping_uses_the_complex_norm():
    block, x = _block(), torch.randn(4, 2, 6, 6, dtype=torch.complex64)
    (block(x).abs() ** 2).sum().backward()
    grads = [p.grad for p in block.parameters()]
    norm = torch.sqrt(sum((g.abs() ** 2).sum() for g in grads))
    total = nn.utils.clip_grad_norm_(block.parameters(), 0.1)
    torch.testing.assert_close(total, norm)
    clipped = torch.sqrt(sum((p.grad.abs() ** 2).sum() for p in block.parameters()))
    torch.testing.assert_close(clipped, torch.tensor(0.1), rtol=1e-4, atol=0)


def test_pruning_a_complex_weight_removes_the_smallest_moduli():
    layer = cnn.Linear(8, 4)
    weight = layer.weight.detach().clone()
    prune.l1_unstructured(layer, "weight", amount=0.5)
    kept = layer.weight_mask.bool()
    assert int(kept.sum()) == 16
    assert weight.abs()[kept].min() >= weight.abs()[~kept].max()
    assert torch.equal(layer.weight, weight * kept)


@pytest.mark.parametrize("opt", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD])
def test_optimisers_foreach_equal_their_loop_on_complex_parameters(opt):
    kwargs = {"lr": 0.01, **({"momentum": 0.9, "nesterov": True} if opt is torch.optim.SGD else {})}
    x = torch.randn(4, 2, 6, 6, dtype=torch.complex64)
    states = []
    for foreach in (False, True):
        block = _block().eval()
        optimizer = opt(block.parameters(), foreach=foreach, **kwargs)
        for _ in range(3):
            optimizer.zero_grad()
            (block(x).abs() ** 2).mean().backward()
            optimizer.step()
        states.append([p.detach() for p in block.parameters()])
    for a, b in zip(*states):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_full_backward_hooks_see_autograd_gradients():
    layer, seen = cnn.MultiheadAttention(8, 2, batch_first=True), {}
    layer.register_full_backward_hook(lambda m, gin, gout: seen.update(gin=gin, gout=gout))
    q, k, v = (torch.randn(2, 5, 8, dtype=torch.complex64, requires_grad=True) for _ in range(3))
    out = layer(q, k, v, need_weights=False)[0]
    (out.abs() ** 2).sum().backward()
    for got, want in zip(seen["gin"], (q.grad, k.grad, v.grad)):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(seen["gout"][0], 2 * out.detach())  # d|z|^2 as torch: 2z


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_spectral_norm_scales_to_the_largest_singular_value(dtype):
    """``parametrizations.spectral_norm`` on a complex weight: the largest singular value of the
    normalised weight is 1; a transposed convolution takes ``dim=1``, as torch picks for its own
    (the choice reads ``isinstance(m, nn.ConvTranspose*)``), and then equals torch's layer."""
    torch.manual_seed(0)
    lin = parametrizations.spectral_norm(cnn.Linear(5, 3, dtype=dtype), n_power_iterations=100)
    sigma = torch.linalg.matrix_norm(lin.weight.detach(), ord=2)
    torch.testing.assert_close(sigma, torch.ones((), dtype=sigma.dtype), rtol=1e-4, atol=0)
    ours, theirs = (
        cnn.ConvTranspose2d(3, 2, 3, dtype=dtype),
        nn.ConvTranspose2d(3, 2, 3, dtype=dtype),
    )
    theirs.load_state_dict(ours.state_dict())
    parametrizations.spectral_norm(ours, n_power_iterations=100, dim=1)
    parametrizations.spectral_norm(theirs, n_power_iterations=100)
    torch.testing.assert_close(ours.weight, theirs.weight, rtol=1e-4, atol=1e-6)


def test_a_residual_block_adds_in_place_after_batch_norm():
    """torchvision's BasicBlock, ``out = bn2(conv2(...)); out += identity; relu``, trains with
    cplxnet's layers (``zrelu`` as the in-place-free nonlinearity) and gives the gradients of
    the out-of-place sum."""

    def run(in_place: bool):
        torch.manual_seed(0)
        conv, bn = cnn.Conv2d(2, 2, 3, padding=1), cnn.BatchNorm2d(2)
        leaf = torch.randn(2, 2, 5, 5, dtype=torch.complex64, requires_grad=True)
        x = leaf * 1
        out = bn(conv(x))
        if in_place:
            out += x
        else:
            out = out + x
        (cnn.ZReLU()(out).abs() ** 2).sum().backward()
        return [leaf.grad, *(p.grad for p in [*conv.parameters(), *bn.parameters()])]

    for a, b in zip(run(False), run(True)):
        torch.testing.assert_close(b, a)


def test_torch_utilities_that_refuse_complex_parameters():
    """Torch's utilities that refuse complex parameters (its own complex layers alike), as the
    README names them: ``weight_norm``, ``clip_grad_value_``, ``GradScaler``; and the hook-based
    ``nn.utils.spectral_norm`` normalises to the wrong scale (``parametrizations`` is right). A
    test that starts failing means torch added the support: update the README."""
    torch.manual_seed(0)
    with pytest.raises(RuntimeError, match="not implemented for 'Complex"):
        parametrizations.weight_norm(cnn.Linear(4, 3))(torch.randn(2, 4, dtype=torch.complex64))
    lin = cnn.Linear(4, 3)
    lin(torch.randn(2, 4, dtype=torch.complex64)).abs().sum().backward()
    with pytest.raises(RuntimeError, match="complex"):
        nn.utils.clip_grad_value_(lin.parameters(), 0.1)
    scaler, step = torch.amp.GradScaler("cpu"), torch.optim.SGD(lin.parameters(), lr=0.1)
    lin.zero_grad()
    scaler.scale(lin(torch.randn(2, 4, dtype=torch.complex64)).abs().sum()).backward()
    with pytest.raises(RuntimeError, match="not implemented for 'Complex"):
        scaler.step(step)
    hooked = nn.utils.spectral_norm(cnn.Linear(5, 3, dtype=torch.complex128), n_power_iterations=50)
    for _ in range(20):
        hooked(torch.randn(2, 5, dtype=torch.complex128))
    assert abs(torch.linalg.matrix_norm(hooked.weight.detach(), ord=2).item() - 1) > 0.01


def test_parameters_to_vector_keeps_real_parameters_real():
    """``cplxnet.utils.parameters_to_vector`` / ``vector_to_parameters``: one real vector
    (complex parameters as (re, im) pairs, ``count_parameters``' total in reals) that writes
    back in each parameter's dtype; torch's pair turns a norm's real gains complex."""
    from cplxnet.utils import count_parameters, parameters_to_vector, vector_to_parameters

    def model():
        torch.manual_seed(0)
        return nn.Sequential(cnn.Linear(3, 5), cnn.LayerNorm(5), cnn.Linear(5, 2, bias=False))

    ours, theirs = model(), model()
    scale = nn.Parameter(torch.ones(3))  # 3 reals first: the complex ones at odd offsets (copies)
    params = [scale, *ours.parameters()]
    x = torch.randn(4, 3, dtype=torch.complex64)
    before = [p.detach().clone() for p in params]
    vec = parameters_to_vector(params)
    assert vec.dtype == torch.float32 and vec.numel() == count_parameters(ours).total_real + 3 == 83
    vector_to_parameters(2 * vec, params)
    for p, old in zip(params, before):
        assert p.dtype == old.dtype and torch.equal(p, 2 * old)
    ours(x)  # still runs
    nn.utils.vector_to_parameters(nn.utils.parameters_to_vector(theirs.parameters()),
                                  theirs.parameters())  # fmt: skip
    assert theirs[1].weight.is_complex()  # torch's: the real gains became complex
    for bad, message in [(vec[:-1], "the parameters hold 83 reals, the vector 82"),
                         (vec.to(torch.complex64), "expected a real 1-D tensor"),
                         (vec[None], "expected a real 1-D tensor")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            vector_to_parameters(bad, params)
