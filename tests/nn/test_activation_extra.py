"""Parametric split and amplitude-phase activations against plain formulas (values, gradients)."""

import cmath
import math

import pytest
import torch
import torch.nn.functional as F

from cplxnet import functional as CF
from cplxnet import nn as cnn

D = torch.complex128


def _z(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=D, generator=g)


def _split_ref(fn):
    return lambda z: torch.complex(fn(z.real), fn(z.imag))


W = torch.tensor([0.1, -0.3, 0.7], dtype=torch.float64)
CASES = {
    "prelu": (lambda z: CF.split_prelu(z, W), _split_ref(lambda t: F.prelu(t, W))),
    "elu": (
        lambda z: CF.split_elu(z, 0.5),
        _split_ref(lambda t: torch.where(t > 0, t, 0.5 * (t.exp() - 1))),
    ),
    "celu": (
        lambda z: CF.split_celu(z, 2.0),
        _split_ref(lambda t: t.clamp(min=0) + (2.0 * ((t / 2.0).exp() - 1)).clamp(max=0)),
    ),
    "leaky_relu": (
        lambda z: CF.split_leaky_relu(z, 0.2),
        _split_ref(lambda t: torch.where(t >= 0, t, 0.2 * t)),
    ),
    "zleaky": (
        lambda z: CF.zleaky_relu(z, 0.2),
        lambda z: torch.where((z.real >= 0) & (z.imag >= 0), z, 0.2 * z),
    ),
    "modtanh": (CF.modtanh, lambda z: torch.polar(torch.tanh(z.abs()), z.angle())),
    "georgiou_koutsougeras": (
        lambda z: CF.georgiou_koutsougeras(z, 0.5, 2.0),
        lambda z: torch.polar(z.abs() / (0.5 + z.abs() / 2.0), z.angle()),
    ),
    "mvn_continuous": (CF.mvn, lambda z: torch.polar(torch.ones_like(z.real), z.angle())),
}


@pytest.mark.parametrize("name", CASES)
def test_activation_equals_its_formula_in_values_and_gradients(name):
    ours_fn, ref_fn = CASES[name]
    z = _z(4, 3, 2).requires_grad_()
    ours, ref = ours_fn(z), ref_fn(z)
    torch.testing.assert_close(ours, ref)
    cot = _z(4, 3, 2, seed=1)
    (g1,) = torch.autograd.grad(ours, z, cot)
    (g2,) = torch.autograd.grad(ref, z, cot)
    torch.testing.assert_close(g1, g2)


@pytest.mark.parametrize("name", CASES)
def test_activation_gradcheck_complex128(name):
    ours_fn, _ = CASES[name]
    assert torch.autograd.gradcheck(ours_fn, (_z(3, 3, 2).requires_grad_(),))


def test_amplitude_phase_activations_are_finite_at_the_origin_and_keep_the_phase():
    zero = torch.zeros(2, dtype=D, requires_grad=True)
    for fn in (CF.modtanh, CF.mvn, lambda z: CF.georgiou_koutsougeras(z, 1.0, 1.0)):
        out = fn(zero)
        assert torch.equal(out, torch.zeros_like(out))
        (g,) = torch.autograd.grad(torch.view_as_real(out).sum(), zero)
        assert torch.isfinite(torch.view_as_real(g)).all()
    z = _z(50)
    for fn in (CF.modtanh, CF.mvn, lambda z: CF.georgiou_koutsougeras(z, 1.0, 3.0)):
        torch.testing.assert_close(fn(z).angle(), z.angle())
    assert (CF.georgiou_koutsougeras(100 * z, 1.0, 3.0).abs() < 3.0).all()
    assert (CF.modtanh(100 * z).abs() <= 1.0 + 1e-12).all()


