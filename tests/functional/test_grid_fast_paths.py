"""The grid layers' layouts that bypass torch's kernels (``cplxnet.functional.grid_views``: the
block mean of non-overlapping average pools, the block repeat of nearest upsampling by powers of
two; the separable adaptive average of sizes that do not divide; the one-GEMM transposed
convolutions with stride = kernel size) against torch on each part or torch's native complex
op, in values and gradients, complex64 and complex128; each case first asserts that it takes the
path it is meant to test."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cplxnet.functional as CF
from cplxnet import nn as cnn
from cplxnet.functional import grid_views as G
from cplxnet.functional.conv import non_overlapping

DTYPES = [torch.complex64, torch.complex128]


def _split(fn, x):
    return torch.complex(fn(x.real), fn(x.imag))


def _check(ours, ref, x):
    y, yr = ours(x), ref(x)
    torch.testing.assert_close(y, yr)
    g = torch.randn(y.shape, dtype=y.dtype, generator=torch.Generator().manual_seed(1))
    (a,) = torch.autograd.grad(y, x, g)
    (b,) = torch.autograd.grad(yr, x, g)
    torch.testing.assert_close(a, b)


# (rank, shape, avg_pool args): stride = kernel size, no padding
BLOCK_POOLS = [
    (1, (2, 3, 8), (2,)),
    (1, (3, 9), (3, 3)),  # unbatched, trailing entries dropped (floor mode)
    (2, (2, 3, 8, 6), (2,)),
    (2, (2, 3, 9, 7), ((3, 2),)),  # remainders on both axes
    (2, (2, 3, 8, 6), ((2, 3), None, 0, True, False, 5)),  # ceil mode (divisible), divisor
    (2, (2, 3, 8, 6), ((1, 1),)),  # identity windows
    (3, (2, 3, 4, 6, 8), (2,)),
    (3, (2, 2, 4, 4, 5), ((1, 2, 4), (1, 2, 4), 0, False, True, 3)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("nd", "shape", "args"), BLOCK_POOLS)
def test_block_mean_pools_equal_torch_on_each_part(dtype, nd, shape, args):
    x = torch.randn(*shape, dtype=dtype, requires_grad=True)
    k, stride, padding, ceil = (list(args) + [None, 0, False][len(args) - 1 :])[:4]
    assert G.pool_blocks(x, nd, k, stride, padding, ceil) is not None
    ours, torch_fn = getattr(CF, f"avg_pool{nd}d"), getattr(F, f"avg_pool{nd}d")
    _check(lambda t: ours(t, *args), lambda t: _split(lambda r: torch_fn(r, *args), t), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("nd", "shape", "out"),
    [(1, (2, 3, 8), 4), (1, (2, 3, 8), 1), (2, (2, 3, 8, 6), (4, None)), (2, (3, 8, 6), 1)]
    + [(3, (2, 3, 4, 6, 8), (2, 3, 4)), (3, (1, 2, 2, 4, 6), (1, 2, 3))],
)
def test_block_mean_adaptive_pools_equal_torch_on_each_part(dtype, nd, shape, out):
    x = torch.randn(*shape, dtype=dtype, requires_grad=True)
    assert G.adaptive_blocks(x, nd, out) is not None
    ours, torch_fn = getattr(CF, f"adaptive_avg_pool{nd}d"), getattr(F, f"adaptive_avg_pool{nd}d")
    _check(lambda t: ours(t, out), lambda t: _split(lambda r: torch_fn(r, out), t), x)


def test_block_mean_gradcheck_gradgradcheck_and_layouts():
    x = torch.randn(2, 3, 4, 6, dtype=torch.complex128, requires_grad=True)
    for fn in (lambda t: CF.avg_pool2d(t, 2), lambda t: CF.adaptive_avg_pool2d(t, (1, 3))):
        assert torch.autograd.gradcheck(fn, (x,))
        assert torch.autograd.gradgradcheck(fn, (x,))
    ref = lambda t: _split(lambda r: F.avg_pool2d(r, 2), t)  # noqa: E731
    xt = x.detach().transpose(-1, -2).requires_grad_()  # non-contiguous
    _check(lambda t: CF.avg_pool2d(t, 2), ref, xt)
    xc = x.detach().conj()  # a conjugate view
    torch.testing.assert_close(CF.avg_pool2d(xc, 2), ref(xc))


def test_block_mean_keeps_non_finite_values_in_their_window():
    x = torch.zeros(1, 1, 4, 4, dtype=torch.complex64)
    x[0, 0, 0, 0] = complex(float("inf"), 0)
    x[0, 0, 3, 3] = complex(0, float("nan"))
    y = CF.avg_pool2d(x, 2)
    torch.testing.assert_close(y, _split(lambda r: F.avg_pool2d(r, 2), x), equal_nan=True)
    assert torch.isfinite(y[0, 0, 0, 1]) and torch.isfinite(y[0, 0, 1, 0])


def test_pools_outside_the_block_paths_fall_back_and_keep_torch_errors():
    x = torch.randn(2, 3, 8, 6, dtype=torch.complex64)
    assert G.pool_blocks(x, 2, 3, 2, 1, False) is None  # overlapping, padded
    assert G.pool_blocks(x, 2, 3, 3, 0, True) is None  # ceil mode on 8 = 2 * 3 + 2
    assert G.adaptive_blocks(x, 2, (3, 4)) is None  # 8 % 3
    with pytest.raises(RuntimeError):  # kernel larger than the input: torch's error
        CF.avg_pool2d(x, 9)
    for nd, fn in ((2, CF.avg_pool2d), (3, CF.avg_pool3d)):  # non-overlapping windows
        xs = x if nd == 2 else x.unsqueeze(2)
        with pytest.raises(RuntimeError, match="divisor must be not zero"):  # not inf
            fn(xs, 2, divisor_override=0)
        with pytest.raises(TypeError, match="must be int"):  # not a mean divided by 2.0
            fn(xs, 2, divisor_override=2.0)
    assert G.adaptive_blocks(x, 2, 0) is None  # torch's empty output
    assert CF.adaptive_avg_pool2d(x, 0).shape == F.adaptive_avg_pool2d(x.real, 0).shape


# adaptive average pools whose sizes do not divide (windows of unequal length, overlapping),
# output larger than the input, kept sizes (None), unbatched
SEPARABLE = [
    (2, (2, 3, 20, 20), 7),
    (2, (2, 3, 40, 17), (16, 5)),
    (2, (2, 3, 10, 9), (4, None)),
    (2, (3, 5, 7), (9, 2)),
    (3, (2, 2, 5, 6, 7), (3, 4, 5)),
    (3, (2, 5, 6, 7), (3, None, 2)),
    (2, (1, 2, 5, 4), (3, 1)),  # the last axis pooled to 1
    (3, (1, 2, 2, 4, 4), (2, 3, 1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("nd", "shape", "out"), SEPARABLE)
def test_separable_adaptive_pools_equal_torch_on_each_part(dtype, nd, shape, out):
    x = torch.randn(*shape, dtype=dtype, requires_grad=True)
    assert G.adaptive_blocks(x, nd, out) is None and G.adaptive_sizes(x, nd, out) is not None
    ours, torch_fn = getattr(CF, f"adaptive_avg_pool{nd}d"), getattr(F, f"adaptive_avg_pool{nd}d")
    _check(lambda t: ours(t, out), lambda t: _split(lambda r: torch_fn(r, out), t), x)


def test_separable_mean_gradcheck_views_and_no_input_sized_tensor():
    from torch.utils._python_dispatch import TorchDispatchMode

    x = torch.randn(2, 3, 7, 5, dtype=torch.complex128, requires_grad=True)
    fn = lambda t: CF.adaptive_avg_pool2d(t, (3, 4))  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,)) and torch.autograd.gradgradcheck(fn, (x,))
    ref = lambda t: _split(lambda r: F.adaptive_avg_pool2d(r, (3, 4)), t)  # noqa: E731
    xc = x.detach().conj()
    torch.testing.assert_close(fn(xc), ref(xc))
    xt = x.detach().transpose(-1, -2)  # non-contiguous: torch's kernel (channels-last view)
    assert G.adaptive_sizes(xt, 2, (3, 4)) is None
    torch.testing.assert_close(fn(xt), ref(xt))
    assert G.adaptive_mean_matrix(7, 3, x).sum(1).sub(1).abs().max() < 1e-15
    # torch's kernels: 1-D, an output over SEPARABLE_MAX_OUT, a channels-last input; a bool size
    assert G.adaptive_sizes(torch.randn(1, 2, 8, 9, dtype=torch.complex64), 2, (True, 4)) is None
    assert G.adaptive_sizes(torch.randn(2, 3, 13, dtype=torch.complex64), 1, 5) is None
    assert G.adaptive_sizes(torch.randn(1, 2, 40, 9, dtype=torch.complex64), 2, (17, 4)) is None
    xl = torch.randn(2, 3, 7, 5, dtype=torch.complex64).contiguous(
        memory_format=torch.channels_last
    )
    assert G.adaptive_sizes(xl, 2, (3, 4)) is None
    torch.testing.assert_close(fn(xl), ref(xl))
    assert fn(xl).is_contiguous(memory_format=torch.channels_last)

    class Sizes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != source:
                    made.append((func.__name__, t.untyped_storage().nbytes()))
            return out

    big = torch.randn(4, 8, 30, 30, dtype=torch.complex64)
    source = big.untyped_storage().data_ptr()
    made: list = []
    with Sizes():
        CF.adaptive_avg_pool2d(big, 7)
    largest = max(n for _, n in made)  # new storages: the steps' outputs, the small matrices
    assert made and largest <= big.untyped_storage().nbytes() * 7 / 30, made  # no input copy


UPSAMPLE_BLOCKS = [
    ((2, 3, 5), {"scale_factor": 2}),
    ((2, 3, 5), {"size": 20}),  # 4x from the size
    ((2, 3, 5), {"scale_factor": 4.0}),
    ((2, 3, 4, 5), {"scale_factor": (2, 1)}),
    ((2, 3, 4, 5), {"scale_factor": 2.0, "recompute_scale_factor": True}),
    ((2, 3, 4, 5), {"size": (8, 10)}),
    ((1, 2, 3, 4, 3), {"scale_factor": 2}),
    ((1, 2, 3, 4, 3), {"size": (6, 4, 6)}),
]


def _nearest_k(x, kw):
    return G.nearest_blocks(
        x,
        kw.get("size"),
        kw.get("scale_factor"),
        kw.get("mode", "nearest"),
        kw.get("align_corners"),
        kw.get("recompute_scale_factor"),
        False,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "kw"), UPSAMPLE_BLOCKS)
def test_block_repeat_upsampling_equals_torch_on_each_part(dtype, shape, kw):
    x = torch.randn(*shape, dtype=dtype, requires_grad=True)
    assert _nearest_k(x, kw) is not None
    y = cnn.Upsample(**kw)(x)
    assert torch.equal(y, _split(lambda r: F.interpolate(r, **kw), x))  # copies: exact
    _check(
        lambda t: CF.interpolate(t, **kw), lambda t: _split(lambda r: F.interpolate(r, **kw), t), x
    )


def test_block_repeat_gradcheck_gradgradcheck_and_fallbacks():
    x = torch.randn(1, 2, 3, 4, dtype=torch.complex128, requires_grad=True)
    fn = lambda t: CF.interpolate(t, scale_factor=2)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))
    z = torch.randn(2, 3, 7, dtype=torch.complex64)
    # torch's source index is floor(j / s) there, not j // 2: torch's kernel
    for kw in (
        {"scale_factor": 2.1},
        {"scale_factor": 2.0001},
        {"size": 21},
        {"scale_factor": 1.999, "recompute_scale_factor": True},
        {"scale_factor": 2, "mode": "nearest-exact"},
    ):
        assert _nearest_k(z, kw) is None
        ref = _split(lambda r: F.interpolate(r, **kw), z)  # noqa: B023
        assert torch.equal(CF.interpolate(z, **kw), ref)
    with pytest.raises(ValueError, match="align_corners"):  # torch's error, not a fast path
        CF.interpolate(z, scale_factor=2, align_corners=True)


# (rank, kernel = stride, batched input shape)
GEMM_CONV_T = [
    (1, 3, (3, 4, 7)),
    (2, 2, (2, 4, 5, 3)),
    (2, (2, 3), (2, 4, 3, 4)),  # a different block per axis
    (3, 2, (2, 4, 3, 2, 3)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("nd, k, shape", GEMM_CONV_T)
def test_conv_transpose_stride_equal_to_kernel_equals_torch_native_complex(
    dtype, bias, nd, k, shape
):
    torch.manual_seed(0)
    ours = {1: cnn.ConvTranspose1d, 2: cnn.ConvTranspose2d, 3: cnn.ConvTranspose3d}[nd]
    theirs = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}
    m = ours(4, 6, k, stride=k, bias=bias, dtype=dtype)
    ref = theirs[nd](4, 6, k, stride=k, bias=bias, dtype=dtype)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()
    ref.load_state_dict(m.state_dict())
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    assert non_overlapping(x, m.weight, k, 0, 0, 1, 1)
    y, yr = m(x), ref(x)
    torch.testing.assert_close(y, yr)
    assert y.is_contiguous()
    g = torch.randn_like(y)
    for a, b in zip(
        torch.autograd.grad(y, [x, *m.parameters()], g),
        torch.autograd.grad(yr, [x, *ref.parameters()], g),
    ):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(m(x[0]), ref(x[0]))  # unbatched
    if dtype == torch.complex128:
        w = m.weight.detach().requires_grad_()
        fn = {1: CF.conv_transpose1d, 2: CF.conv_transpose2d, 3: CF.conv_transpose3d}[nd]
        assert torch.autograd.gradcheck(lambda t, v: fn(t, v, None, k), (x, w))
        assert torch.autograd.gradgradcheck(lambda t, v: fn(t, v, None, k), (x, w))
    assert not non_overlapping(x, m.weight, k, 1, 0, 1, 1)  # padded: the block kernel
    assert not non_overlapping(x, m.weight, 1, 0, 0, 1, 1)  # overlapping windows
    if nd > 1:  # a channels-last input keeps torch's channels-last route and format
        fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
        xc = x.detach().contiguous(memory_format=fmt)
        assert not non_overlapping(xc, m.weight, k, 0, 0, 1, 1)
        yc = m(xc)
        assert yc.is_contiguous(memory_format=fmt)
        torch.testing.assert_close(yc, yr)


OURS = {1: CF.conv_transpose1d, 2: CF.conv_transpose2d, 3: CF.conv_transpose3d}
THEIRS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize(
    "kw", [dict(output_padding=1), dict(dilation=2), dict(padding=1), dict(groups=2)]
)
def test_conv_transpose_near_misses_of_the_gemm_equal_torch(nd, kw):
    """stride = kernel size but one other argument off: not the GEMM, same values as torch."""
    torch.manual_seed(0)
    x = torch.randn(2, 4, *[3] * nd, dtype=torch.complex128)
    w = torch.randn(4, 6 // kw.get("groups", 1), *[2] * nd, dtype=torch.complex128)
    b = torch.randn(w.shape[1] * kw.get("groups", 1), dtype=torch.complex128)
    torch.testing.assert_close(OURS[nd](x, w, b, 2, **kw), THEIRS[nd](x, w, b, 2, **kw))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_transpose_gemm_empty_batch(nd):
    x = torch.randn(0, 4, *[3] * nd, dtype=torch.complex64, requires_grad=True)
    w = torch.randn(4, 6, *[2] * nd, dtype=torch.complex64, requires_grad=True)
    y = OURS[nd](x, w, None, 2)
    assert y.shape == THEIRS[nd](x, w, None, 2).shape
    y.sum().abs().backward()


@pytest.mark.parametrize("nd", [2, 3])
def test_conv_transpose_gemm_channels_last_weight_keeps_torch_format(nd):
    """stride = kernel size, contiguous input, channels-last weight: torch's output is
    channels-last, so the GEMM (contiguous output) must not be taken."""
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    x = torch.randn(2, 4, *[3] * nd, dtype=torch.complex64)
    w = torch.randn(4, 6, *[2] * nd, dtype=torch.complex64).contiguous(memory_format=fmt)
    y, yr = OURS[nd](x, w, None, 2), THEIRS[nd](x, w, None, 2)
    torch.testing.assert_close(y, yr)
    assert yr.is_contiguous(memory_format=fmt) and y.is_contiguous(memory_format=fmt)
