"""Complex activations against real-valued references, gradients, and complextorch cross-checks."""

import math

import complextorch.nn as ctnn
import pytest
import torch
import torch.nn.functional as F
from reference_ops import (
    EXTREME_MODULI,
    assert_close_to_complex128,
    reference_cardioid,
    reference_modrelu,
)

from cplxnet import functional as CF
from cplxnet.functional import interleaved as _il

DT = torch.complex128


def _z(*shape, dtype=DT):
    return torch.randn(*shape, dtype=dtype)


def _split_ref(fn, z):
    return torch.complex(fn(z.real), fn(z.imag))


@pytest.mark.parametrize(
    "ours, real_fn",
    [
        (CF.crelu, F.relu),
        (CF.split_tanh, torch.tanh),
        (CF.split_sigmoid, torch.sigmoid),
        (CF.split_gelu, F.gelu),
        (lambda z: CF.split_gelu(z, "tanh"), lambda t: F.gelu(t, approximate="tanh")),
    ],
)
def test_split_activations_match_real_function_on_each_part(ours, real_fn):
    z = _z(4, 6, 5)
    torch.testing.assert_close(ours(z), _split_ref(real_fn, z))
    # non-contiguous input (transposed, strided slice) goes through the same path
    zt = z.transpose(0, 2)[::2]
    torch.testing.assert_close(ours(zt), _split_ref(real_fn, zt))
    # real input: the real function itself
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(ours(x), real_fn(x))


def test_crelu_is_not_in_place_and_backward_works_on_a_leaf():
    z = _z(10).requires_grad_()
    before = z.detach().clone()
    out = CF.crelu(z)
    torch.view_as_real(out).sum().backward()
    assert torch.equal(z.detach(), before)
    expected = torch.complex((before.real > 0).double(), (before.imag > 0).double())
    torch.testing.assert_close(z.grad, expected)


def test_modrelu_keeps_phase_and_shifts_modulus():
    z = _z(2000)
    b = -0.5
    out = CF.modrelu(z, b)
    alive = z.abs() + b > 0
    assert alive.any() and (~alive).any()
    torch.testing.assert_close(out[alive].abs(), z[alive].abs() + b)
    torch.testing.assert_close(torch.sgn(out[alive]), torch.sgn(z[alive]))
    assert torch.all(out[~alive] == 0)


def test_modrelu_per_feature_bias_broadcasts():
    z = _z(3, 4)
    bias = torch.tensor([-10.0, 0.0, 0.5, -0.1], dtype=torch.float64)
    out = CF.modrelu(z, bias)
    ref = torch.relu(z.abs() + bias) * z / z.abs()
    torch.testing.assert_close(out, ref)
    assert torch.all(out[:, 0] == 0)


@pytest.mark.parametrize("b", [-0.3, 0.0, 0.7])
def test_modrelu_finite_output_and_gradient_at_zero(b):
    z = torch.zeros(4, dtype=DT, requires_grad=True)
    bias = torch.full((4,), b, dtype=torch.float64, requires_grad=True)
    out = CF.modrelu(z, bias)
    torch.view_as_real(out).sum().backward()
    assert torch.all(out == 0)
    assert torch.isfinite(torch.view_as_real(z.grad)).all()
    assert torch.isfinite(bias.grad).all()


def test_zrelu_keeps_first_quadrant_only():
    z = _z(1000)
    out = CF.zrelu(z)
    ang = torch.angle(z)
    keep = (ang >= 0) & (ang <= math.pi / 2)
    torch.testing.assert_close(out, torch.where(keep, z, torch.zeros_like(z)))
    x = torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(CF.zrelu(x), F.relu(x))


@pytest.mark.parametrize(
    "fn",
    [CF.crelu, CF.split_tanh, CF.split_sigmoid, CF.split_gelu, CF.zrelu, CF.cardioid,
     lambda z: CF.modrelu(z, -0.2), CF.modtanh, CF.zleaky_relu],
    ids=["crelu", "tanh", "sigmoid", "gelu", "zrelu", "cardioid", "modrelu", "modtanh",
         "zleaky"],
)  # fmt: skip
def test_a_nan_stays_nan(fn):
    """A NaN in either part (in any quadrant) gives NaN in the output, as torch's real
    activations keep it: a diverged value is never silently turned into a finite one."""
    nan = float("nan")
    z = torch.tensor([complex(nan, 1), complex(1, nan), complex(nan, -1), complex(-1, nan),
                      complex(nan, nan), 1 + 2j], dtype=DT)  # fmt: skip
    out = fn(z)
    assert out[:5].isnan().all() and not out[5].isnan()


