"""The opt-in compiled complex64 kernels of modReLU, cardioid and the split and whitening
layer norms (:mod:`cplxnet.functional.compiled`) against the composed references
(``tests/reference_ops.py``): values and gradients (first and second order), guarded zeros, bias
layouts, padding and constant rows, conj and strided inputs, and the switch itself. complex128
inputs keep the eager implementations, whose complex128 gradcheck is in ``test_fast_paths.py``;
here the kernels are also compared with the eager hand-written backward on the same complex64
data."""

import shutil

import pytest
import torch
from reference_ops import (
    COMPLEX_ORDER_SHAPES,
    EXTREME_MODULI,
    assert_close_to_complex128,
    reference_cardioid,
    reference_complex_order,
    reference_layer_norm,
    reference_modrelu,
)

from cplxnet import functional as CF
from cplxnet.functional import compiled as kernels

pytestmark = pytest.mark.skipif(
    shutil.which("c++") is None and shutil.which("g++") is None,
    reason="torch.compile's CPU back end needs a C++ compiler",
)

C64 = torch.complex64
TOL = {"atol": 2e-6, "rtol": 2e-5}
#: each case below compiles its own kernels (several seconds of C++ each): one case per kernel
#: runs in the fast subset, the other layouts are ``slow`` (CI runs them all)
SLOW = pytest.mark.slow


def _cases(*axes, fast):
    """``pytest.param`` of every combination of ``axes``; all but those in ``fast`` slow."""
    combos = [()]
    for axis in axes:
        combos = [(*c, v) for c in combos for v in axis]

    def name(v):
        return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)

    return [
        pytest.param(*c, marks=() if c in fast else SLOW, id="-".join(map(name, c))) for c in combos
    ]


@pytest.fixture
def compiled():
    previous = CF.use_compiled_kernels(True)
    yield
    CF.use_compiled_kernels(previous)


