"""The fast implementations of the norms and modulus activations against the composed reference
implementations (``tests/reference_ops.py``): values and gradients, complex128 gradcheck and
gradgradcheck, the composed fallback (tracing / compilation) forced on CPU, and the whitening's
numerical range."""

import pytest
import torch
from reference_ops import (
    reference_batch_norm,
    reference_cardioid,
    reference_layer_norm,
    reference_modrelu,
    reference_whiten,
)

from cplxnet import functional as CF
from cplxnet import nn as cnn
from cplxnet.functional.cov2x2 import (
    inv_sqrt_2x2_factors,
    inv_sqrt_2x2_from_factors,
    inv_sqrt_2x2_grad,
    inv_sqrt_2x2_matrix,
    inv_sqrt_2x2_vjp,
)
from cplxnet.functional.norm import inv_sqrt_2x2

DT = torch.complex128
R = torch.float64


def _x(*shape, dtype=DT, scale=1.0):
    """Non-circular data with a non-zero mean (correlated, unequal-variance parts)."""
    a = torch.randn(*shape, dtype=R)
    b = 0.7 * a + 0.5 * torch.randn_like(a)
    return (torch.complex(2.0 * a + 0.3, 0.6 * b - 1.0) * scale).to(dtype)


def _grads(fn, inputs, seed=1):
    """Output and gradients of every input that requires grad, for a fixed random cotangent."""
    out = fn(*inputs)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(seed))
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    return (out, *torch.autograd.grad(out, leaves, g))


def _assert_same(fast, ref, inputs, **tol):
    for a, b in zip(_grads(fast, inputs), _grads(ref, inputs), strict=True):
        torch.testing.assert_close(a, b, **tol)


def _leaf(t):
    return t.detach().clone().requires_grad_()


# ------------------------------------------------------------------------------------------------
# layer norm (split and whitening), batch norm
# ------------------------------------------------------------------------------------------------
AFFINE = ["weight+bias", "weight only", "bias only", "none"]


def _affine(kind, mode, shape):
    wshape = (2, *shape) if mode == "split" else (2, 2, *shape)
    w = _leaf(torch.rand(wshape, dtype=R) + 0.5) if kind in ("weight+bias", "weight only") else None
    if w is not None and mode == "whiten":
        w = _leaf(w + torch.randn(wshape, dtype=R))  # a general (not diagonal) 2x2 per feature
    b = _leaf(torch.randn(shape, dtype=DT)) if kind in ("weight+bias", "bias only") else None
    return w, b


@pytest.mark.parametrize("mode", ["split", "whiten"])
@pytest.mark.parametrize("kind", AFFINE)
@pytest.mark.parametrize("shape", [(12,), (3, 5)], ids=["1d", "2d"])
def test_layer_norm_equals_reference(mode, kind, shape):
    x = _x(4, 6, *shape)
    x[0, 0] = 0  # an all-zero (padding) row: only eps keeps it finite
    x[1, 2] = 3 - 1j  # a constant row: zero variance
    x = _leaf(x)
    w, b = _affine(kind, mode, shape)

    def fast(x, w, b):
        return CF.layer_norm(x, shape, w, b, 1e-5, mode=mode)

    def ref(x, w, b):
        return reference_layer_norm(x, shape, w, b, 1e-5, mode)

    _assert_same(fast, ref, (x, w, b))


