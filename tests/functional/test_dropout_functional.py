"""Complex dropout: one shared mask per complex entry, right scaling, identity in eval."""

import math

import pytest
import torch

from cplxnet import functional as CF


def _nonzero_z(n):
    re = torch.rand(n, dtype=torch.float64) + 0.5
    return torch.complex(re, -(torch.rand(n, dtype=torch.float64) + 0.5))


def test_mask_is_shared_by_real_and_imaginary_parts():
    z = _nonzero_z(20000)
    out = CF.dropout(z, 0.3, training=True)
    assert torch.equal(out.real == 0, out.imag == 0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_scaling_and_drop_rate(p):
    n = 40000
    z = _nonzero_z(n)
    out = CF.dropout(z, p, training=True)
    kept = out != 0
    torch.testing.assert_close(out[kept], z[kept] / (1 - p))
    rate = 1 - kept.double().mean().item()
    assert abs(rate - p) < 5 * (p * (1 - p) / n) ** 0.5


def test_identity_in_eval_and_at_p0_zeros_at_p1():
    z = _nonzero_z(100)
    assert CF.dropout(z, 0.5, training=False) is z
    assert CF.dropout(z, 0.0, training=True) is z
    assert torch.all(CF.dropout(z, 1.0, training=True) == 0)


def test_gradient_is_the_scaled_mask():
    z = _nonzero_z(1000).requires_grad_()
    torch.manual_seed(3)
    out = CF.dropout(z, 0.4, training=True)
    torch.view_as_real(out).sum().backward()
    mask = (out != 0).double() / 0.6
    torch.testing.assert_close(z.grad, torch.complex(mask, mask))


def test_non_contiguous_input_and_real_input():
    z = torch.randn(8, 6, dtype=torch.complex64).t()
    out = CF.dropout(z, 0.5, training=True)
    assert out.shape == z.shape and torch.equal(out.real == 0, out.imag == 0)
    x = torch.randn(1000)
    y = CF.dropout(x, 0.5, training=True)
    assert ((y == 0) | torch.isclose(y, 2 * x)).all()


def test_invalid_probability():
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        CF.dropout(torch.zeros(2, dtype=torch.complex64), 1.5)


@pytest.mark.parametrize(
    ("fn", "shape"),
    [(CF.dropout, (4, 3, 5)), (CF.dropout1d, (4, 3, 5)), (CF.dropout2d, (2, 3, 4, 5))],
)
def test_inplace_dropout_on_a_lazy_conjugate_writes_through_it(fn, shape):
    base = _nonzero_z(math.prod(shape)).reshape(shape)
    z = base.conj()
    torch.manual_seed(3)
    expected = fn(z.resolve_conj(), 0.5, True)
    torch.manual_seed(3)
    out = fn(z, 0.5, True, inplace=True)
    assert out is z and out.is_conj()
    torch.testing.assert_close(base.conj().resolve_conj(), expected)
    assert (expected == 0).any() and (expected != 0).any()
