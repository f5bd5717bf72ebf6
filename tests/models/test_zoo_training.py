"""A few optimisation steps on a toy separable task reduce the loss, for every family, complex
and real, with SparseAdam on the sparse tables and Adam on the rest (as the trainer does)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from zoo_helpers import VOCAB, tiny_config

from cplxnet.models import FAMILIES, build_model, sparse_parameters


def toy_task(n: int = 48, length: int = 7, seed: int = 0):
    """Class c in {0, 1, 2}: one signal token (id 1 + c) at a random position among noise tokens
    (ids 4..VOCAB-1); random lengths 2..length, padding (id 0) at the end."""
    g = torch.Generator().manual_seed(seed)
    L = length
    labels = torch.randint(0, 3, (n,), generator=g)
    lengths = torch.randint(2, L + 1, (n,), generator=g)
    ids = torch.randint(4, VOCAB, (n, L), generator=g)
    where = (torch.rand(n, generator=g) * lengths).long()
    ids[torch.arange(n), where] = 1 + labels
    mask = torch.arange(L)[None] >= lengths[:, None]
    return ids.masked_fill(mask, 0), mask, labels


@pytest.mark.parametrize("encoding", ["none", "complex-order"])
@pytest.mark.parametrize("complex", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_few_steps_reduce_the_loss(family, complex, encoding):
    model = build_model(tiny_config(family, complex, d_model=8, encoding=encoding))
    ids, mask, labels = toy_task()
    sparse = sparse_parameters(model)
    sparse_ids = {id(p) for p in sparse}
    dense = [p for p in model.parameters() if id(p) not in sparse_ids]
    opts = [torch.optim.Adam(dense, lr=0.02)]
    if sparse:
        opts.append(torch.optim.SparseAdam(sparse, lr=0.02))

    def loss_now() -> float:
        model.eval()
        with torch.no_grad():
            return F.cross_entropy(model(ids, mask), labels).item()

    before = loss_now()
    for _ in range(6):  # at most 60 steps; stop once the loss has halved
        model.train()
        for _ in range(10):
            for o in opts:
                o.zero_grad()
            F.cross_entropy(model(ids, mask), labels).backward()
            for o in opts:
                o.step()
        after = loss_now()
        if after < 0.5 * before:
            break
    assert after < 0.5 * before, (before, after)
