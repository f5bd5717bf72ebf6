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
