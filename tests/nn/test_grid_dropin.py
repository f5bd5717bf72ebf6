"""The grid layers as drop-ins for torch.nn: built from torch's positional arguments (every one
away from its default), the options land where torch puts them, the parameters have torch's names
and shapes (torch's state_dict loads), and on real-valued data the layer computes torch's
function with torch's forward arguments."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from cplxnet import nn as cnn

CONV_FIELDS = (
    "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
    "padding_mode", "output_padding", "transposed",
)  # fmt: skip


def _conv_options(m):
    return {f: getattr(m, f) for f in CONV_FIELDS} | {"bias": m.bias is not None}


# (class name, positional arguments up to those before device/dtype, input shape)
CONV_CASES = [
    ("Conv3d", (4, 6, (3, 2, 1), (2, 1, 1), (1, 0, 1), (1, 2, 1), 2, False, "reflect"),
     (2, 4, 6, 5, 4)),
    ("Conv3d", (2, 4, 3, 1, "same", 2, 1, True, "circular"), (1, 2, 5, 6, 5)),
    ("Conv3d", (2, 4, (2, 4, 3), 1, "same", 1, 1, True, "reflect"), (1, 2, 5, 6, 5)),
    ("ConvTranspose1d", (4, 6, 3, 2, 1, 1, 2, False, 3), (2, 4, 5)),
    ("ConvTranspose2d", (4, 2, (3, 2), (2, 3), (1, 0), (1, 2), 2, True, (1, 2)), (2, 4, 3, 4)),
    ("ConvTranspose3d", (2, 4, 2, (2, 1, 2), 0, (1, 0, 0), 1, False, 1), (1, 2, 3, 2, 3)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "shape"), CONV_CASES)
def test_conv_positional_arguments_land_where_torch_puts_them(name, args, shape):
    ours = getattr(cnn, name)(*args, dtype=torch.complex128)
    theirs = getattr(nn, name)(*args, dtype=torch.complex128)
    assert _conv_options(ours) == _conv_options(theirs)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in theirs.state_dict().items()
    }
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(shape, dtype=torch.complex128)
    torch.testing.assert_close(ours(x), theirs(x))


def test_conv_transpose_forward_takes_torchs_output_size():
    args = (2, 3, 3, 2, 1)
    ours = cnn.ConvTranspose1d(*args, dtype=torch.complex128)
    theirs = nn.ConvTranspose1d(*args, dtype=torch.complex128)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 2, 5, dtype=torch.complex128)
    torch.testing.assert_close(ours(x, [10]), theirs(x, [10]))


# (class name, positional arguments, input shape, forward extras); inputs are positive reals, so
# the max pools by modulus select what torch's max by value selects
FREE_CASES = [
    ("MaxPool1d", (3, 2, 1, 2, True, True), (2, 3, 11)),
    ("MaxPool2d", ((3, 2), (2, 1), (1, 0), (1, 2), True, True), (2, 3, 8, 9)),
    ("MaxPool3d", (2, 1, 1, 2, True, True), (1, 2, 5, 4, 6)),
    ("AvgPool1d", (3, 2, 1, True, False), (2, 3, 10)),
    ("AvgPool2d", ((3, 2), (2, 1), (1, 1), True, False, 5), (2, 3, 7, 8)),
    ("AvgPool3d", (2, 1, 1, True, False, 3), (1, 2, 4, 5, 3)),
    ("AdaptiveAvgPool1d", (4,), (2, 3, 9)),
    ("AdaptiveAvgPool2d", ((3, None),), (2, 3, 7, 5)),
    ("AdaptiveAvgPool3d", (2,), (1, 2, 5, 4, 3)),
    ("AdaptiveMaxPool1d", (4, True), (2, 3, 9)),
    ("AdaptiveMaxPool2d", ((3, 2), True), (2, 3, 7, 5)),
    ("AdaptiveMaxPool3d", (2, True), (1, 2, 5, 4, 3)),
    ("Upsample", (None, 2.5, "bilinear", True, True), (1, 2, 3, 4)),
    ("Upsample", ((5, 7, 6), None, "trilinear", False), (1, 2, 3, 4, 3)),
    ("Upsample", (9, None, "nearest-exact"), (2, 3, 4)),
    ("Dropout1d", (0.3, False), (2, 3, 4)),
    ("Dropout2d", (0.3, False), (2, 3, 4, 4)),
    ("Dropout3d", (0.3, True), (2, 3, 2, 2, 2)),
]

_OPTIONS = (
    "kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode",
    "count_include_pad", "divisor_override", "output_size", "size", "scale_factor", "mode",
    "align_corners", "recompute_scale_factor", "p", "inplace",
)  # fmt: skip


def _options(m):
    return {f: getattr(m, f) for f in _OPTIONS if hasattr(m, f)}


@pytest.mark.parametrize(("name", "args", "shape"), FREE_CASES)
def test_free_layers_take_torchs_positional_arguments(name, args, shape):
    ours, theirs = getattr(cnn, name)(*args), getattr(nn, name)(*args)
    assert _options(ours) == _options(theirs) and len(_options(ours)) >= len(args)
    assert repr(ours) == repr(theirs)
    if name.startswith("Dropout"):
        ours.eval(), theirs.eval()
    x = torch.rand(shape, dtype=torch.float64) + 0.1
    got, want = ours(x.clone()), theirs(x.clone())
    got_c = ours(x.to(torch.complex128))
    for a, b, c in zip(*(o if isinstance(o, tuple) else (o,) for o in (got, want, got_c))):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(c.real if c.is_complex() else c, b)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_with_stride_and_padding_as_torch(nd):
    """Overlapping windows, stride and padding away from the kernel size: torch's default
    unpooled size and, where indices repeat, torch's values on distinct indices."""
    pool = getattr(nn, f"MaxPool{nd}d")(3, 2, 1, 1, True)
    x = torch.rand(2, 3, *[9, 7, 5][:nd], dtype=torch.float64)
    y, idx = pool(x)
    ours, theirs = getattr(cnn, f"MaxUnpool{nd}d")(3, 2, 1), getattr(nn, f"MaxUnpool{nd}d")(3, 2, 1)
    got, want = ours(y.to(torch.complex128), idx), theirs(y, idx)
    assert got.shape == want.shape
    torch.testing.assert_close(got.real, want)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_takes_torchs_arguments(nd):
    pool = getattr(nn, f"MaxPool{nd}d")(2, 2, 0, 1, True)
    x = torch.rand(2, 3, *[6, 4, 4][:nd], dtype=torch.float64)
    y, idx = pool(x)
    ours, theirs = getattr(cnn, f"MaxUnpool{nd}d")(2, 2, 0), getattr(nn, f"MaxUnpool{nd}d")(2, 2, 0)
    assert _options(ours) == _options(theirs)
    size = [n + 1 for n in x.shape[-nd:]]
    torch.testing.assert_close(ours(y, idx, size), theirs(y, idx, size))
    torch.testing.assert_close(ours(y.to(torch.complex128), idx).real, theirs(y, idx))


