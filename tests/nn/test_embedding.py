"""Embedding: padding row, sparse gradients with SparseAdam, init variance, errors."""

import pytest
import torch

import cplxnet.functional as CF
from cplxnet import nn as cnn


def test_padding_row_is_zero_and_gets_no_gradient():
    emb = cnn.Embedding(10, 4, padding_idx=0, dtype=torch.complex128)
    assert torch.all(emb.weight[0] == 0)
    ids = torch.tensor([[0, 3, 0], [5, 0, 3]])
    out = emb(ids)
    torch.testing.assert_close(out, emb.weight.detach()[ids])
    torch.view_as_real(out).sum().backward()
    g = emb.packed_weight.grad
    assert torch.all(g[0] == 0)
    assert torch.all(g[3] == 2) and torch.all(g[5] == 1)


def test_weight_is_a_view_of_the_packed_parameter():
    emb = cnn.Embedding(5, 3, dtype=torch.complex64)
    assert emb.weight.shape == (5, 3) and emb.weight.dtype == torch.complex64
    with torch.no_grad():
        emb.weight[2] = 1 + 2j
    assert emb.packed_weight[2].tolist() == [1.0, 2.0] * 3
    assert [n for n, _ in emb.named_parameters()] == ["packed_weight"]


def test_sparse_gradient_and_sparse_adam_touch_only_looked_up_rows():
    emb = cnn.Embedding(20, 4, sparse=True, dtype=torch.complex64)
    before = emb.weight.detach().clone()
    opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
    ids = torch.tensor([[1, 7, 7]])
    torch.view_as_real(emb(ids)).square().sum().backward()
    assert emb.packed_weight.grad.is_sparse
    opt.step()
    changed = (emb.weight.detach() != before).any(-1)
    assert changed.nonzero().flatten().tolist() == [1, 7]


def test_dense_training_step_with_adam():
    emb = cnn.Embedding(6, 3)
    opt = torch.optim.Adam(emb.parameters(), lr=0.1)
    torch.view_as_real(emb(torch.tensor([2]))).sum().backward()
    opt.step()
    assert emb.packed_weight.grad.layout == torch.strided


def test_init_unit_complex_variance():
    emb = cnn.Embedding(1000, 256, dtype=torch.complex128)
    w = emb.weight.detach()
    assert abs((w.abs() ** 2).mean().item() - 1.0) < 0.02
    assert abs(w.real.var().item() - 0.5) < 0.01 and abs(w.imag.var().item() - 0.5) < 0.01


def test_max_norm_renormalises_complex_rows():
    emb = cnn.Embedding(4, 8, max_norm=1.0, dtype=torch.complex128)
    emb(torch.tensor([0, 1]))
    norms = emb.weight.detach().abs().square().sum(-1).sqrt()
    assert torch.all(norms[:2] <= 1.0 + 1e-6)


def test_from_pretrained():
    table = torch.randn(4, 3, dtype=torch.complex128)
    emb = cnn.Embedding.from_pretrained(table, padding_idx=1)
    torch.testing.assert_close(emb(torch.tensor([2])), table[2:3])
    assert not emb.packed_weight.requires_grad


def test_errors():
    emb = cnn.Embedding(5, 2)
    with pytest.raises(IndexError, match="Embedding: index 5 in input is out of range .* 0..4"):
        emb(torch.tensor([0, 5]))
    with pytest.raises(IndexError, match="index -1 in input is out of range"):
        emb(torch.tensor([-1]))
    with pytest.raises(TypeError, match="Embedding: input must be an integer tensor"):
        emb(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"padding_idx=7 must be within \[-5, 5\)"):
        cnn.Embedding(5, 2, padding_idx=7)
    with pytest.raises(TypeError, match="Embedding: dtype must be complex"):
        cnn.Embedding(5, 2, dtype=torch.int32)  # a real float dtype is torch's (real_dtype_dropin)


def test_assigning_weight_names_packed_weight_and_tying_through_it_trains_one_table():
    emb, head = cnn.Embedding(10, 4), cnn.Linear(4, 10, bias=False)
    for value in (head.weight, torch.nn.Parameter(torch.zeros(10, 4, dtype=torch.cfloat))):
        with pytest.raises(AttributeError, match="tie, prune or parametrize packed_weight"):
            emb.weight = value
    ids = torch.tensor([[1, 2, 3]])
    logits = CF.linear(emb(ids), emb.weight.conj())  # a head tied by reading
    logits.real.sum().backward()
    assert [n for n, _ in emb.named_parameters()] == ["packed_weight"]
    assert emb.packed_weight.grad.abs().sum() > 0 and emb.packed_weight.grad[0].abs().sum() > 0


def test_torch_complex_embedding_state_dict_loads_into_the_packed_table():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Embedding(6, 3, dtype=torch.complex128))
    state = theirs.state_dict()
    ours = torch.nn.Sequential(cnn.Embedding(6, 3, dtype=torch.complex128))
    assert not ours.load_state_dict(state).missing_keys
    assert torch.equal(ours[0].weight, theirs[0].weight)
    assert list(state) == ["0.weight"]  # the caller's dict is left as it was
    ids = torch.tensor([[0, 5, 2]])
    with torch.no_grad():  # torch's complex lookup has no backward
        assert torch.equal(ours(ids), theirs(ids))
    with pytest.raises(RuntimeError, match="packed_weight"):  # a real weight is no such table
        ours.load_state_dict({"0.weight": torch.randn(6, 3, dtype=torch.float64)})


def test_assigning_a_plain_tensor_to_weight_names_packed_weight_too():
    emb = cnn.Embedding(10, 4)
    for value in (torch.zeros(10, 4, dtype=torch.cfloat), emb.weight.detach().clone(), None):
        with pytest.raises(AttributeError, match="tie, prune or parametrize packed_weight"):
            emb.weight = value
    assert [n for n, _ in emb.named_parameters()] == ["packed_weight"]
