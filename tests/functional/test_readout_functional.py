"""Complex-to-real readouts."""

import torch

from cplxnet import functional as CF


def test_magnitude_value_and_safe_gradient_at_zero():
    z = torch.tensor([3 + 4j, 0j, -1j], dtype=torch.complex128, requires_grad=True)
    m = CF.magnitude(z)
    torch.testing.assert_close(m, torch.tensor([5.0, 0.0, 1.0], dtype=torch.float64))
    m.sum().backward()
    assert torch.isfinite(torch.view_as_real(z.grad)).all()
    assert z.grad[1] == 0
    torch.testing.assert_close(z.grad[0], torch.tensor(0.6 + 0.8j, dtype=torch.complex128))


def test_real_part_and_concat():
    z = torch.randn(2, 3, 4, dtype=torch.complex128)
    torch.testing.assert_close(CF.real_part(z), z.real)
    cat = CF.concat_real_imag(z)
    assert cat.shape == (2, 3, 8) and not cat.is_complex()
    torch.testing.assert_close(cat[..., :4], z.real)
    torch.testing.assert_close(cat[..., 4:], z.imag)
    torch.testing.assert_close(CF.concat_real_imag(z, dim=1)[:, 3:], z.imag)


def test_readout_gradchecks():
    z = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
    for fn in (CF.magnitude, CF.real_part, CF.concat_real_imag):
        assert torch.autograd.gradcheck(fn, (z,))
