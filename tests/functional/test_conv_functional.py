"""Complex convolution equals four real convolutions."""

import pytest
import torch
import torch.nn.functional as F

from cplxnet import functional as CF

DT = torch.complex128


def _four_real(conv, x, w, b, **kw):
    A, B = w.real, w.imag
    re = conv(x.real, A, None, **kw) - conv(x.imag, B, None, **kw)
    im = conv(x.real, B, None, **kw) + conv(x.imag, A, None, **kw)
    out = torch.complex(re, im)
    if b is not None:
        out = out + b.reshape(-1, *([1] * (x.dim() - 2)))
    return out


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2, "padding": 1},
        {"dilation": 2, "padding": "same"},
        {"groups": 2, "padding": 2},
    ],
)
def test_conv1d_equals_four_real_convolutions(kw):
    x = torch.randn(3, 4, 11, dtype=DT)
    w = torch.randn(6, 4 // kw.get("groups", 1), 3, dtype=DT)
    b = torch.randn(6, dtype=DT)
    torch.testing.assert_close(CF.conv1d(x, w, b, **kw), _four_real(F.conv1d, x, w, b, **kw))


def test_conv2d_equals_four_real_convolutions():
    x = torch.randn(2, 3, 7, 6, dtype=DT)
    w = torch.randn(5, 3, 3, 2, dtype=DT)
    b = torch.randn(5, dtype=DT)
    kw = {"stride": (1, 2), "padding": (1, 0)}
    torch.testing.assert_close(CF.conv2d(x, w, b, **kw), _four_real(F.conv2d, x, w, b, **kw))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_padding_modes_match_padding_each_part(mode):
    x = torch.randn(2, 3, 8, dtype=DT)
    w = torch.randn(4, 3, 3, dtype=DT)
    xp = torch.complex(F.pad(x.real, (2, 2), mode=mode), F.pad(x.imag, (2, 2), mode=mode))
    ref = _four_real(F.conv1d, xp, w, None)
    torch.testing.assert_close(CF.conv1d(x, w, None, padding=2, padding_mode=mode), ref)


def test_gradcheck():
    x = torch.randn(2, 2, 5, dtype=DT, requires_grad=True)
    w = torch.randn(3, 2, 3, dtype=DT, requires_grad=True)
    b = torch.randn(3, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *t: CF.conv1d(*t, padding=1), (x, w, b))


def test_conv2d_groups_and_unbatched_match_four_real_convolutions():
    x = torch.randn(2, 4, 5, 6, dtype=DT)
    w = torch.randn(6, 2, 3, 3, dtype=DT)
    b = torch.randn(6, dtype=DT)
    kw = {"groups": 2, "padding": 1, "dilation": (1, 2)}
    torch.testing.assert_close(CF.conv2d(x, w, b, **kw), _four_real(F.conv2d, x, w, b, **kw))
    torch.testing.assert_close(CF.conv2d(x[0], w, b, **kw), _four_real(F.conv2d, x, w, b, **kw)[0])


def test_block_formulation_matches_torch_native_complex_conv_gradients():
    x = torch.randn(2, 4, 9, dtype=DT, requires_grad=True)
    w = torch.randn(6, 2, 3, dtype=DT, requires_grad=True)
    b = torch.randn(6, dtype=DT, requires_grad=True)
    g = torch.randn(2, 6, 9, dtype=DT)
    ours = torch.autograd.grad(CF.conv1d(x, w, b, padding=1, groups=2), (x, w, b), g)
    native = torch.autograd.grad(F.conv1d(x, w, b, padding=1, groups=2), (x, w, b), g)
    for a, n in zip(ours, native):
        torch.testing.assert_close(a, n)