def _z(*shape, dtype=C64, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*shape, generator=g, dtype=torch.float64)
    b = 0.7 * a + 0.5 * torch.randn(*shape, generator=g, dtype=torch.float64)
    z = torch.complex(2.0 * a + 0.3, 0.6 * b - 1.0).to(dtype)
    z.view(-1)[:: max(z.numel() // 7, 1)] = 0  # exact zeros: the guarded denominators
    return z.requires_grad_()


def _grads(fn, inputs, create_graph=False, seed=1):
    out = fn(*inputs)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(seed))
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    return out, torch.autograd.grad(out, leaves, g, create_graph=create_graph)


def _assert_same(fast, ref, inputs, **tol):
    out, grads = _grads(fast, inputs)
    out_r, grads_r = _grads(ref, inputs)
    torch.testing.assert_close(out, out_r, **(tol or TOL))
    for a, b in zip(grads, grads_r, strict=True):
        torch.testing.assert_close(a, b, **(tol or TOL))


def test_switch_is_off_by_default_and_returns_the_previous_setting():
    assert not CF.compiled_kernels_enabled()
    z = _z(3, 4)
    assert type(CF.modrelu(z, 0.1).grad_fn).__name__ == "_ModReLUBackward"
    assert CF.use_compiled_kernels(True) is False
    try:
        assert CF.compiled_kernels_enabled()
        assert CF.use_compiled_kernels(True) is True
    finally:
        CF.use_compiled_kernels(False)
    assert not CF.compiled_kernels_enabled()


@pytest.mark.parametrize(
    "bias",
    [
        pytest.param(lambda: torch.randn(8).requires_grad_(), id="per-feature"),
        pytest.param(lambda: torch.randn(1).requires_grad_(), id="shared", marks=SLOW),
        pytest.param(lambda: torch.tensor(-0.5).requires_grad_(), id="0-dim", marks=SLOW),
        pytest.param(lambda: 0.3, id="float", marks=SLOW),
        # 2-d bias: eager implementation
        pytest.param(lambda: torch.randn(3, 8).requires_grad_(), id="2d"),
    ],
)
def test_modrelu_kernels_equal_reference(compiled, bias):
    z, b = _z(4, 3, 8), bias()
    out = CF.modrelu(z, b)
    uses_kernel = not (isinstance(b, torch.Tensor) and b.dim() == 2)
    assert (type(out.grad_fn).__name__ == "_ModReLUCompiledBackward") == uses_kernel
    _assert_same(CF.modrelu, reference_modrelu, (z, b))


def test_modrelu_kernels_threshold_boundary_and_both_signs(compiled):
    z = torch.complex(torch.tensor([3.0, 0.6, 0.0, -1.0]), torch.tensor([4.0, 0.8, 0.0, 2.0]))
    z.requires_grad_()
    b = torch.tensor([-5.0, -1.0, 0.4, -0.1], requires_grad=True)  # |z| + b == 0 on two entries
    _assert_same(CF.modrelu, reference_modrelu, (z, b))


def test_cardioid_kernels_equal_reference(compiled):
    z = _z(6, 16)
    assert type(CF.cardioid(z).grad_fn).__name__ == "_CardioidCompiledBackward"
    _assert_same(CF.cardioid, reference_cardioid, (z,))


def test_modulus_kernels_at_extreme_moduli_equal_a_complex128_reference(compiled):
    """The kernels' modulus is scaled as ``hypot``'s: at moduli whose parts' squares under- or
    overflow float32 (1e-30 .. 1e30), modReLU (a positive bias included) and cardioid equal the
    complex128 references in values and gradients."""
    for scale in EXTREME_MODULI:
        g = torch.Generator().manual_seed(3)
        z = torch.randn(5, 4, dtype=torch.complex128, generator=g).mul(scale).to(C64)
        z[0, :2] = 0
        out = CF.cardioid(z.requires_grad_())
        assert type(out.grad_fn).__name__ == "_CardioidCompiledBackward"
        for bias in (0.5, -0.3 * scale, 0.0):
            b = torch.full((4,), bias)
            assert_close_to_complex128(CF.modrelu, reference_modrelu, z, b)
        assert_close_to_complex128(CF.cardioid, reference_cardioid, z)


# a transposed input takes the same path as a strided one (``as_words`` views any strides as
# int64 words, the kernels index them as given)
@pytest.mark.parametrize("view", ["conj", pytest.param("strided", marks=SLOW)])
def test_kernels_on_conj_and_strided_inputs(compiled, view):
    base = _z(6, 16)
    z = {"conj": base.conj(), "strided": base[:, ::2]}[view]
    b = torch.randn(z.shape[-1], requires_grad=True)

    def ref(z, b):  # the reference's view_as_real rejects a conj-bit input
        return reference_modrelu(z.resolve_conj(), b)

    _assert_same(CF.modrelu, ref, (z, b))
    _assert_same(CF.cardioid, lambda z: reference_cardioid(z.resolve_conj()), (z,))


def test_kernels_equal_the_eager_hand_written_backward(compiled):
    z, b = _z(5, 7, 12, seed=3), torch.randn(12, requires_grad=True)
    fast = [_grads(CF.modrelu, (z, b)), _grads(CF.cardioid, (z,))]
    CF.use_compiled_kernels(False)
    eager = [_grads(CF.modrelu, (z, b)), _grads(CF.cardioid, (z,))]
    for (o1, g1), (o2, g2) in zip(fast, eager, strict=True):
        torch.testing.assert_close(o1, o2, **TOL)
        for a, c in zip(g1, g2, strict=True):
            torch.testing.assert_close(a, c, **TOL)


def test_kernels_double_backward_equals_reference(compiled):
    z, b = _z(4, 6, seed=5), torch.randn(6, requires_grad=True)
    for fn, ref, inputs in (
        (CF.modrelu, reference_modrelu, (z, b)),
        (CF.cardioid, reference_cardioid, (z,)),
    ):
        got, want = (_grads(f, inputs, create_graph=True)[1] for f in (fn, ref))
        v = torch.randn(got[0].shape, dtype=C64, generator=torch.Generator().manual_seed(2))
        second = torch.autograd.grad(got[0], inputs, v, allow_unused=True)
        second_ref = torch.autograd.grad(want[0], inputs, v, allow_unused=True)
        for a, c in zip(second, second_ref, strict=True):
            # at the exact zeros the plain references give nan second derivatives (sgn, |z|);
            # cplxnet's composed forms are finite there (modReLU: finite where its reference is)
            ok = torch.isfinite(c) if not c.is_complex() else torch.isfinite(c.real + c.imag)
            assert torch.isfinite(torch.view_as_real(a) if a.is_complex() else a)[ok].all()
            torch.testing.assert_close(a[ok], c[ok], atol=1e-5, rtol=1e-4)


def test_complex128_and_real_inputs_keep_the_eager_paths(compiled):
    z = _z(3, 4, dtype=torch.complex128)
    assert not kernels.applies(z)
    assert type(CF.modrelu(z, 0.1).grad_fn).__name__ == "_ModReLUBackward"
    assert type(CF.cardioid(z).grad_fn).__name__ == "_CardioidBackward"
    x = torch.randn(5)
    torch.testing.assert_close(CF.cardioid(x), torch.relu(x))


def _split_gains(shape):
    return torch.rand(2, *shape) + 0.5


def _whiten_matrices(shape):
    return torch.eye(2).reshape(2, 2, *([1] * len(shape))) + 0.4 * torch.randn(2, 2, *shape)


# mode: (its affine weight for a normalized shape, the compiled Function's backward node, data
# seeds of the two tests below, seed of the double-backward probe)
LAYER_NORM_MODES = {
    "split": (_split_gains, "_LayerNormSplitCompiledBackward", 7, 8, 4),
    "whiten": (_whiten_matrices, "_WhitenRowsCompiledBackward", 9, 10, 6),
}


@pytest.mark.parametrize(
    ("mode", "kind", "shape"),
    _cases(
        sorted(LAYER_NORM_MODES),
        ["weight+bias", "weight only", "bias only", "none"],
        [(12,), (3, 5)],
        fast={("split", "weight+bias", (12,)), ("whiten", "none", (3, 5))},
    ),
)
def test_layer_norm_kernels_equal_reference(compiled, mode, kind, shape):
    weight, node, seed, _, _ = LAYER_NORM_MODES[mode]
    x = _z(4, 6, *shape, seed=seed)
    w = weight(shape).requires_grad_() if "weight" in kind else None
    b = torch.randn(*shape, dtype=C64).requires_grad_() if "bias" in kind else None

    def fast(x, w, b):
        return CF.layer_norm(x, shape, w, b, 1e-5, mode=mode)

    def ref(x, w, b):
        return reference_layer_norm(x, shape, w, b, 1e-5, mode)

    assert type(fast(x, w, b).grad_fn).__name__ == node
    _assert_same(fast, ref, (x, w, b), atol=2e-5, rtol=1e-4)
    # padding (all-zero) and constant rows: finite, and equal up to the rounding of the mean
    # (amplified by 1/sqrt(eps) on a constant row; whitening: only eps whitens them)
    x2 = x.detach().clone()
    x2[0, 0], x2[1, 2] = 0, 3 - 1j
    _assert_same(fast, ref, (x2.requires_grad_(), w, b), atol=5e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["split", pytest.param("whiten", marks=SLOW)])
def test_layer_norm_kernels_on_strided_and_conj_inputs_and_double_backward(compiled, mode):
    weight, _, _, seed, probe = LAYER_NORM_MODES[mode]
    base = _z(5, 16, seed=seed)
    w, b = weight((8,)).requires_grad_(), torch.randn(8, dtype=C64).requires_grad_()

    def fast(x, w, b):
        return CF.layer_norm(x, (8,), w, b, 1e-5, mode=mode)

    def ref(x, w, b):
        return reference_layer_norm(x.resolve_conj(), (8,), w, b, 1e-5, mode)

    for x in (base[:, ::2], base[:, :8].conj()):
        _assert_same(fast, ref, (x, w, b), atol=2e-5, rtol=1e-4)
    x = base[:, :8]
    got, want = (_grads(f, (x, w, b), create_graph=True)[1] for f in (fast, ref))
    v = torch.randn(x.shape, dtype=C64, generator=torch.Generator().manual_seed(probe))
    for a, c in zip(
        torch.autograd.grad(got[0], (x, w, b), v, allow_unused=True),
        torch.autograd.grad(want[0], (x, w, b), v, allow_unused=True),
        strict=True,
    ):
        if a is None or c is None:  # the shift enters linearly: no second derivative
            assert a is None or not a.any()
            assert c is None or not c.any()
            continue
        torch.testing.assert_close(a, c, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize(
    ("amplitude", "frequency"),
    _cases(
        ["word", "shared", "dimension"],
        ["word", "shared", "dimension", None],
        fast={("word", "word"), ("shared", None)},
    ),
)
def test_complex_order_kernels_equal_reference_in_every_sharing_layout(
    compiled, amplitude, frequency
):
    g = torch.Generator().manual_seed(0)

    def leaf(shape):
        return torch.randn(shape, generator=g).requires_grad_()

    r = leaf(COMPLEX_ORDER_SHAPES[amplitude])
    w = leaf(COMPLEX_ORDER_SHAPES[frequency]) if frequency else None
    theta = leaf(COMPLEX_ORDER_SHAPES["word"])
    pos = torch.arange(5.0)[:, None]
    out = CF.complex_order(r, w, theta, pos)
    assert type(out.grad_fn).__name__ == "_ComplexOrderCompiledBackward"
    _assert_same(
        lambda *a: CF.complex_order(a[0], w if frequency else None, a[-1], pos),
        lambda *a: reference_complex_order(a[0], w if frequency else None, a[-1], pos),
        (r, *([w] if frequency else []), theta),
    )


def test_complex_order_kernels_without_phase_and_double_backward(compiled):
    g = torch.Generator().manual_seed(3)
    r, w = (torch.randn(s, generator=g).requires_grad_() for s in ((2, 5, 3), (2, 5, 3)))
    pos = torch.arange(5.0)[:, None]
    _assert_same(
        lambda r, w: CF.complex_order(r, w, None, pos),
        lambda r, w: reference_complex_order(r, w, None, pos),
        (r, w),
    )
    got = _grads(lambda r, w: CF.complex_order(r, w, None, pos), (r, w), create_graph=True)[1]
    want = _grads(lambda r, w: reference_complex_order(r, w, None, pos), (r, w), create_graph=True)[
        1
    ]
    v = [torch.randn(t.shape, generator=g) for t in got]
    torch.testing.assert_close(
        torch.autograd.grad(got, (r, w), v), torch.autograd.grad(want, (r, w), v), **TOL
    )


def test_zero_dim_input_takes_the_eager_path_under_the_switch(compiled):
    z = torch.tensor(1 + 1j, dtype=C64)
    torch.testing.assert_close(CF.modrelu(z, -0.5), CF.modrelu(z.reshape(1), -0.5)[0])
    torch.testing.assert_close(CF.cardioid(z), CF.cardioid(z.reshape(1))[0])


@pytest.mark.parametrize("scale", [1e-38, 1e-41, 1e-44])
def test_kernels_at_subnormal_moduli_equal_a_complex128_reference(compiled, scale):
    """The kernels' ``_polar`` clamps max(|x|, |y|) at the smallest normal float, so subnormal
    moduli stay right: values to 1e-6 of the largest plus 4 of the smallest subnormal (such a
    value has few bits), gradients to 1e-5 of the largest."""
    g = torch.Generator().manual_seed(3)
    z = torch.randn(5, 4, dtype=torch.complex128, generator=g).mul(scale).to(C64)
    z[0, :2] = 0
    assert type(CF.modrelu(z.requires_grad_(), torch.zeros(4)).grad_fn).__name__ == (
        "_ModReLUCompiledBackward"
    )
    # at subnormal |z| only biases 0 and a clipping one: (|z| + b) / |z| has as few bits
    biases = (0.0, -0.3 * scale, 0.5 * scale) if scale >= 1e-38 else (0.0, -1.0)
    cases = [(CF.modrelu, reference_modrelu, torch.full((4,), b)) for b in biases]
    for fn, ref, *reals in [*cases, (CF.cardioid, reference_cardioid)]:
        leaves = [t.detach().requires_grad_() for t in (z, *reals)]
        wide = [
            t.detach().to(torch.complex128 if t.is_complex() else torch.float64) for t in leaves
        ]
        wide = [t.requires_grad_() for t in wide]
        out, want = fn(*leaves), ref(*wide)
        gz = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(0))
        tol = 1e-6 * want.detach().abs().max().item() + 4 * 2.0**-149
        assert (out.detach().to(want.dtype) - want.detach()).abs().max().item() <= tol
        got = torch.autograd.grad(out, leaves, gz)
        exp = torch.autograd.grad(want, wide, gz.to(want.dtype))
        for a, b in zip(got, exp, strict=True):
            assert torch.isfinite(torch.view_as_real(a) if a.is_complex() else a).all()
            assert ((a.to(b.dtype) - b).abs().max() / b.abs().max().clamp_min(1e-300)) < 1e-5
