"""Grid layers (convolutions 1-3d and transposed, pools, unpooling, Upsample, channel dropout)
against independent references in values and gradients: torch's native complex convolutions,
the real-part/imaginary-part formula, an explicit loop for the max pools; plus torch.export with
a dynamic spatial size and torch.compile(fullgraph=True) over ``module_db_grid.EXPORT``."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from module_db import make_module, sample_input
from module_db_grid import EXPORT
from torch.export import Dim

import cplxnet.functional as CF
from cplxnet import nn as cnn

DT = torch.complex128


def _crandn(*shape, grad=False):
    return torch.randn(*shape, dtype=DT, requires_grad=grad)


def _grads(out, inputs, seed=0):
    """Gradients of the real loss ``Re <g, out>`` (a fixed random complex ``g``)."""
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(seed))
    loss = (out * g.conj()).real.sum()
    return torch.autograd.grad(loss, inputs, allow_unused=True)


def _assert_same(ours, ref, inputs):
    torch.testing.assert_close(ours, ref)
    for a, b in zip(_grads(ours, inputs), _grads(ref, inputs)):
        torch.testing.assert_close(a, b)


def _split(fn, x):
    """The real-part/imaginary-part formula of a real-linear op with real weights."""
    return torch.complex(fn(x.real), fn(x.imag))


# ---- convolutions against torch's native complex ops -------------------------------------------
CONV_CASES = [
    (3, {"stride": 2, "padding": 1}),
    (3, {"groups": 2, "dilation": (1, 2, 1), "bias": False}),
    (3, {"padding": "same"}),
    (3, {"padding": 1, "padding_mode": "circular"}),
    (3, {"padding": (0, 1, 2), "dilation": (1, 1, 2), "stride": (1, 2, 1)}),  # repacked input
]


@pytest.mark.parametrize(("nd", "kw"), CONV_CASES)
def test_conv3d_equals_torch_native_complex(nd, kw):
    torch.manual_seed(0)
    m = cnn.Conv3d(4, 6, 3, dtype=DT, **kw)
    with torch.no_grad():
        if m.bias is not None:
            m.bias.normal_()
    x = _crandn(2, 4, 5, 6, 5, grad=True)
    ref = torch.nn.Conv3d(4, 6, 3, dtype=DT, **kw)
    ref.load_state_dict(m.state_dict())
    _assert_same(m(x), ref(x), [x])
    for a, b in zip(_grads(m(x), list(m.parameters())), _grads(ref(x), list(ref.parameters()))):
        torch.testing.assert_close(a, b)
    assert m(x[0]).shape == ref(x[0]).shape  # unbatched


TRANSPOSE_CASES = [
    (1, {"stride": 2, "padding": 1, "output_padding": 1}),
    (1, {"groups": 2, "dilation": 2, "bias": False}),
    (2, {"stride": 2}),
    (2, {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2), "groups": 2}),
    (3, {"stride": 2, "padding": 1, "dilation": (1, 2, 1)}),
    (2, {"stride": 2, "dilation": (1, 2), "output_padding": 1}),  # repacked output
]


@pytest.mark.parametrize(("nd", "kw"), TRANSPOSE_CASES)
def test_conv_transpose_equals_torch_native_complex(nd, kw):
    torch.manual_seed(0)
    cls = getattr(cnn, f"ConvTranspose{nd}d")
    m = cls(4, 6, 3, dtype=DT, **kw)
    ref = getattr(torch.nn, f"ConvTranspose{nd}d")(4, 6, 3, dtype=DT, **kw)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()
    ref.load_state_dict(m.state_dict())
    x = _crandn(2, 4, *[4, 5, 3][:nd], grad=True)
    _assert_same(m(x), ref(x), [x])
    for a, b in zip(_grads(m(x), list(m.parameters())), _grads(ref(x), list(ref.parameters()))):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(m(x[0]), ref(x[0]))  # unbatched


def test_conv_transpose_output_size_as_torch():
    m = cnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=DT)
    ref = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=DT)
    ref.load_state_dict(m.state_dict())
    x = _crandn(1, 2, 4, 5)
    for size in [(7, 9), (8, 10), [1, 3, 8, 9]]:
        torch.testing.assert_close(m(x, output_size=size), ref(x, output_size=size))
    with pytest.raises(ValueError, match=r"ConvTranspose2d: requested an output size of \(9, 9\)"):
        m(x, output_size=(9, 9))
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        m(x, output_size=(9,))


def test_conv_transpose_errors_and_init():
    with pytest.raises(ValueError, match="ConvTranspose2d: unknown padding_mode 'reflect'"):
        cnn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="ConvTranspose1d: output_padding must be non-negative"):
        cnn.ConvTranspose1d(2, 2, 3, stride=2, output_padding=-1)
    # an output_padding too large for the default output size: built, refused at the forward
    # that would use it, and overridden by output_size (as torch)
    big = cnn.ConvTranspose1d(2, 2, 3, stride=2, output_padding=2, dtype=DT)
    ref = torch.nn.ConvTranspose1d(2, 2, 3, stride=2, output_padding=2, dtype=DT)
    ref.load_state_dict(big.state_dict())
    x = torch.randn(1, 2, 5, dtype=DT)
    with pytest.raises(ValueError, match=r"output_padding \(2,\) must be smaller than either"):
        big(x)
    with pytest.raises(RuntimeError, match="output padding must be smaller"):
        ref(x)
    torch.testing.assert_close(big(x, output_size=[12]), ref(x, output_size=[12]))
    with pytest.raises(ValueError, match="ConvTranspose1d: padding must be integers"):
        cnn.ConvTranspose1d(2, 2, 3, padding="same")
    with pytest.raises(ValueError, match=r"ConvTranspose3d: expected input \(B, 4, D, H, W\)"):
        cnn.ConvTranspose3d(4, 2, 3)(torch.randn(1, 3, 2, 2, 2, dtype=torch.cfloat))
    m = cnn.ConvTranspose2d(64, 96, 3, dtype=DT)
    assert m.weight.shape == (64, 96, 3, 3)
    var = m.weight.detach().abs().square().mean().item()
    assert abs(var / (2 / (64 * 9 + 96 * 9)) - 1) < 0.05
    assert torch.all(m.bias == 0)


def test_complextorch_convolutions_agree():
    """complextorch's Conv3d and ConvTranspose2d (torch's native complex ops) agree."""
    ctnn = pytest.importorskip("complextorch.nn")
    torch.manual_seed(0)
    ours = cnn.ConvTranspose2d(3, 4, 3, stride=2, dtype=torch.cfloat)
    theirs = ctnn.ConvTranspose2d(3, 4, 3, stride=2)
    with torch.no_grad():
        theirs.conv_transposed.weight.copy_(ours.weight)
        theirs.conv_transposed.bias.copy_(ours.bias)
    x = torch.randn(2, 3, 5, 4, dtype=torch.cfloat)
    torch.testing.assert_close(ours(x), theirs(x))
    c3 = cnn.Conv3d(3, 4, 3, dtype=torch.cfloat)
    t3 = ctnn.Conv3d(3, 4, 3)
    (w, b) = [p for p in t3.parameters()]
    with torch.no_grad():
        w.copy_(c3.weight), b.copy_(c3.bias)
    x = torch.randn(1, 3, 4, 5, 4, dtype=torch.cfloat)
    torch.testing.assert_close(c3(x), t3(x))


# ---- max pools against an explicit loop ----------------------------------------------------------
def _windows(size, k, s, p, d, ceil):
    """Torch's pooling windows along one axis: for each output, the valid input positions."""
    span = size + 2 * p - d * (k - 1) - 1
    n = (math.ceil(span / s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= size + p:  # torch drops a last window starting in the padding
        n -= 1
    starts = [o * s - p for o in range(n)]
    return [[a + j * d for j in range(k) if 0 <= a + j * d < size] for a in starts]


def _loop_max_pool(x, windows):
    """Plain loop: per (plane, output cell), the entry with the largest |z| (first one on ties)
    and its flat index in the plane. ``windows`` per spatial axis."""
    nd = len(windows)
    spatial = x.shape[-nd:]
    planes = x.reshape(-1, *spatial)
    outs, idxs = [], []
    for plane in planes:
        vals, ids = [], []
        for cell in itertools.product(*windows):
            best, best_pos = None, None
            for pos in itertools.product(*cell):
                v = plane[pos]
                if best is None or v.abs() > best.abs():
                    best, best_pos = v, pos
            vals.append(best)
            ids.append(sum(q * math.prod(spatial[i + 1 :]) for i, q in enumerate(best_pos)))
        outs.append(torch.stack(vals))
        idxs.append(torch.tensor(ids))
    shape = (*x.shape[:-nd], *[len(w) for w in windows])
    return torch.stack(outs).reshape(shape), torch.stack(idxs).reshape(shape)


MAXPOOL_CASES = [
    (1, (2, 3, 9), {"kernel_size": 3, "stride": 2, "padding": 1}),
    (1, (3, 10), {"kernel_size": 2, "dilation": 3, "ceil_mode": True}),
    (2, (2, 2, 5, 7), {"kernel_size": (2, 3), "stride": (2, 2), "padding": (1, 1)}),
    (2, (2, 6, 6), {"kernel_size": 3, "stride": 2, "ceil_mode": True, "dilation": (1, 2)}),
    (3, (1, 2, 4, 5, 4), {"kernel_size": 2, "stride": 1, "padding": (0, 1, 1)}),
]


def _tup(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize(("nd", "shape", "kw"), MAXPOOL_CASES)
def test_max_pool_equals_a_loop_over_the_windows(nd, shape, kw):
    torch.manual_seed(0)
    x = _crandn(*shape, grad=True)
    k = _tup(kw["kernel_size"], nd)
    s = _tup(kw.get("stride", k), nd)
    p, d = _tup(kw.get("padding", 0), nd), _tup(kw.get("dilation", 1), nd)
    wins = [
        _windows(n, *a, kw.get("ceil_mode", False)) for n, a in zip(shape[-nd:], zip(k, s, p, d))
    ]
    want, want_idx = _loop_max_pool(x, wins)
    got, idx = getattr(cnn, f"MaxPool{nd}d")(**kw, return_indices=True)(x)
    assert torch.equal(idx, want_idx)
    _assert_same(got, want, [x])
    # torch's real max pool on |x| gives the same indices (the tie rule and sizes are torch's)
    _, tidx = getattr(F, f"max_pool{nd}d")(x.detach().abs(), **kw, return_indices=True)
    assert torch.equal(idx, tidx)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_max_pool_equals_a_loop(nd):
    torch.manual_seed(nd)
    shape = (2, 3, *[7, 5, 6][:nd])
    out = [3, 2, 4][:nd]
    x = _crandn(*shape, grad=True)
    wins = [
        [list(range((i * n) // o, -((-(i + 1) * n) // o))) for i in range(o)]
        for n, o in zip(shape[-nd:], out)
    ]
    want, want_idx = _loop_max_pool(x, wins)
    got, idx = getattr(cnn, f"AdaptiveMaxPool{nd}d")(out, return_indices=True)(x)
    assert torch.equal(idx, want_idx)
    _assert_same(got, want, [x])


def test_max_pool_tie_rule_and_nan():
    """Equal moduli (different phases): the first position of the window in scan order wins,
    as in torch's real max pool; a NaN in a window is selected."""
    phases = torch.tensor([0.3, 1.2, -2.0, 2.9], dtype=torch.float64)
    x = torch.polar(torch.ones(4, dtype=torch.float64), phases).reshape(1, 1, 2, 2)
    y, idx = cnn.MaxPool2d(2, return_indices=True)(x)
    assert idx.item() == 0 and y.item() == x[0, 0, 0, 0]
    z = torch.tensor([[[1 + 1j, 3j, -3, 0.5]]], dtype=DT)  # |3j| == |-3|: index 1 first
    assert cnn.MaxPool1d(4, return_indices=True)(z)[1].item() == 1
    assert cnn.AdaptiveMaxPool1d(1, return_indices=True)(z)[1].item() == 1
    n = torch.tensor([[[1.0, complex(float("nan"), 0), 5.0, 2.0]]], dtype=DT)
    assert torch.isnan(cnn.MaxPool1d(4)(n)).all()


def test_max_pool_selects_by_modulus_not_by_real_part():
    x = torch.tensor([[[1 + 0j, -5 + 0j, 0 + 2j, 3 + 0j]]], dtype=DT)
    assert cnn.MaxPool1d(2)(x).tolist() == [[[-5 + 0j, 3 + 0j]]]
    assert cnn.MaxPool1d(2)(x.real).tolist() == [[[-5.0, 3.0]]]  # real inputs: by |x| too


def test_complextorch_magnitude_max_pool_agrees():
    ctnn = pytest.importorskip("complextorch.nn")
    x = torch.randn(2, 3, 7, 6, dtype=torch.cfloat)
    ours, oi = cnn.MaxPool2d(3, 2, 1, return_indices=True)(x)
    theirs, ti = ctnn.MagMaxPool2d(3, 2, 1, return_indices=True)(x)
    torch.testing.assert_close(ours, theirs)
    assert torch.equal(oi, ti)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_equals_torch_on_each_part(nd):
    torch.manual_seed(0)
    x = _crandn(2, 3, *[8, 6, 4][:nd])
    y, idx = getattr(cnn, f"MaxPool{nd}d")(2, return_indices=True)(x)
    y = y.detach().requires_grad_()
    unpool = getattr(cnn, f"MaxUnpool{nd}d")(2)
    size = [n + 1 for n in x.shape[-nd:]]  # one more than the default: torch's output_size

    def ref_fn(r):
        return getattr(F, f"max_unpool{nd}d")(r, idx, 2, output_size=size)

    _assert_same(unpool(y, idx, size), _split(ref_fn, y), [y])
    torch.testing.assert_close(
        unpool(y, idx),
        _split(lambda r: ref_fn(r)[..., :-1], y) if nd == 1 else unpool(y, idx, list(x.shape)),
    )
    with pytest.raises(ValueError, match="max_unpool.*indices must be the torch.long tensor"):
        unpool(y, idx[..., :1])
    with pytest.raises(ValueError, match="output_size .* is not reachable"):
        unpool(y, idx, [n + 2 for n in x.shape[-nd:]])


def test_max_unpool_padding_overlaps_and_output_size_bounds_as_torch():
    """Padded, overlapping windows (k=3, s=2, p=1): torch's default size, torch's values per part;
    a repeated index keeps one entry (not their sum); output_size within ``default -/+ (s - 1)``."""
    torch.manual_seed(0)
    x = _crandn(2, 3, 7, 5)  # torch's default unpooled size is the input's
    y, idx = cnn.MaxPool2d(3, 2, 1, return_indices=True)(x)
    y = y.detach().requires_grad_()
    unpool = cnn.MaxUnpool2d(3, 2, 1)
    _assert_same(unpool(y, idx), _split(lambda r: F.max_unpool2d(r, idx, 3, 2, 1), y), [y])
    assert unpool(y, idx).shape[-2:] == F.max_unpool2d(y.detach().real, idx, 3, 2, 1).shape[-2:]
    dup = torch.tensor([[[1 + 1j, 2 - 1j]]], dtype=DT)
    out = cnn.MaxUnpool1d(2, 1)(dup, torch.zeros(1, 1, 2, dtype=torch.long))
    assert out[0, 0, 0] in (dup[0, 0, 0], dup[0, 0, 1]) and out[0, 0, 1:].eq(0).all()
    default = unpool(y, idx).shape[-2:]
    assert unpool(y, idx, [d + 1 for d in default]).shape[-2:] == tuple(d + 1 for d in default)
    for bad in (-2, 2):  # default -/+ stride
        with pytest.raises(ValueError, match="output_size .* is not reachable"):
            unpool(y, idx, [d + bad for d in default])


# ---- average pools and Upsample against the part formula ----------------------------------------
AVG_CASES = [
    (1, (2, 3, 9), (3, 2, 1, False, True)),
    (1, (3, 10), (4, 3, 2, True, False)),
    (2, (2, 2, 7, 6), ((3, 2), (2, 1), (1, 0), True, False, None)),
    (2, (2, 5, 5), (3, 2, 1, False, True, 5)),
    (3, (1, 2, 5, 4, 6), (2, 2, 1, True, True, None)),
    (3, (2, 4, 5, 3), ((3, 2, 2), 1, (1, 0, 1), False, False, 7)),
]


@pytest.mark.parametrize(("nd", "shape", "args"), AVG_CASES)
def test_avg_pool_equals_torch_on_each_part(nd, shape, args):
    x = _crandn(*shape, grad=True)
    got = getattr(cnn, f"AvgPool{nd}d")(*args)(x)
    _assert_same(got, _split(lambda r: getattr(F, f"avg_pool{nd}d")(r, *args), x), [x])


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("out", [1, 3])
def test_adaptive_avg_pool_equals_torch_on_each_part(nd, out):
    x = _crandn(2, 3, *[7, 5, 4][:nd], grad=True)
    got = getattr(cnn, f"AdaptiveAvgPool{nd}d")(out)(x)
    ref = _split(lambda r: getattr(F, f"adaptive_avg_pool{nd}d")(r, out), x)
    _assert_same(got, ref, [x])


UPSAMPLE_CASES = [
    ((2, 3, 5), {"scale_factor": 2}),
    ((2, 3, 5), {"size": 8, "mode": "linear", "align_corners": True}),
    ((2, 3, 5), {"scale_factor": 1.5, "mode": "nearest-exact"}),
    ((2, 3, 7), {"size": 3, "mode": "area"}),
    ((1, 2, 4, 5), {"scale_factor": 2, "mode": "bilinear"}),
    ((1, 2, 4, 5), {"size": (7, 9), "mode": "bilinear", "align_corners": True}),
    ((1, 2, 4, 5), {"scale_factor": (1.7, 2.3), "mode": "bicubic", "align_corners": False}),
    ((1, 2, 4, 5), {"scale_factor": 1.7, "mode": "nearest", "recompute_scale_factor": True}),
    ((1, 2, 3, 4, 3), {"scale_factor": 2, "mode": "trilinear"}),
    ((1, 2, 3, 4, 3), {"size": (4, 5, 6), "mode": "nearest"}),
]


@pytest.mark.parametrize(("shape", "kw"), UPSAMPLE_CASES)
def test_upsample_equals_torch_on_each_part(shape, kw):
    x = _crandn(*shape, grad=True)
    got = cnn.Upsample(**kw)(x)
    _assert_same(got, _split(lambda r: F.interpolate(r, **kw), x), [x])
    torch.testing.assert_close(CF.interpolate(x, **kw), got)
    assert torch.equal(cnn.Upsample(**kw)(x.real), torch.nn.Upsample(**kw)(x.real))


def test_upsample_antialias_and_non_contiguous_input():
    x = _crandn(1, 2, 8, 9, grad=True)
    fn = lambda r: F.interpolate(r, size=(3, 4), mode="bilinear", antialias=True)  # noqa: E731
    _assert_same(CF.interpolate(x, (3, 4), mode="bilinear", antialias=True), _split(fn, x), [x])
    xt = x.transpose(-1, -2)
    fn = lambda r: F.interpolate(r, scale_factor=2, mode="bicubic")  # noqa: E731
    _assert_same(cnn.Upsample(scale_factor=2, mode="bicubic")(xt), _split(fn, xt), [x])


def test_complextorch_upsample_and_avg_pool_agree():
    ctnn = pytest.importorskip("complextorch.nn")
    x = torch.randn(2, 3, 6, 5, dtype=torch.cfloat)
    for kw in ({"scale_factor": 2, "mode": "bilinear"}, {"size": (7, 8)}):
        torch.testing.assert_close(cnn.Upsample(**kw)(x), ctnn.Upsample(**kw)(x))
    torch.testing.assert_close(cnn.AvgPool2d(3, 2, 1)(x), ctnn.AvgPool2d(3, 2, 1)(x))
    torch.testing.assert_close(cnn.AdaptiveAvgPool2d(2)(x), ctnn.AdaptiveAvgPool2d(2)(x))


def test_torchcvnn_agrees_where_it_is_correct():
    """torchcvnn 0.10 (optional): Upsample, AvgPool2d (given a stride: without one its
    constructor fails) and AdaptiveAvgPool2d agree; its MaxPool2d agrees on one (batch, channel)
    plane only: it gathers ``z.flatten()[indices]`` with per-plane indices, so every plane gets
    entries of the first."""
    tcnn = pytest.importorskip("torchcvnn.nn")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6, dtype=torch.cfloat)
    up = {"scale_factor": 2, "mode": "bilinear"}
    torch.testing.assert_close(cnn.Upsample(**up)(x), tcnn.Upsample(**up)(x))
    torch.testing.assert_close(cnn.AvgPool2d(2)(x), tcnn.AvgPool2d(2, 2)(x))
    torch.testing.assert_close(cnn.AdaptiveAvgPool2d(3)(x), tcnn.AdaptiveAvgPool2d(3)(x))
    one = x[:1, :1]
    torch.testing.assert_close(cnn.MaxPool2d(2)(one), tcnn.MaxPool2d(2)(one))
    assert not torch.allclose(cnn.MaxPool2d(2)(x), tcnn.MaxPool2d(2)(x))  # the wrong case
    want = _loop_max_pool(x, [_windows(6, 2, 2, 0, 1, False)] * 2)[0]
    torch.testing.assert_close(cnn.MaxPool2d(2)(x), want)


def test_pixel_shuffle_of_torch_works_on_complex():
    """torch's PixelShuffle/PixelUnshuffle are index permutations and accept complex tensors
    (forward and backward), so cplxnet has no class for them."""
    x = _crandn(2, 8, 3, 4, grad=True)
    _assert_same(torch.nn.PixelShuffle(2)(x), _split(torch.nn.PixelShuffle(2), x), [x])
    y = _crandn(2, 2, 6, 8, grad=True)
    _assert_same(torch.nn.PixelUnshuffle(2)(y), _split(torch.nn.PixelUnshuffle(2), y), [y])


def test_grid_layer_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"MaxPool2d: expected input \(B, C, H, W\)"):
        cnn.MaxPool2d(2)(torch.randn(4, dtype=torch.cfloat))
    with pytest.raises(TypeError, match="AvgPool3d: input must be a complex or floating"):
        cnn.AvgPool3d(2)(torch.ones(1, 1, 2, 2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="Upsample: expected a batched input"):
        cnn.Upsample(scale_factor=2)(torch.randn(3, 4, dtype=torch.cfloat))
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        cnn.Dropout1d()(torch.randn(2, 3, 4, 4, dtype=torch.cfloat))


# ---- channel dropout ----------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:dropout[23]d. Received a")  # torch's and ours: tested below
@pytest.mark.parametrize(
    ("cls", "shape", "mask_dims"),
    [
        (cnn.Dropout1d, (4, 6, 7), 2),
        (cnn.Dropout1d, (6, 7), 1),  # unbatched
        (cnn.Dropout2d, (4, 6, 3, 5), 2),
        (cnn.Dropout2d, (4, 6, 7), 2),  # torch reads a 3-D input as (B, C, L)
        (cnn.Dropout2d, (4, 6, 2, 3, 2), 2),  # other ranks: torch's deprecated reading
        (cnn.Dropout3d, (3, 5, 2, 3, 4), 2),
        (cnn.Dropout3d, (6, 2, 3, 4), 1),  # unbatched
        (cnn.Dropout3d, (6, 2, 3), 1),  # other ranks: read as unbatched
    ],
)
def test_channel_dropout_drops_whole_complex_channels(cls, shape, mask_dims):
    p = 0.4
    x = _crandn(*shape, grad=True)
    torch.manual_seed(3)
    y = cls(p)(x)
    keep = (y != 0).flatten(mask_dims)  # x has no zeros: y == 0 exactly where dropped
    chan = keep.all(-1)
    assert torch.equal(keep.any(-1), chan)  # whole channels, both parts together
    assert 0 < chan.sum() < chan.numel()
    mask = (chan.to(torch.float64) / (1 - p)).reshape(*chan.shape, *[1] * (len(shape) - mask_dims))
    torch.testing.assert_close(y, x * mask)
    # the same mask as torch's real layer under the same seed
    torch.manual_seed(3)
    ref = getattr(torch.nn, cls.__name__)(p)(torch.ones(shape, dtype=torch.float64))
    torch.testing.assert_close(ref, mask.expand(shape))
    (g,) = torch.autograd.grad(y.real.sum(), x)
    torch.testing.assert_close(g, mask.expand(shape).to(DT))
    m = cls(p).eval()
    assert m(x) is x
    xi = x.detach().clone()
    torch.manual_seed(3)
    assert cls(p, True)(xi) is xi
    torch.testing.assert_close(xi, y.detach())
    assert torch.equal(cls(1.0)(x), torch.zeros_like(x))


@pytest.mark.parametrize("name", ["Dropout1d", "Dropout2d", "Dropout3d"])
@pytest.mark.parametrize("ndim", range(7))
@pytest.mark.parametrize("training", [True, False])
def test_channel_dropout_accepts_warns_and_refuses_the_ranks_torch_does(name, ndim, training):
    """Every rank 0-6 in both modes: torch's result, warnings and error (type and message)."""
    shape = (3, 4, 2, 3, 2, 2)[:ndim]

    def run(layer, x):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.manual_seed(5)
            try:
                out = layer.train(training)(x)
            except Exception as e:  # noqa: BLE001 (the exception is what is compared)
                return type(e), str(e), [str(w.message) for w in seen]
        return out, [str(w.message) for w in seen]

    x = torch.rand(shape, dtype=torch.float64) + 0.5
    want = run(getattr(torch.nn, name)(0.5), x)
    got = run(getattr(cnn, name)(0.5), x)
    got_c = run(getattr(cnn, name)(0.5), torch.complex(x, x))
    if isinstance(want[0], type):
        assert got == want and got_c == want
        return
    assert got[1] == want[1] and got_c[1] == want[1]  # the same warnings
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got_c[0], torch.complex(want[0], want[0]))


# ---- export and fullgraph compile ---------------------------------------------------------------
def _wider(x: torch.Tensor) -> torch.Tensor:
    """``x`` with two more positions along its last (spatial) dim."""
    return torch.cat([x, torch.randn_like(x[..., :2])], -1)


#: the export + compile test takes a second or more per entry: one entry of each kind of layer
#: (convolution, transposed convolution, max, average, adaptive average and adaptive max
#: pooling, upsampling) in the fast subset, the others ``slow`` (CI runs them)
FAST_EXPORT = {
    "Conv2d_unbatched", "ConvTranspose1d_unbatched_dilation", "MaxPool2d_unbatched_ceil_indices",
    "AvgPool1d_unbatched_ceil_exclude_pad", "AdaptiveAvgPool2d_unbatched", "AdaptiveMaxPool2d",
    "Upsample",
}  # fmt: skip


#: entries left out of the export + compile test because another exported entry runs the same
#: cplxnet code (entry: its twin): ``interpolate`` passes the mode to torch unchanged, and one
#: nd-generic function serves the 1-D, 2-D and 3-D (transposed) convolutions
SAME_EXPORT_PATH = {
    "Upsample_bilinear": "Upsample", "Upsample_bicubic": "Upsample_nearest_exact",
    "Upsample_trilinear": "Upsample_linear_align", "ConvTranspose2d": "ConvTranspose3d",
    "Conv3d": "Conv3d_replicate",
}  # fmt: skip


def test_the_slow_export_entries_exist():
    ids = {i.id for i in EXPORT}
    assert ids >= FAST_EXPORT | set(SAME_EXPORT_PATH) | set(SAME_EXPORT_PATH.values())
    assert not set(SAME_EXPORT_PATH.values()) & set(SAME_EXPORT_PATH)
    for entry, twin in SAME_EXPORT_PATH.items():  # the same layer class
        assert entry.split("_")[0].rstrip("123d") == twin.split("_")[0].rstrip("123d")


@pytest.mark.parametrize(
    "info",
    [
        pytest.param(i, id=i.id, marks=[pytest.mark.slow] * (i.id not in FAST_EXPORT))
        for i in EXPORT
        if i.id not in SAME_EXPORT_PATH
    ],
)
def test_exports_with_a_dynamic_spatial_size_and_compiles_fullgraph(info):
    torch.manual_seed(0)
    m = make_module(info, dtype=torch.complex64) if info.takes_factory_kwargs else make_module(info)
    m.eval()
    (x,), kwargs = sample_input(info, torch.complex64)
    assert not kwargs
    program = torch.export.export(m, (x,), dynamic_shapes=({x.dim() - 1: Dim.DYNAMIC},))
    x2 = _wider(x)
    for got, want in zip(_flat(program.module()(x2)), _flat(m(x2))):
        torch.testing.assert_close(got, want)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True, dynamic=True)
    for inp in (x, x2):
        for got, want in zip(_flat(compiled(inp)), _flat(m(inp))):
            torch.testing.assert_close(got, want)


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]