@pytest.mark.parametrize("mode", ["split", "whiten"])
def test_layer_norm_complex64_conj_and_strided_inputs(mode):
    base = _leaf(_x(5, 16, dtype=torch.complex64))
    w, b = _affine("weight+bias", mode, (8,))
    w, b = _leaf(w.float()), _leaf(b.to(torch.complex64))
    for x in (base[:, ::2], base[:, :8].conj(), base.T.contiguous().T[:, 8:]):

        def fast(x, w, b):
            return CF.layer_norm(x, (8,), w, b, 1e-5, mode=mode)

        def ref(x, w, b):  # the reference's view_as_real rejects a conj-bit input
            return reference_layer_norm(x.resolve_conj(), (8,), w, b, 1e-5, mode)

        _assert_same(fast, ref, (x, w, b), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("shape", [(16, 3), (16, 3, 5), (8, 1, 4), (9, 1)], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_equals_reference_with_running_stats(shape, affine):
    C = shape[1]
    x = _leaf(_x(*shape))
    w = _leaf(torch.randn(2, 2, C, dtype=R)) if affine else None
    b = _leaf(torch.randn(C, dtype=DT)) if affine else None
    stats = {}

    def run(impl, key):
        def fn(x, w, b):
            rm = torch.randn(C, dtype=DT, generator=torch.Generator().manual_seed(3))
            rc = torch.eye(2, dtype=R).unsqueeze(-1).repeat(1, 1, C) * 0.7
            out = impl(x, rm, rc, w, b, True, 0.2, 1e-5)
            stats[key] = (rm, rc)
            return out

        return fn

    _assert_same(run(CF.batch_norm, "fast"), run(reference_batch_norm, "ref"), (x, w, b))
    for a, r in zip(stats["fast"], stats["ref"]):
        torch.testing.assert_close(a, r)


@pytest.mark.parametrize("shape", [(6, 3), (6, 3, 4), (5, 1, 2)], ids=str)
def test_batch_norm_eval_and_batch_stats_without_buffers_equal_reference(shape):
    C = shape[1]
    x = _leaf(_x(*shape))
    w, b = _leaf(torch.randn(2, 2, C, dtype=R)), _leaf(torch.randn(C, dtype=DT))
    rm = torch.randn(C, dtype=DT)
    a = torch.randn(C, 2, 2, dtype=R)
    rc = (a @ a.mT + 0.1 * torch.eye(2, dtype=R)).permute(1, 2, 0).contiguous()
    for args in ((rm, rc, w, b, False), (None, None, w, b, False), (None, None, None, None, True)):
        leaves = (x, w, b) if args[2] is not None else (x,)

        def fast(x, *_, args=args):
            return CF.batch_norm(x, *args)

        def ref(x, *_, args=args):
            return reference_batch_norm(x, *args)

        _assert_same(fast, ref, leaves)


def test_batch_norm_module_train_then_eval_matches_reference_buffers():
    torch.manual_seed(5)
    bn = cnn.BatchNorm1d(3, dtype=DT)
    xs = [_x(7, 3, 4) for _ in range(3)]
    rm = torch.zeros(3, dtype=DT)
    rc = 0.5 * torch.eye(2, dtype=R).unsqueeze(-1).repeat(1, 1, 3)
    for x in xs:
        bn(x)
        reference_batch_norm(x, rm, rc, bn.weight, bn.bias, True, 0.1, 1e-5)
    torch.testing.assert_close(bn.running_mean, rm)
    torch.testing.assert_close(bn.running_cov, rc)
    bn.eval()
    x = _x(2, 3, 4)
    torch.testing.assert_close(bn(x), reference_batch_norm(x, rm, rc, bn.weight, bn.bias))


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(
            lambda x, w, b: CF.layer_norm(x, (5,), w, b, 1e-3, mode="whiten"),
            id="ln_whiten",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda x, w, b: CF.layer_norm(x, (5,), w[0], b, 1e-3, mode="split"), id="ln_split"
        ),
        pytest.param(
            lambda x, w, b: CF.batch_norm(x.transpose(1, 2), None, None, w, b, True, eps=1e-3),
            id="bn_3d",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda x, w, b: CF.batch_norm(x[:, 0], None, None, w, b, True, eps=1e-3), id="bn_2d"
        ),
    ],
)
def test_norm_gradcheck_and_gradgradcheck(fn):
    x = _leaf(_x(4, 3, 5))
    w = _leaf(torch.eye(2, dtype=R).unsqueeze(-1) + 0.2 * torch.randn(2, 2, 5, dtype=R))
    b = _leaf(torch.randn(5, dtype=DT))
    assert torch.autograd.gradcheck(fn, (x, w, b))
    # second order by random projections (fast mode); the first order is checked entry by entry
    assert torch.autograd.gradgradcheck(fn, (x, w, b), fast_mode=True)