# The complex convolutions' extra_repr names every non-default option torch's names, with the
# same values (dilation, output_padding, groups, padding_mode, ...).
REPR_CASES = [
    ("Conv1d", (2, 4, 3), {"dilation": 2}),
    ("Conv2d", (3, 4, 3), {"dilation": (2, 1), "padding": 1, "stride": 2}),
    ("Conv3d", (2, 4, 2), {"groups": 2, "bias": False, "dilation": 3}),
    ("Conv1d", (2, 4, 3), {"padding": "same", "dilation": 2, "padding_mode": "reflect"}),
    ("Conv2d", (2, 4, (3, 1)), {"stride": (2, 1), "padding": (1, 0), "padding_mode": "circular"}),
    ("ConvTranspose1d", (2, 4, 3), {"stride": 2, "output_padding": 1, "dilation": 2}),
    ("ConvTranspose2d", (2, 4, 2), {"stride": 2, "groups": 2, "dilation": (1, 2)}),
    ("ConvTranspose3d", (2, 4, 2), {"stride": 2, "output_padding": 1, "dilation": 3}),
]


def _fields(text):
    """``{key: value}`` of the ``key=value`` entries of an extra_repr (quotes dropped)."""
    return {k: v.replace("'", "") for k, v in re.findall(r"(\w+)=(\([^)]*\)|[^,]+)", text)}


@pytest.mark.parametrize(("name", "args", "kwargs"), REPR_CASES)
def test_conv_extra_repr_names_torchs_options(name, args, kwargs):
    ours = getattr(cnn, name)(*args, **kwargs)
    theirs = getattr(nn, name)(*args, **kwargs)
    got, want = _fields(ours.extra_repr()), _fields(theirs.extra_repr())
    assert got.pop("dtype") == str(torch.complex64)
    assert got == want
    assert ours.extra_repr().startswith(f"{args[0]}, {args[1]}, ")
