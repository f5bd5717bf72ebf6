"""Complex embedding lookup with a working backward."""

import torch

from cplxnet import functional as CF


def test_lookup_equals_indexing_and_backward_accumulates():
    w = torch.randn(7, 3, dtype=torch.complex128, requires_grad=True)
    ids = torch.tensor([[1, 2, 1], [6, 0, 1]])
    out = CF.embedding(ids, w)
    torch.testing.assert_close(out, w.detach()[ids])
    g = torch.randn(2, 3, 3, dtype=torch.complex128)
    out.backward(g)
    ref = torch.zeros(7, 3, dtype=torch.complex128).index_add_(0, ids.reshape(-1), g.reshape(-1, 3))
    torch.testing.assert_close(w.grad, ref)


def test_padding_idx_row_gets_no_gradient():
    w = torch.randn(5, 2, dtype=torch.complex128, requires_grad=True)
    ids = torch.tensor([0, 3, 0, 4])
    torch.view_as_real(CF.embedding(ids, w, padding_idx=0)).sum().backward()
    assert torch.all(w.grad[0] == 0)
    assert torch.all(w.grad[3] == 1 + 1j)


def test_packed_lookup_gives_sparse_gradient():
    packed = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)  # (V, 2D), D = 4
    out = CF.embedding_packed(torch.tensor([2, 5]), packed, sparse=True)
    assert out.shape == (2, 4) and out.is_complex()
    torch.view_as_real(out).sum().backward()
    assert packed.grad.is_sparse
    dense = packed.grad.to_dense()
    assert torch.all(dense[[2, 5]] == 1) and torch.all(dense[[0, 1, 3, 4]] == 0)


def test_gradcheck():
    w = torch.randn(5, 3, dtype=torch.complex128, requires_grad=True)
    ids = torch.tensor([[0, 4, 4]])
    assert torch.autograd.gradcheck(lambda t: CF.embedding(ids, t), (w,))