@pytest.mark.parametrize("sectors", [2, 3, 4, 7])
def test_discrete_mvn_is_the_root_of_unity_of_the_sector(sectors):
    z = _z(200)
    out = CF.mvn(z, sectors)
    for v, o in zip(z.tolist(), out.tolist()):
        angle = cmath.phase(v) % (2 * math.pi)
        j = math.floor(sectors * angle / (2 * math.pi))
        assert abs(o - cmath.exp(2j * math.pi * j / sectors)) < 1e-12
    # the axes are sector edges for 2 and 4 sectors: an edge belongs to the sector it opens
    if sectors in (2, 4):
        axes = torch.tensor([1, 1j, -1, -1j], dtype=D)[:: 4 // sectors]
        torch.testing.assert_close(CF.mvn(axes, sectors), axes, rtol=0, atol=1e-15)
    assert CF.mvn(torch.zeros(1, dtype=D), sectors).item() == 1


def test_discrete_mvn_backward_is_the_continuous_mvn_gradient():
    z = _z(5, 3).requires_grad_()
    cot = _z(5, 3, seed=4)
    (g_discrete,) = torch.autograd.grad(CF.mvn(z, 5), z, cot)
    (g_continuous,) = torch.autograd.grad(CF.mvn(z), z, cot)
    torch.testing.assert_close(g_discrete, g_continuous)


INPLACE_SPLIT = [(CF.split_elu, F.elu), (CF.split_celu, F.celu)]
INPLACE_SPLIT += [(CF.split_leaky_relu, F.leaky_relu)]


def test_inplace_elu_and_celu_overwrite_and_return_the_input():
    for fn, ref in (
        (CF.split_elu, F.elu),
        (CF.split_celu, F.celu),
        (CF.split_leaky_relu, F.leaky_relu),
    ):
        z = _z(4, 3)
        expected = torch.complex(ref(z.real, 0.6), ref(z.imag, 0.6))
        out = fn(z, 0.6, inplace=True)
        assert out is z
        torch.testing.assert_close(z, expected)
    m = cnn.ELU(inplace=True)
    assert "inplace=True" in repr(m)
    m = cnn.LeakyReLU(0.2, True)
    assert (
        repr(m)
        == "LeakyReLU(negative_slope=0.2, inplace=True)"
        == repr(torch.nn.LeakyReLU(0.2, True))
    )
    x = torch.randn(4, 3)
    torch.testing.assert_close(cnn.LeakyReLU(0.2)(x), torch.nn.LeakyReLU(0.2)(x))  # real input
    assert cnn.LeakyReLU().negative_slope == torch.nn.LeakyReLU().negative_slope


def test_inplace_elu_and_celu_on_a_lazy_conjugate_write_through_it():
    for fn, ref in (
        (CF.split_elu, F.elu),
        (CF.split_celu, F.celu),
        (CF.split_leaky_relu, F.leaky_relu),
    ):
        base = _z(4, 3)
        z = base.conj()
        expected = torch.complex(ref(base.real, 0.6), ref(-base.imag, 0.6))
        out = fn(z, 0.6, inplace=True)
        assert out is z
        torch.testing.assert_close(z.resolve_conj(), expected)
        torch.testing.assert_close(base, expected.conj())  # the memory under the view


def test_prelu_takes_torch_arguments_and_a_real_dtype_loads_torch_state_dict():
    ours, theirs = cnn.PReLU(3, 0.1), torch.nn.PReLU(3, 0.1)
    assert ours.num_parameters == theirs.num_parameters and ours.init == theirs.init
    assert ours.weight.dtype == torch.float32 and torch.equal(ours.weight, theirs.weight)
    real = cnn.PReLU(3, dtype=torch.float32)
    torch.nn.init.uniform_(theirs.weight)
    real.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(real(x), theirs(x))
    with pytest.raises(ValueError, match="PReLU: expected 3 channels on dim 1"):
        ours(torch.randn(2, 4, dtype=torch.cfloat))
    with pytest.raises(ValueError, match="num_parameters must be >= 1"):
        cnn.PReLU(0)


def test_activation_arguments_are_torch_and_bad_values_are_refused():
    assert cnn.ELU().alpha == torch.nn.ELU().alpha and cnn.CELU(0.5).alpha == 0.5
    assert cnn.ZLeakyReLU().negative_slope == torch.nn.LeakyReLU().negative_slope
    with pytest.raises(ValueError, match="sectors must be an integer >= 2"):
        cnn.MVN(1)
    with pytest.raises(TypeError, match="MVN: input must be complex"):
        cnn.MVN()(torch.randn(3))
    with pytest.raises(ValueError, match="c and r must be positive"):
        cnn.GeorgiouKoutsougeras(c=0.0)


@pytest.mark.parametrize("fn", [CF.crelu, CF.split_tanh, lambda z: CF.split_elu(z, 0.6)])
def test_split_activations_take_a_lazy_conjugate_in_channels_last_layout(fn):
    """The permuted path of a dense non-contiguous input (channels-last) on ``x.conj()``."""
    x = torch.randn(2, 3, 4, 5, dtype=torch.complex128).to(memory_format=torch.channels_last)
    lazy = x.conj()
    assert lazy.is_conj() and not lazy.is_contiguous()
    torch.testing.assert_close(fn(lazy), fn(lazy.resolve_conj()))


@pytest.mark.parametrize("dtype", [torch.complex64, D])
def test_discrete_mvn_maps_every_root_of_unity_to_itself(dtype):
    for k in range(2, 65):
        angles = torch.arange(k, dtype=torch.float64) * (2 * math.pi / k)
        roots = torch.polar(torch.ones(k, dtype=torch.float64), angles).to(dtype)
        torch.testing.assert_close(CF.mvn(roots, k), roots, atol=1e-6, rtol=0, msg=f"k={k}")


def test_zero_dim_input_at_one_thread_takes_the_torch_path():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # where the NumPy modulus would run
    try:
        z = torch.tensor(1 + 1j, dtype=D)
        torch.testing.assert_close(CF.cardioid(z), CF.cardioid(z.reshape(1))[0])
        torch.testing.assert_close(CF.modrelu(z, -0.5), CF.modrelu(z.reshape(1), -0.5)[0])
        assert cnn.Cardioid()(z).dim() == 0
    finally:
        torch.set_num_threads(threads)


def test_split_prelu_refuses_several_slopes_without_a_channel_dim():
    with pytest.raises(ValueError, match="split_prelu: an input of 1 dim.*got 2"):
        CF.split_prelu(torch.tensor([-1 - 1j, -1 - 1j]), torch.tensor([0.1, 0.9]))
    out = CF.split_prelu(torch.tensor([-1 - 1j]), torch.tensor([0.1]))
    torch.testing.assert_close(out, torch.tensor([-0.1 - 0.1j]))


def test_modrelu_bias_of_more_dims_broadcasts_as_the_formula():
    z = _z(4).requires_grad_()
    b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    ours = CF.modrelu(z, b)
    ref = torch.relu(z.abs() + b) * z / z.abs()
    torch.testing.assert_close(ours, ref)
    g = _z(3, 4, seed=2)
    for a, r in zip(torch.autograd.grad((ours * g.conj()).real.sum(), (z, b)),
                    torch.autograd.grad((ref * g.conj()).real.sum(), (z, b))):  # fmt: skip
        torch.testing.assert_close(a, r)


@pytest.mark.parametrize(
    ("module", "torch_module"),
    [(cnn.CReLU(inplace=True), torch.nn.ReLU(inplace=True)),
     (cnn.ZLeakyReLU(0.1, inplace=True), torch.nn.LeakyReLU(0.1, inplace=True))],
)  # fmt: skip
def test_crelu_and_zleaky_relu_take_torchs_inplace(module, torch_module):
    import inspect

    torch_params = inspect.signature(type(torch_module)).parameters
    assert list(inspect.signature(type(module)).parameters) == list(torch_params)
    z = _z(6)
    expected = type(module)(*([0.1] if isinstance(module, cnn.ZLeakyReLU) else []))(z)
    for x in (z.clone(), z.conj().clone().conj()):  # plain and a lazy conjugate view
        assert module(x) is x
        torch.testing.assert_close(x.resolve_conj(), expected)
    r = _z(6).real.clone()
    torch.testing.assert_close(module(r.clone()), torch_module(r.clone()))
    assert "inplace=True" in repr(module)


def test_modtanh_gradient_at_the_origin_is_its_limit_one():
    z = torch.zeros(1, dtype=D, requires_grad=True)
    out = CF.modtanh(z)
    (gx,) = torch.autograd.grad(out.real.sum(), z, retain_graph=True)
    (gy,) = torch.autograd.grad(out.imag.sum(), z)
    torch.testing.assert_close(gx, torch.ones(1, dtype=D))  # d Re / dx = 1, d Re / dy = 0
    torch.testing.assert_close(gy, torch.full((1,), 1j, dtype=D))