# ------------------------------------------------------------------------------------------------
# whitening: numerical range and the 2x2 inverse square root
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e10, 1e-10, 1.0])
def test_whitening_complex64_is_finite_and_accurate_at_extreme_scales(scale):
    x64 = _x(4, 32, 16, dtype=torch.complex64, scale=scale)
    w = torch.randn(2, 2, 16)
    b = torch.randn(16, dtype=torch.complex64)
    x128, w128, b128 = x64.to(DT), w.double(), b.to(DT)
    ln = CF.layer_norm(x64, (16,), w, b, 1e-5, mode="whiten")
    ln_ref = reference_layer_norm(x128, (16,), w128, b128, 1e-5, "whiten")
    bn = CF.batch_norm(x64.transpose(1, 2), None, None, w, b, True)
    bn_ref = reference_batch_norm(x128.transpose(1, 2), None, None, w128, b128, True)
    for out, ref in ((ln, ln_ref), (bn, bn_ref)):
        assert torch.isfinite(torch.view_as_real(out)).all()
        torch.testing.assert_close(out.to(DT), ref, atol=1e-3, rtol=1e-3)
    # gradients stay finite too
    xg = _leaf(x64)
    CF.layer_norm(xg, (16,), w, b, 1e-5, mode="whiten").abs().sum().backward()
    assert torch.isfinite(torch.view_as_real(xg.grad)).all()


@pytest.mark.parametrize("scale", [1.0, 1e10])
def test_public_whiten_equals_reference_and_is_finite(scale):
    c = _x(6, 9) * scale
    c = c - c.mean(-1, keepdim=True)
    m1 = (c.abs() ** 2).mean(-1, keepdim=True)
    m2 = (c * c).mean(-1, keepdim=True)
    want = reference_whiten(c, m1, m2, 1e-5)  # float64: no overflow at this scale
    torch.testing.assert_close(CF.whiten(c, m1, m2, 1e-5), want)
    c64, m1_64, m2_64 = c.to(torch.complex64), m1.float(), m2.to(torch.complex64)
    got = CF.whiten(c64, m1_64, m2_64, 1e-5)
    assert torch.isfinite(torch.view_as_real(got)).all()
    torch.testing.assert_close(got.to(DT), want, atol=1e-4, rtol=1e-4)


def _inv_sqrt_eig(vrr, vri, vii, eps):
    v = torch.stack([torch.stack([vrr, vri], -1), torch.stack([vri, vii], -1)], -2)
    lam, u = torch.linalg.eigh(v + eps * torch.eye(2, dtype=v.dtype))
    m = u @ torch.diag_embed(lam.rsqrt()) @ u.mT
    return m[..., 0, 0], m[..., 0, 1], m[..., 1, 1]


@pytest.mark.parametrize("scale", [1e-12, 1e-3, 1.0, 1e6, 1e15])
def test_inv_sqrt_2x2_matches_eigendecomposition(scale):
    a = torch.randn(64, 2, 3, dtype=R)
    v = a @ a.mT * scale  # SPD, some nearly singular after scaling
    v[:8, 1] = v[:8, 0]  # exactly singular rows (rank one)
    v[:8, :, 1] = v[:8, :, 0]
    args = (v[:, 0, 0], v[:, 0, 1], v[:, 1, 1])
    eps = 1e-5 * scale
    for got, want in zip(inv_sqrt_2x2(*args, eps), _inv_sqrt_eig(*args, eps)):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("scale", [1e-12, 1e-3, 1.0, 1e6, 1e15])
