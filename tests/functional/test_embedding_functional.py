"""Complex embedding lookup with a working backward."""

import pytest
import torch
from reference_ops import COMPLEX_ORDER_SHAPES, reference_complex_order

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


@pytest.mark.parametrize("amplitude", ["word", "shared", "dimension"])
@pytest.mark.parametrize("frequency", ["word", "shared", "dimension", None])
@pytest.mark.parametrize("phase", [True, False])
def test_complex_order_values_gradients_and_gradcheck(amplitude, frequency, phase):
    """Hand-written backward: gradcheck in float64/complex128 for every broadcast layout, and the
    gradients equal autograd through cos/sin."""
    if frequency is None and not phase:
        pytest.skip("no angle: a plain complex cast, covered by the encoding tests")
    g = torch.Generator().manual_seed(0)

    def leaf(shape):
        return torch.randn(shape, dtype=torch.float64, generator=g).requires_grad_()

    r = leaf(COMPLEX_ORDER_SHAPES[amplitude])
    w = leaf(COMPLEX_ORDER_SHAPES[frequency]) if frequency else None
    theta = leaf(COMPLEX_ORDER_SHAPES["word"]) if phase else None
    pos = torch.arange(5, dtype=torch.float64)[:, None]
    inputs = [t for t in (r, w, theta) if t is not None]

    def f(*args):
        it = iter(args)
        return CF.complex_order(next(it), next(it) if w is not None else None,
                                next(it) if theta is not None else None, pos)  # fmt: skip

    assert torch.autograd.gradcheck(f, inputs)
    out, ref = f(*inputs), reference_complex_order(r, w, theta, pos)
    torch.testing.assert_close(out, ref)
    cot = torch.randn(ref.shape, dtype=torch.complex128, generator=g)
    torch.testing.assert_close(
        torch.autograd.grad(out, inputs, cot), torch.autograd.grad(ref, inputs, cot)
    )


def test_complex_order_double_backward_equals_the_readable_form():
    """Second derivatives (create_graph=True) go through the composed form: gradgradcheck in
    complex128, and equality with autograd through cos/sin."""
    g = torch.Generator().manual_seed(1)
    r, w, theta = (
        torch.randn(s, dtype=torch.float64, generator=g) for s in ((2, 5, 3), (3,), (2, 5, 3))
    )
    inputs = [t.requires_grad_() for t in (r, w, theta)]
    pos = torch.arange(5, dtype=torch.float64)[:, None]
    assert torch.autograd.gradgradcheck(lambda *a: CF.complex_order(*a, pos), inputs)
    cot = torch.randn(2, 5, 3, dtype=torch.complex128, generator=g)
    first = torch.autograd.grad(CF.complex_order(*inputs, pos), inputs, cot, create_graph=True)
    first_ref = torch.autograd.grad(
        reference_complex_order(*inputs, pos), inputs, cot, create_graph=True
    )
    v = [torch.randn(t.shape, dtype=t.dtype, generator=g) for t in first]
    torch.testing.assert_close(
        torch.autograd.grad(first, inputs, v), torch.autograd.grad(first_ref, inputs, v)
    )
