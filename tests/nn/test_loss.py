"""Complex losses against plain formulas, torch's real losses and torch's gradient convention."""

import pytest
import torch
import torch.nn.functional as F

from cplxnet import functional as CF
from cplxnet import nn as cnn

D = torch.complex128


def _z(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=D, generator=g)


def _polar_compress(z, c):
    return torch.polar(z.abs() ** c, z.angle())


# plain formulas (per element, before the mean) written from the papers' definitions
REFERENCES = {
    "mse": (cnn.MSELoss(), lambda z, t: ((z - t).real ** 2 + (z - t).imag ** 2).mean()),
    "l1": (cnn.L1Loss(), lambda z, t: ((z - t).real ** 2 + (z - t).imag ** 2).sqrt().mean()),
    "magnitude": (cnn.MagnitudeLoss(), lambda z, t: ((z.abs() - t.abs()) ** 2).mean()),
    "phase_aware": (
        cnn.PhaseAwareLoss(power=0.3, alpha=0.3, eps=0.0),
        lambda z, t: (
            0.3 * (_polar_compress(z, 0.3) - _polar_compress(t, 0.3)).abs() ** 2
            + 0.7 * (z.abs() ** 0.3 - t.abs() ** 0.3) ** 2
        ).mean(),
    ),
}


@pytest.mark.parametrize("name", REFERENCES)
def test_loss_equals_its_formula_in_values_and_gradients(name):
    module, reference = REFERENCES[name]
    z = _z(4, 5).requires_grad_()
    t = _z(4, 5, seed=1).requires_grad_()
    ours = module(z, t)
    ref = reference(z, t)
    assert ours.dtype == torch.float64 and ours.dim() == 0
    torch.testing.assert_close(ours, ref)
    g_ours = torch.autograd.grad(ours, (z, t))
    g_ref = torch.autograd.grad(ref, (z, t))
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", REFERENCES)
def test_gradient_is_torch_convention_d_dx_plus_i_d_dy(name):
    """The complex gradient equals dL/dx + i dL/dy computed on the real parts as leaves."""
    module, _ = REFERENCES[name]
    xy = torch.view_as_real(_z(3, 4)).clone().requires_grad_()
    t = _z(3, 4, seed=2)
    (g_parts,) = torch.autograd.grad(module(torch.view_as_complex(xy), t), xy)
    z = _z(3, 4).requires_grad_()
    (g_complex,) = torch.autograd.grad(module(z, t), z)
    torch.testing.assert_close(torch.view_as_real(g_complex), g_parts)


def test_mse_is_twice_torch_real_mse_on_the_parts_and_its_gradient_is_2e_over_n():
    z, t = _z(6, 3).requires_grad_(), _z(6, 3, seed=3)
    loss = cnn.MSELoss()(z, t)
    real = F.mse_loss(torch.view_as_real(z), torch.view_as_real(t))
    torch.testing.assert_close(loss, 2 * real)
    loss.backward()
    torch.testing.assert_close(z.grad, 2 * (z - t).detach() / z.numel())


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("fn", [CF.mse_loss, CF.l1_loss, CF.magnitude_loss, CF.phase_aware_loss])
def test_reductions(fn, reduction):
    z, t = _z(3, 4), _z(3, 4, seed=4)
    none = fn(z, t, reduction="none")
    assert none.shape == (3, 4) and not none.is_complex()
    expected = {"none": none, "sum": none.sum(), "mean": none.mean()}[reduction]
    torch.testing.assert_close(fn(z, t, reduction=reduction), expected)


@pytest.mark.parametrize("torch_fn, ours", [(F.mse_loss, CF.mse_loss), (F.l1_loss, CF.l1_loss)])
def test_real_tensors_give_torch_loss_and_element_weights_follow_torch(torch_fn, ours):
    x, y = _z(3, 4).real, _z(3, 4, seed=5).real
    w = torch.rand(3, 4, dtype=torch.float64)
    for kwargs in ({}, {"reduction": "sum"}, {"weight": w}, {"weight": w, "reduction": "none"}):
        torch.testing.assert_close(ours(x, y, **kwargs), torch_fn(x, y, **kwargs))
    # on complex tensors the weighted mean divides by the weights' sum, as torch's
    z, t = _z(3, 4), _z(3, 4, seed=6)
    elem = ours(z, t, reduction="none")
    torch.testing.assert_close(ours(z, t, weight=w), (elem * w).sum() / w.sum())
    with pytest.raises(ValueError, match="weight must have the input's size"):
        ours(z, t, weight=w[:1])


@pytest.mark.parametrize(
    "cls, torch_cls", [(cnn.MSELoss, torch.nn.MSELoss), (cnn.L1Loss, torch.nn.L1Loss)]
)
def test_torch_positional_and_legacy_arguments(cls, torch_cls):
    for args in ((None, None, "sum"), (False,), (None, False), (True, True, "none")):
        assert cls(*args).reduction == torch_cls(*args).reduction, args
    with pytest.raises(ValueError, match="unknown reduction 'avg'"):
        cls(reduction="avg")


def test_phase_aware_loss_special_cases_and_finite_gradient_at_zero():
    z, t = _z(5), _z(5, seed=7)
    plain = CF.phase_aware_loss(z, t, power=1.0, alpha=1.0, eps=0.0)
    torch.testing.assert_close(plain, CF.mse_loss(z, t))
    mag = CF.phase_aware_loss(z, t, power=1.0, alpha=0.0, eps=0.0)
    torch.testing.assert_close(mag, CF.magnitude_loss(z, t))
    zero = torch.zeros(3, dtype=D, requires_grad=True)
    CF.phase_aware_loss(zero, _z(3)).backward()
    assert torch.isfinite(torch.view_as_real(zero.grad)).all()
    with pytest.raises(ValueError, match="alpha must be in"):
        cnn.PhaseAwareLoss(alpha=1.5)