def test_cardioid_matches_angle_formula_and_relu_on_reals():
    z = _z(500)
    ref = 0.5 * (1 + torch.cos(torch.angle(z))) * z
    torch.testing.assert_close(CF.cardioid(z), ref)
    x = torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(CF.cardioid(x), F.relu(x))
    # on the real axis the cardioid is ReLU, on the imaginary axis it halves
    r = torch.tensor([2.0 + 0j, -2.0 + 0j, 3j], dtype=DT)
    torch.testing.assert_close(CF.cardioid(r), torch.tensor([2.0 + 0j, 0j, 1.5j], dtype=DT))


def test_cardioid_gradient_finite_at_zero():
    z = torch.zeros(3, dtype=DT, requires_grad=True)
    torch.view_as_real(CF.cardioid(z)).sum().backward()
    assert torch.isfinite(torch.view_as_real(z.grad)).all()


@pytest.mark.parametrize("fn", [CF.cardioid, lambda z: CF.modrelu(z, 0.5), CF.modtanh])
def test_second_derivatives_finite_at_zero(fn):
    """Double backward (gradient penalties, Hessian-vector products) at ``z = 0``, where exact
    zeros are common (zero padding, masked background): finite, and gradgradcheck holds away
    from it."""
    z = torch.tensor([0j, 1 + 2j, -3 + 0.5j], dtype=DT, requires_grad=True)
    (g,) = torch.autograd.grad(fn(z).real.sum(), z, create_graph=True)
    (gg,) = torch.autograd.grad(g.real.sum() + g.imag.sum(), z)
    assert torch.isfinite(torch.view_as_real(gg)).all()
    assert torch.autograd.gradgradcheck(fn, (z[1:].detach().requires_grad_(),))


@pytest.mark.parametrize(
    "fn",
    [
        CF.crelu,
        CF.split_tanh,
        CF.split_sigmoid,
        CF.split_gelu,
        CF.zrelu,
        CF.cardioid,
        lambda z: CF.modrelu(z, -0.2),
    ],
    ids=["crelu", "tanh", "sigmoid", "gelu", "zrelu", "cardioid", "modrelu"],
)
def test_gradcheck_complex128(fn):
    z = _z(3, 5).requires_grad_()
    assert torch.autograd.gradcheck(fn, (z,))


