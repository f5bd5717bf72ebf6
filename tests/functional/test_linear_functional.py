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