@pytest.mark.parametrize("score, read", [("real", torch.real), ("magnitude", torch.abs)])
def test_cross_entropy_reads_the_stated_score(score, read):
    logits = _z(6, 4).requires_grad_()
    target = torch.tensor([0, 3, 1, 2, 3, 0])
    weight = torch.rand(4, dtype=torch.float64)
    ours = cnn.CrossEntropyLoss(weight, None, 3, None, "mean", 0.1, score=score)
    ref_logits = logits.detach().clone().requires_grad_()
    ref = F.cross_entropy(
        read(ref_logits), target, weight=weight, ignore_index=3, label_smoothing=0.1
    )
    loss = ours(logits, target)
    torch.testing.assert_close(loss, ref)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(logits.grad, ref_logits.grad)
    # probabilities as the target, and real logits: torch's loss
    probs = torch.softmax(torch.randn(6, 4, dtype=torch.float64), -1)
    torch.testing.assert_close(
        cnn.CrossEntropyLoss(score=score)(logits, probs), F.cross_entropy(read(logits), probs)
    )
    x = logits.detach().real
    torch.testing.assert_close(
        cnn.CrossEntropyLoss()(x, target), torch.nn.CrossEntropyLoss()(x, target)
    )


def test_cross_entropy_arguments_land_where_torch_puts_them():
    w = torch.ones(3)
    ours = cnn.CrossEntropyLoss(w, None, 2, None, "sum", 0.2)
    theirs = torch.nn.CrossEntropyLoss(w, None, 2, None, "sum", 0.2)
    for name in ("ignore_index", "reduction", "label_smoothing"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert torch.equal(ours.weight, theirs.weight)
    assert ours.score == "real"
    with pytest.raises(ValueError, match="unknown score 'phase'"):
        cnn.CrossEntropyLoss(score="phase")
    with pytest.raises(TypeError):
        cnn.CrossEntropyLoss(w, None, 2, None, "sum", 0.2, "real")  # score is keyword-only


def test_bad_inputs_name_the_loss():
    with pytest.raises(TypeError, match="mse_loss: target must be a complex or floating tensor"):
        CF.mse_loss(_z(3), torch.tensor([1, 2, 3]))
    with pytest.warns(UserWarning, match="l1_loss: target size"):
        CF.l1_loss(_z(3, 4), _z(1, 4))


def test_phase_aware_loss_at_exact_zeros_with_eps_0_and_at_large_moduli():
    z = torch.tensor([0j, 1 + 1j, 2 - 1j], dtype=D, requires_grad=True)
    t = torch.tensor([0j, 1j, 0j], dtype=D)
    ours = CF.phase_aware_loss(z, t, eps=0.0)  # zero-padded frames: |0|^c = 0, no NaN
    ref = REFERENCES["phase_aware"][1](z[1:], t[1:]) * 2 / 3  # the zero pair contributes 0
    torch.testing.assert_close(ours, ref)
    (grad,) = torch.autograd.grad(ours, z)
    assert bool(torch.isfinite(torch.view_as_real(grad)).all()) and grad[0] == 0
    big = torch.tensor([1e20 + 0j], dtype=torch.complex64)  # |z|^2 overflows float32
    torch.testing.assert_close(
        CF.phase_aware_loss(big, torch.zeros_like(big), eps=1e-12),
        torch.tensor(1e20**0.6, dtype=torch.float32),
    )
    with pytest.raises(ValueError, match="eps >= 0"):
        CF.phase_aware_loss(z, t, eps=-1.0)


def test_phase_aware_loss_defaults_are_the_papers():
    import inspect

    params = inspect.signature(CF.phase_aware_loss).parameters
    assert (params["power"].default, params["alpha"].default) == (0.3, 0.3)
    assert params["eps"].default == 1e-12
    module = cnn.PhaseAwareLoss()
    assert (module.power, module.alpha, module.eps) == (0.3, 0.3, 1e-12)


@pytest.mark.parametrize("fn", [CF.mse_loss, CF.l1_loss])
def test_complex_element_weights_apply_for_every_reduction(fn):
    z, t = _z(3, 4), _z(3, 4, seed=8)
    w = torch.rand(3, 4, dtype=torch.float64)
    elem = fn(z, t, reduction="none")
    torch.testing.assert_close(fn(z, t, reduction="none", weight=w), elem * w)
    torch.testing.assert_close(fn(z, t, reduction="sum", weight=w), (elem * w).sum())


def test_phase_aware_loss_with_power_1_alpha_1_eps_0_is_mse_also_at_an_exact_zero():
    """rho^(c-1) at rho = 0 takes its limit 1 for c = 1: a zero output still moves."""
    z = torch.tensor([0j, 1 + 1j], dtype=D, requires_grad=True)
    t = torch.tensor([1 + 2j, 0j], dtype=D)
    ours = CF.phase_aware_loss(z, t, power=1.0, alpha=1.0, eps=0.0)
    mse = CF.mse_loss(z, t)
    torch.testing.assert_close(ours, mse)
    torch.testing.assert_close(torch.autograd.grad(ours, z)[0], torch.autograd.grad(mse, z)[0])
    with pytest.raises(ValueError, match="eps >= 0 \\(finite\\)"):
        cnn.PhaseAwareLoss(eps=float("inf"))
