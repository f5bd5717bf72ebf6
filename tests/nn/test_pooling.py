"""Pooling modules: mask checks and delegation."""

import pytest
import torch

from cplxnet import functional as CF
from cplxnet import nn as cnn


def test_modules_delegate():
    x = torch.randn(2, 5, 3, dtype=torch.complex64)
    mask = torch.tensor([[False] * 5, [False, False, True, True, True]])
    torch.testing.assert_close(cnn.MeanPool()(x, mask), CF.masked_mean(x, mask))
    torch.testing.assert_close(cnn.MaxMagnitudePool()(x, mask), CF.masked_max_magnitude(x, mask))
    conv_out = torch.randn(2, 3, 5, dtype=torch.complex64)
    torch.testing.assert_close(cnn.MaxMagnitudePool(dim=-1)(conv_out), CF.max_magnitude(conv_out))


def test_mask_errors():
    x = torch.randn(2, 5, 3, dtype=torch.complex64)
    pool = cnn.MeanPool()
    with pytest.raises(ValueError, match=r"MeanPool: padding_mask .* must have shape \(2, 5\)"):
        pool(x, torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="MaxMagnitudePool: padding_mask .* must be a torch.bool"):
        cnn.MaxMagnitudePool()(x, torch.zeros(2, 5))
    with pytest.raises(ValueError, match="dim=0 is the batch dim"):
        cnn.MeanPool(dim=0)(x)
    with pytest.raises(TypeError, match="MeanPool: input must be a complex or floating tensor"):
        pool(torch.ones(2, 5, dtype=torch.long))