@pytest.mark.parametrize("eps_scale", [1e-5, 1e-25])
def test_inv_sqrt_2x2_vjp_equals_autograd_through_the_closed_form(scale, eps_scale):
    a = torch.randn(64, 2, 3, dtype=R)
    v = a @ a.mT * scale
    v[:8, 1] = v[:8, 0]  # rank one
    v[:8, :, 1] = v[:8, :, 0]
    v[8:16, 1] = 0  # real-valued features: no imaginary variance
    v[8:16, :, 1] = 0
    eps = eps_scale * scale
    args = [t.clone().requires_grad_() for t in (v[:, 0, 0], v[:, 0, 1], v[:, 1, 1])]
    grads = [torch.randn(64, dtype=R) for _ in range(3)]
    want = torch.autograd.grad(inv_sqrt_2x2(*args, eps), args, grads)
    got = inv_sqrt_2x2_vjp(*(t.detach() for t in args), eps, *grads)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-7, atol=1e-9 * w.abs().max().item())
    vm = v.clone().requires_grad_()
    gm = torch.randn(64, 2, 2, dtype=R)  # not symmetric: both off-diagonal entries read W_ri
    (want_m,) = torch.autograd.grad(inv_sqrt_2x2_matrix(vm, eps), vm, gm)
    factors = inv_sqrt_2x2_factors(v, eps)
    got_m = 2 * inv_sqrt_2x2_grad(factors, gm)  # symmetric: g_V + g_V^T of autograd's g_V
    want_m = want_m + want_m.mT
    torch.testing.assert_close(got_m, want_m, rtol=1e-7, atol=1e-9 * want_m.abs().max().item())
    w = inv_sqrt_2x2_matrix(v, eps)
    torch.testing.assert_close(inv_sqrt_2x2_from_factors(factors), w, rtol=1e-12, atol=0)


