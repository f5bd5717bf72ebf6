"""Conv modules: four-real-convolution reference, torch-compatible shapes, init, errors."""

import pytest
import torch
import torch.nn.functional as F

from cplxnet import nn as cnn

DT = torch.complex128


def test_conv1d_module_equals_four_real_convolutions():
    conv = cnn.Conv1d(4, 6, 3, padding=1, dtype=DT)
    with torch.no_grad():
        conv.bias.normal_()
    x = torch.randn(2, 4, 9, dtype=DT)
    A, B = conv.weight.real, conv.weight.imag
    re = F.conv1d(x.real, A, padding=1) - F.conv1d(x.imag, B, padding=1)
    im = F.conv1d(x.real, B, padding=1) + F.conv1d(x.imag, A, padding=1)
    torch.testing.assert_close(conv(x), torch.complex(re, im) + conv.bias[:, None])


@pytest.mark.parametrize(
    "kw",
    [
        {"stride": 2},
        {"padding": "same", "dilation": 2},
        {"groups": 2, "bias": False},
        {"padding": 1, "padding_mode": "circular"},
    ],
)
def test_output_shapes_match_torch(kw):
    ours = cnn.Conv1d(4, 6, 3, **kw)
    ref = torch.nn.Conv1d(4, 6, 3, **kw)
    x = torch.randn(2, 4, 10)
    assert ours(x.to(torch.complex64)).shape == ref(x).shape
    ours2 = cnn.Conv2d(4, 6, 3, **kw)
    ref2 = torch.nn.Conv2d(4, 6, 3, **kw)
    x2 = torch.randn(2, 4, 8, 7)
    assert ours2(x2.to(torch.complex64)).shape == ref2(x2).shape


def test_unbatched_input():
    conv = cnn.Conv1d(3, 2, 3)
    assert conv(torch.randn(3, 7, dtype=torch.complex64)).shape == (2, 5)


def test_init_glorot_total_variance():
    conv = cnn.Conv1d(128, 256, 3, dtype=DT)
    fan_in, fan_out = 128 * 3, 256 * 3
    var = (conv.weight.detach().abs() ** 2).mean().item()
    assert abs(var / (2 / (fan_in + fan_out)) - 1) < 0.03
    assert torch.all(conv.bias == 0)


def test_errors():
    with pytest.raises(ValueError, match="must be divisible by groups"):
        cnn.Conv1d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="valid padding_modes are 'zeros', 'reflect'"):
        cnn.Conv1d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        cnn.Conv1d(3, 4, 3, padding="same", stride=2)
    conv = cnn.Conv1d(3, 4, 3)
    with pytest.raises(ValueError, match=r"Conv1d: expected input \(B, 3, L\)"):
        conv(torch.randn(2, 5, 8, dtype=torch.complex64))
    with pytest.raises(TypeError, match="Conv1d: input must be a complex tensor"):
        conv(torch.randn(2, 3, 8))
    with pytest.raises(TypeError, match="Conv2d: input has dtype torch.complex64"):
        cnn.Conv2d(3, 4, 3, dtype=DT)(torch.randn(1, 3, 5, 5, dtype=torch.complex64))


@pytest.mark.parametrize(
    ("kw", "what"),
    [
        ({"kernel_size": 0}, "kernel_size"),
        ({"kernel_size": 3, "stride": 0}, "stride"),
        ({"kernel_size": 3, "dilation": (1, 0)}, "dilation"),
        ({"kernel_size": 3, "padding": -1}, "padding must be non-negative"),
    ],
)
def test_bad_sizes_are_clear_errors(kw, what):
    with pytest.raises(ValueError, match=f"Conv2d: {what}"):
        cnn.Conv2d(3, 4, **kw)
    with pytest.raises(ValueError, match="Conv1d: in_channels must be positive"):
        cnn.Conv1d(0, 4, 3)


def test_input_shorter_than_the_kernel_is_a_clear_error():
    conv = cnn.Conv1d(3, 4, 5)
    with pytest.raises(ValueError, match=r"Conv1d: .* shorter than the kernel: padded size 4 < "):
        conv(torch.randn(2, 3, 4, dtype=torch.complex64))
    assert conv(torch.randn(2, 3, 5, dtype=torch.complex64)).shape == (2, 4, 1)  # exactly fits
    padded = cnn.Conv1d(3, 4, 5, padding=1, dilation=1)
    assert padded(torch.randn(3, 3, dtype=torch.complex64)).shape == (4, 1)  # unbatched, 3 + 2
    with pytest.raises(ValueError, match="dilated kernel size 5"):
        cnn.Conv2d(3, 4, 3, dilation=(1, 2))(torch.randn(1, 3, 6, 4, dtype=torch.complex64))
    same = cnn.Conv1d(3, 4, 5, padding="same")
    assert same(torch.randn(1, 3, 2, dtype=torch.complex64)).shape == (1, 4, 2)
