"""Complex linear map equals the 2x2 block real matrix [[A, -B], [B, A]]."""

import torch

from cplxnet import functional as CF


def test_linear_equals_block_real_matmul():
    x = torch.randn(4, 3, 5, dtype=torch.complex128)
    w = torch.randn(7, 5, dtype=torch.complex128)
    b = torch.randn(7, dtype=torch.complex128)
    A, B = w.real, w.imag
    block = torch.cat([torch.cat([A, -B], 1), torch.cat([B, A], 1)], 0)  # (14, 10)
    xr = torch.cat([x.real, x.imag], -1)  # (..., 10)
    yr = xr @ block.T + torch.cat([b.real, b.imag])
    torch.testing.assert_close(CF.linear(x, w, b), torch.complex(yr[..., :7], yr[..., 7:]))


def test_gradcheck():
    x = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
    w = torch.randn(2, 4, dtype=torch.complex128, requires_grad=True)
    b = torch.randn(2, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(CF.linear, (x, w, b))


def test_real_weight_equals_complex_weight_with_zero_imaginary_part():
    """A real weight W on complex input is the complex map with weight W + 0i: W x_r + i W x_i
    (the shared projection of Wang et al. 2020, Table 4), for any leading shape and bias."""
    w = torch.randn(7, 5, dtype=torch.float64)
    bc = torch.randn(7, dtype=torch.complex128)
    br = torch.randn(7, dtype=torch.float64)
    for shape in [(5,), (3, 5), (2, 4, 5), (0, 5)]:
        x = torch.randn(*shape, dtype=torch.complex128)
        ref_w = torch.complex(w, torch.zeros_like(w))
        for b in (None, bc, br):
            out = CF.linear(x, w, b)
            ref = CF.linear(x, ref_w, None if b is None else b.to(torch.complex128))
            assert out.dtype == torch.complex128 and out.shape == (*shape[:-1], 7)
            torch.testing.assert_close(out, ref)
    x = torch.randn(3, 5, dtype=torch.complex128)
    torch.testing.assert_close(CF.linear(x, w), torch.complex(x.real @ w.T, x.imag @ w.T))


def test_real_weight_gradcheck():
    x = torch.randn(2, 3, 4, dtype=torch.complex128, requires_grad=True)
    w = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(CF.linear, (x, w, b))
    assert torch.autograd.gradcheck(CF.linear, (x, w))
    (g,) = torch.autograd.grad(torch.view_as_real(CF.linear(x, w, b)).sum(), w)
    assert g.dtype == torch.float64  # the weight stays real