# ------------------------------------------------------------------------------------------------
# modReLU and cardioid
# ------------------------------------------------------------------------------------------------
def _z_with_zeros(*shape, dtype=DT):
    z = _x(*shape, dtype=dtype)
    z.view(-1)[:: max(z.numel() // 7, 1)] = 0  # exact zeros: the guarded denominators
    return _leaf(z)


@pytest.mark.parametrize(
    "bias",
    [
        lambda: _leaf(torch.randn(8, dtype=R)),
        lambda: _leaf(torch.randn(1, dtype=R)),
        lambda: _leaf(torch.randn(3, 8, dtype=R)),
        lambda: _leaf(torch.tensor(-0.5, dtype=R)),
        lambda: 0.3,
        lambda: torch.zeros(8, dtype=R),
    ],
    ids=["per-feature", "shared", "2d", "0-dim", "float", "frozen-zero"],
)
def test_modrelu_equals_reference(bias):
    z, b = _z_with_zeros(4, 3, 8), bias()
    _assert_same(CF.modrelu, reference_modrelu, (z, b))


def test_modrelu_threshold_boundary_and_complex64():
    z = _leaf(torch.complex(torch.tensor([3.0, 0.6, 0.0]), torch.tensor([4.0, 0.8, 0.0])))
    b = _leaf(torch.tensor([-5.0, -1.0, 0.4]))  # |z| + b == 0 on the first two entries
    _assert_same(CF.modrelu, reference_modrelu, (z, b))
    z64 = _z_with_zeros(6, 16, dtype=torch.complex64)
    b64 = _leaf(torch.randn(16) * 0.5)
    _assert_same(CF.modrelu, reference_modrelu, (z64, b64), atol=1e-6, rtol=1e-5)


def test_cardioid_equals_reference():
    _assert_same(CF.cardioid, reference_cardioid, (_z_with_zeros(4, 3, 8),))
    z64 = _z_with_zeros(6, 16, dtype=torch.complex64)
    _assert_same(CF.cardioid, reference_cardioid, (z64,), atol=1e-6, rtol=1e-5)
    assert torch.equal(CF.cardioid(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))


def test_activations_gradcheck_and_gradgradcheck():
    z = _leaf(_x(3, 5))
    b = _leaf(torch.randn(5, dtype=R) * 0.3)
    assert torch.autograd.gradcheck(CF.modrelu, (z, b))
    assert torch.autograd.gradgradcheck(CF.modrelu, (z, b))
    assert torch.autograd.gradcheck(CF.cardioid, (z,))
    assert torch.autograd.gradgradcheck(CF.cardioid, (z,))


# ------------------------------------------------------------------------------------------------
# the composed path that tracers and compilers see, forced on CPU
# ------------------------------------------------------------------------------------------------
def test_composed_fallback_equals_fast_path(monkeypatch):
    z = _z_with_zeros(4, 3, 6)
    b = _leaf(torch.randn(6, dtype=R))
    w = _leaf(torch.randn(2, 2, 6, dtype=R))
    cases = [
        (CF.modrelu, (z, b)),
        (CF.cardioid, (z,)),
        (lambda x, w: CF.layer_norm(x, (6,), w, None, 1e-5, mode="whiten"), (z, w)),
        (lambda x, w: CF.layer_norm(x, (6,), w[0], None, 1e-5), (z, w)),
        (lambda x, w: CF.batch_norm(x.transpose(1, 2), None, None, w, None, True), (z, w)),
    ]
    fast = [_grads(fn, args) for fn, args in cases]
    # as torch.export traces (torch.compile runs the modulus activations as opaque operators)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(torch.compiler, "is_exporting", lambda: True)
    outs = (CF.modrelu(z, b), CF.cardioid(z), CF.layer_norm(z, (6,), w[0]))
    names = [type(o.grad_fn).__name__ for o in outs]
    assert not any(k in n for n in names for k in ("ModReLU", "Cardioid", "LayerNorm")), names
    for (fn, args), want in zip(cases, fast):
        for got, w_ in zip(_grads(fn, args), want, strict=True):
            torch.testing.assert_close(got, w_)


def test_torch_path_of_the_interleaved_helpers_equals_reference(monkeypatch):
    """Off CPU the helpers of :mod:`cplxnet.functional.interleaved` (modulus, part planes,
    Re(a conj b), products with real gains) are torch's ops instead of NumPy's: forced here on
    CPU, the Functions built on them still equal the reference in values and gradients."""
    from cplxnet.functional import interleaved

    z = _z_with_zeros(4, 3, 8)
    b = _leaf(torch.randn(8, dtype=R))
    w, bias = _affine("weight+bias", "split", (8,))

    def split_ref(x, w, b):
        return reference_layer_norm(x, (8,), w, b, 1e-5, "split")

    cases = [
        (CF.modrelu, reference_modrelu, (z, b)),
        (CF.cardioid, reference_cardioid, (z,)),
        (lambda x, w, b: CF.layer_norm(x, (8,), w, b), split_ref, (z, w, bias)),
    ]
    monkeypatch.setattr(interleaved, "numpy_ok", lambda x: False)
    for fast, ref, args in cases:
        _assert_same(fast, ref, args)
    names = [
        type(CF.layer_norm(z, (8,), w, bias).grad_fn).__name__,
        type(CF.modrelu(z, b).grad_fn).__name__,
    ]
    assert names == ["_LayerNormSplitBackward", "_ModReLUBackward"], names


def test_numpy_path_only_up_to_its_thread_bound():
    """NumPy's loops are single-threaded: above ``NUMPY_MAX_THREADS`` torch threads the helpers
    and the complex-order cos/sin take torch's parallel kernels, to the same values."""
    from cplxnet.functional import interleaved
    from cplxnet.functional.embedding import _cos_sin

    z = _z_with_zeros(4, 3, 8)
    angle = torch.randn(4, 8, dtype=R)
    threads = torch.get_num_threads()
    try:
        outs = {}
        for n in (1, interleaved.NUMPY_MAX_THREADS + 1):
            torch.set_num_threads(n)
            assert interleaved.numpy_ok(z) == (n <= interleaved.NUMPY_MAX_THREADS)
            assert interleaved.numpy_ok(angle, (R,)) == (n <= interleaved.NUMPY_MAX_THREADS)
            outs[n] = (interleaved.modulus(z), *_cos_sin(angle), CF.cardioid(z))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*outs.values(), strict=True):
        torch.testing.assert_close(a, b)