@pytest.mark.parametrize("numpy_loops", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize(
    "fn", [CF.cardioid, lambda z: CF.modrelu(z, -0.2)], ids=["cardioid", "modrelu"]
)
def test_gradients_through_a_lazy_conjugate(monkeypatch, fn, transpose, numpy_loops):
    """``x.conj()`` without resolve, contiguous or transposed, through the hand-written
    backwards on NumPy's loops or on torch's ops (more than ``NUMPY_MAX_THREADS`` threads)."""
    if not numpy_loops:
        monkeypatch.setattr(_il, "NUMPY_MAX_THREADS", 0)
    x = _z(3, 4).requires_grad_()

    def through_conj(t):
        return fn(t.conj().mT if transpose else t.conj())

    assert torch.autograd.gradcheck(through_conj, (x,))
    assert torch.autograd.gradgradcheck(through_conj, (x,))


def test_modrelu_gradcheck_wrt_bias():
    z = _z(3, 5)
    b = torch.full((5,), -0.2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda bb: CF.modrelu(z, bb), (b,))


def test_complextorch_activations_agree_with_ours_where_defined():
    """complextorch's split/zReLU/cardioid/modReLU compute the same values (we do not reuse them:
    ours run one kernel on ``view_as_real`` and its CReLU writes into its input, see above)."""
    z = _z(200)
    torch.testing.assert_close(ctnn.CTanh()(z), CF.split_tanh(z))
    torch.testing.assert_close(ctnn.CSigmoid()(z), CF.split_sigmoid(z))
    torch.testing.assert_close(ctnn.CGELU()(z), CF.split_gelu(z))
    torch.testing.assert_close(ctnn.zReLU()(z), CF.zrelu(z))
    torch.testing.assert_close(ctnn.CVCardiod()(z), CF.cardioid(z))
    torch.testing.assert_close(ctnn.modReLU(bias=-0.3)(z), CF.modrelu(z, -0.3))
    zc = z.clone()
    ctnn.CReLU()(zc)  # nn.ReLU(inplace=True) on views: overwrites the input
    assert not torch.equal(zc, z)


@pytest.mark.parametrize("b", [-0.3, 0.0, 0.7])
def test_modrelu_and_cardioid_values_and_gradients_at_zero_match_the_reference(b):
    """At ``z = 0`` the hand-written backwards follow the composed reference: modReLU's gradient
    is ``ReLU(b) g`` (``|z|`` replaced by 1), the cardioid's ``g / 2``; the output is 0."""
    from reference_ops import reference_cardioid, reference_modrelu

    z = torch.zeros(5, dtype=DT)
    z[3:] = torch.randn(2, dtype=DT)  # two non-zero entries in the same call
    g = torch.randn(5, dtype=DT)
    bias = torch.full((5,), b, dtype=torch.float64)
    for ours, ref, args in (
        (CF.modrelu, reference_modrelu, (z, bias)),
        (CF.cardioid, reference_cardioid, (z,)),
    ):
        leaves = [t.clone().requires_grad_() for t in args]
        want_leaves = [t.clone().requires_grad_() for t in args]
        out, want = ours(*leaves), ref(*want_leaves)
        assert "Backward" in type(out.grad_fn).__name__ and out.grad_fn is not None
        torch.testing.assert_close(out, want)
        for got, exp in zip(
            torch.autograd.grad(out, leaves, g), torch.autograd.grad(want, want_leaves, g)
        ):
            torch.testing.assert_close(got, exp)


def test_modrelu_gradients_where_the_modulus_is_clipped_match_the_reference():
    """A bias that zeroes about half the entries (``|z| + b <= 0``): there the output and both
    gradients vanish; values and gradients equal the composed reference everywhere."""
    from reference_ops import reference_modrelu

    z = _z(8, 6)
    bias = torch.full((6,), -1.0, dtype=torch.float64)
    assert 0.2 < (z.abs() < 1.0).double().mean() < 0.8  # both regimes present
    leaves = [z.clone().requires_grad_(), bias.clone().requires_grad_()]
    want_leaves = [z.clone().requires_grad_(), bias.clone().requires_grad_()]
    out, want = CF.modrelu(*leaves), reference_modrelu(*want_leaves)
    torch.testing.assert_close(out, want)
    g = _z(8, 6)
    grads = torch.autograd.grad(out, leaves, g), torch.autograd.grad(want, want_leaves, g)
    for got, exp in zip(*grads):
        torch.testing.assert_close(got, exp)


@pytest.mark.parametrize("scale", EXTREME_MODULI)
@pytest.mark.parametrize("bias", [0.5, -0.3, 0.0])
def test_modulus_activations_at_extreme_moduli_equal_a_complex128_reference(scale, bias):
    """modReLU (a positive bias included: its gradient is about b / |z|, 5e19 at 1e-20) and
    cardioid on complex64 inputs whose parts' squares under- or overflow float32, with exact
    zeros, against the references in complex128: values and gradients."""
    g = torch.Generator().manual_seed(3)
    z = torch.randn(5, 4, dtype=torch.complex128, generator=g).mul(scale).to(torch.complex64)
    z[0, :2] = 0
    b = torch.full((4,), bias * (scale if bias < 0 else 1.0))  # a negative one clips some
    assert_close_to_complex128(CF.modrelu, reference_modrelu, z, b)
    assert_close_to_complex128(CF.cardioid, reference_cardioid, z)


def test_mvn_below_the_reciprocal_of_the_largest_float_is_the_origin():
    """Continuous MVN in complex64: a unit phase with a finite gradient down to moduli near
    1e-38; below 1 / the largest float (subnormal moduli, where 1/|z| overflows) the origin's 0,
    with a zero gradient, never inf or NaN."""
    z = torch.tensor([1e-30 + 1e-30j, 3e-41 - 2e-41j, 0j], dtype=torch.complex64,
                     requires_grad=True)  # fmt: skip
    out = CF.mvn(z)
    torch.testing.assert_close(out[0], torch.tensor(1 + 1j, dtype=torch.complex64) / 2**0.5)
    assert out[1] == 0 and out[2] == 0
    (g,) = torch.autograd.grad(torch.view_as_real(out).sum(), z)
    assert torch.isfinite(torch.view_as_real(g)).all() and g[1] == 0 and g[2] == 0


def test_modrelu_first_order_gradient_does_not_depend_on_create_graph():
    """The composed form (double backward, torch.func, compile) needs only 1 / |z|: at 1e-20
    with a positive bias its first-order gradient equals the hand-written backward's."""
    z = torch.full((3,), 0.6e-20 + 0.8e-20j, dtype=torch.complex64, requires_grad=True)
    b = torch.full((3,), 0.5, requires_grad=True)
    g = torch.ones(3, dtype=torch.complex64)
    plain = torch.autograd.grad(CF.modrelu(z, b), (z, b), g)
    graph = torch.autograd.grad(CF.modrelu(z, b), (z, b), g, create_graph=True)
    for a, c in zip(plain, graph, strict=True):
        assert torch.isfinite(torch.view_as_real(c) if c.is_complex() else c).all()
        torch.testing.assert_close(a, c.detach())
    via_func = torch.func.grad(lambda t: CF.modrelu(t, b.detach()).real.sum())(z.detach())
    assert torch.isfinite(torch.view_as_real(via_func)).all()
