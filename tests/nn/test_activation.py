"""Activation modules: ModReLU parameters, real support, errors."""

import pytest
import torch

from cplxnet import functional as CF
from cplxnet import nn as cnn


def test_modrelu_module_bias_and_forward():
    m = cnn.ModReLU(5, bias_init=-0.2, dtype=torch.complex128)
    assert m.bias.shape == (5,) and m.bias.dtype == torch.float64
    assert torch.all(m.bias == -0.2)
    z = torch.randn(3, 5, dtype=torch.complex128)
    torch.testing.assert_close(m(z), CF.modrelu(z, m.bias))
    shared = cnn.ModReLU(1, dtype=torch.complex128)
    assert shared(z).shape == z.shape
    multi = cnn.ModReLU((2, 5), dtype=torch.complex128)
    assert multi(torch.randn(4, 2, 5, dtype=torch.complex128)).shape == (4, 2, 5)


def test_modrelu_per_channel_of_feature_maps():
    """``num_features=(C, 1, 1)``: one threshold per channel of ``(N, C, H, W)`` maps (the
    complex CNNs of MRI reconstruction), equal to the functional with the broadcast bias; a
    bias that would change the input's shape is refused."""
    m = cnn.ModReLU((3, 1, 1), dtype=torch.complex128)
    with torch.no_grad():
        m.bias.copy_(torch.tensor([-0.5, 0.0, 0.7]).view(3, 1, 1))
    z = torch.randn(2, 3, 4, 5, dtype=torch.complex128, requires_grad=True)
    want = torch.stack([CF.modrelu(z[:, c], b) for c, b in enumerate((-0.5, 0.0, 0.7))], 1)
    torch.testing.assert_close(m(z), want)
    assert torch.autograd.gradcheck(m, (z,))
    for bad in ((2, 2, 4, 5), (2, 3, 4)):
        with pytest.raises(ValueError, match=r"expected input ending in dims \(3, 1, 1\)"):
            m(torch.randn(*bad, dtype=torch.complex128))
    with pytest.raises(ValueError, match="expected input ending in dims"):  # would broadcast up
        cnn.ModReLU(4, dtype=torch.complex128)(torch.randn(2, 1, dtype=torch.complex128))


def test_modrelu_default_is_identity_with_learnable_threshold():
    m = cnn.ModReLU(4, dtype=torch.complex128)
    z = torch.randn(2, 4, dtype=torch.complex128)
    torch.testing.assert_close(m(z), z)
    torch.view_as_real(m(z)).sum().backward()
    assert m.bias.grad is not None and torch.all(m.bias.grad != 0)


def test_parameter_free_activations_accept_real_and_complex():
    x = torch.randn(3, 4)
    z = torch.randn(3, 4, dtype=torch.complex64)
    for m in [cnn.CReLU(), cnn.ZReLU(), cnn.Cardioid(), cnn.SplitTanh(), cnn.SplitSigmoid()]:
        assert m(z).dtype == torch.complex64
        assert m(x).dtype == torch.float32
    torch.testing.assert_close(cnn.SplitGELU("tanh")(x), torch.nn.GELU("tanh")(x))


def test_errors():
    with pytest.raises(ValueError, match="valid approximates are 'none', 'tanh'"):
        cnn.SplitGELU("fast")
    with pytest.raises(TypeError, match="CReLU: input must be a complex or floating tensor"):
        cnn.CReLU()(torch.ones(3, dtype=torch.long))
    m = cnn.ModReLU(4, dtype=torch.complex128)
    with pytest.raises(ValueError, match=r"ModReLU: expected input ending in dims \(4,\)"):
        m(torch.randn(2, 3, dtype=torch.complex128))
    with pytest.raises(TypeError, match="ModReLU: input has dtype torch.complex64"):
        m(torch.randn(2, 4, dtype=torch.complex64))
    with pytest.raises(TypeError, match="ModReLU: input must be a complex tensor"):
        m(torch.randn(2, 4, dtype=torch.float64))


@pytest.mark.parametrize("name", cnn.ACTIVATIONS)
def test_activation_module_complex_and_real_agree_on_the_reals(name):
    """One factory for every name: the complex module, and for a real dtype its restriction to
    the reals (the complex module on real inputs computes the same values)."""
    c = cnn.activation_module(name, 4, dtype=torch.complex128)
    r = cnn.activation_module(name, 4, dtype=torch.float64)
    assert cnn.activation_module(name, 4).__class__ is c.__class__  # default dtype: complex
    z = torch.randn(3, 4, dtype=torch.complex128)
    assert c(z).dtype == torch.complex128
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(r(x), c(x.to(torch.complex128)).real)
    if name == "modrelu":
        assert c.bias.dtype == torch.float64 and r.bias.shape == (4,)


def test_activation_module_errors_and_the_transformer_uses_it():
    with pytest.raises(ValueError, match="unknown activation 'swish'; valid activations are"):
        cnn.activation_module("swish")
    with pytest.raises(TypeError, match="dtype"):
        cnn.activation_module("crelu", dtype=torch.int64)
    for name in cnn.ACTIVATIONS:
        for dt in (torch.complex64, torch.float32):
            layer = cnn.TransformerEncoderLayer(
                4, 2, 6, activation=name, dtype=dt, batch_first=True
            )
            assert type(layer.activation) is type(cnn.activation_module(name, 6, dtype=dt))
