"""Dropout module: train/eval behaviour and errors."""

import pytest
import torch

from cplxnet import nn as cnn


def test_train_eval():
    d = cnn.Dropout(0.5)
    z = torch.complex(torch.rand(1000) + 1, torch.rand(1000) + 1)
    out = d(z)
    assert torch.equal(out.real == 0, out.imag == 0) and (out == 0).any()
    d.eval()
    assert torch.equal(d(z), z)
    assert "p=0.5" in repr(d)


def test_errors():
    with pytest.raises(ValueError, match=r"Dropout: probability p must be in \[0, 1\], got -0.1"):
        cnn.Dropout(-0.1)
    with pytest.raises(TypeError, match="Dropout: input must be a complex or floating tensor"):
        cnn.Dropout()(torch.ones(3, dtype=torch.long))
