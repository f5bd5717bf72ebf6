"""Linear module equals the block real matmul; errors."""

import pytest
import torch

from cplxnet import nn as cnn


def test_linear_module_equals_block_real_matmul():
    lin = cnn.Linear(5, 3, dtype=torch.complex128)
    with torch.no_grad():
        lin.bias.normal_()
    A, B = lin.weight.real, lin.weight.imag
    block = torch.cat([torch.cat([A, -B], 1), torch.cat([B, A], 1)], 0)
    x = torch.randn(4, 5, dtype=torch.complex128)
    y = torch.cat([x.real, x.imag], -1) @ block.T + torch.cat([lin.bias.real, lin.bias.imag])
    torch.testing.assert_close(lin(x), torch.complex(y[:, :3], y[:, 3:]))


def test_linear_init_variance_and_errors():
    lin = cnn.Linear(512, 512, dtype=torch.complex128)
    var = (lin.weight.detach().abs() ** 2).mean().item()
    assert abs(var / (2 / 1024) - 1) < 0.02
    with pytest.raises(ValueError, match="Linear: expected input with last dimension 512"):
        lin(torch.randn(2, 3, dtype=torch.complex128))
    with pytest.raises(TypeError, match="Linear: input must be a complex tensor"):
        lin(torch.randn(2, 512, dtype=torch.float64))
    with pytest.raises(ValueError, match="Linear: out_features must be a positive integer, got -1"):
        cnn.Linear(3, -1)
    with pytest.raises(ValueError, match="Linear: in_features must be a positive integer, got 0"):
        cnn.Linear(0, 3)


def test_real_weight_linear_is_complex_linear_with_weight_w_plus_0i():
    """weight_field="real": one real (out, in) weight (real in the state_dict and factory
    dtype), the layer equal to the complex Linear with weight W + 0i and the same bias."""
    lin = cnn.Linear(5, 3, weight_field="real", dtype=torch.complex128)
    assert lin.weight.dtype == torch.float64 and lin.weight.shape == (3, 5)
    assert lin.bias.dtype == torch.complex128 and lin.dtype == torch.complex128
    sd = lin.state_dict()
    assert sd["weight"].dtype == torch.float64 and sd["bias"].dtype == torch.complex128
    assert cnn.Linear(5, 3, weight_field="real").weight.dtype == torch.float32  # default dtype
    with torch.no_grad():
        lin.bias.normal_()
    ref = cnn.Linear(5, 3, dtype=torch.complex128)
    with torch.no_grad():
        ref.weight.copy_(torch.complex(lin.weight, torch.zeros_like(lin.weight)))
        ref.bias.copy_(lin.bias)
    x = torch.randn(2, 4, 5, dtype=torch.complex128)
    torch.testing.assert_close(lin(x), ref(x))
    assert "weight_field='real'" in repr(lin) and "weight_field" not in repr(ref)
    clone = cnn.Linear(5, 3, weight_field="real", dtype=torch.complex128)
    clone.load_state_dict(sd)
    torch.testing.assert_close(clone(x), lin(x))


def test_real_weight_linear_init_and_errors():
    lin = cnn.Linear(512, 512, weight_field="real", dtype=torch.complex128)
    var = (lin.weight.detach() ** 2).mean().item()  # same total variance as the complex init
    assert abs(var / (2 / 1024) - 1) < 0.02
    x = torch.randn(64, 512, dtype=torch.complex128)
    full = cnn.Linear(512, 512, dtype=torch.complex128)
    ratio = lin(x).abs().pow(2).mean() / full(x).abs().pow(2).mean()
    assert 0.8 < ratio.item() < 1.25  # outputs of the same scale
    with pytest.raises(ValueError, match="Linear: unknown weight_field 'shared'; valid weight_fie"):
        cnn.Linear(3, 3, weight_field="shared")
    with pytest.raises(TypeError, match="Linear: input must be a complex tensor"):
        lin(torch.randn(2, 512, dtype=torch.float64))
