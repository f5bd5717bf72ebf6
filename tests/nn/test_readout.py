"""Readout modules require complex input and return real tensors."""

import pytest
import torch

from cplxnet import nn as cnn


def test_readouts_shapes_and_errors():
    z = torch.randn(2, 3, 4, dtype=torch.complex64)
    assert cnn.Magnitude()(z).shape == (2, 3, 4)
    assert cnn.RealPart()(z).dtype == torch.float32
    assert cnn.ConcatRealImag()(z).shape == (2, 3, 8)
    assert cnn.ConcatRealImag(dim=1)(z).shape == (2, 6, 4)
    for m in (cnn.Magnitude(), cnn.RealPart(), cnn.ConcatRealImag()):
        with pytest.raises(TypeError, match=f"{type(m).__name__}: input must be a complex tensor"):
            m(torch.randn(2, 3))
