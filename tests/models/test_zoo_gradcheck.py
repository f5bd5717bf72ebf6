"""Gradients of every parameter of a small complex model of each family, in complex128 (eval
mode), checked against finite differences by torch.autograd.gradcheck."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call
from zoo_helpers import batch, tiny_config

from cplxnet.models import FAMILIES, build_model

SMALL = {
    "fasttext": {"d_model": 3},
    "cnn": {"d_model": 3, "kernel_sizes": (2, 3), "num_filters": 2},
    "lstm": {"d_model": 3, "hidden_size": 2, "bidirectional": True},
    "transformer": {"d_model": 4, "num_heads": 2, "dim_feedforward": 4, "num_layers": 1},
}


def _fast_mode(family: str, readout: str = "magnitude") -> bool:
    """The LSTM, the transformer and the concat readout (seconds to tens of seconds entry by
    entry) are checked by random projections (gradcheck's fast mode: v^T J u against the finite
    difference along u, over every parameter at once); their layers are checked entry by entry
    in the module table, FastText and the CNN here."""
    return family in ("lstm", "transformer") or readout == "concat"


@pytest.mark.parametrize(
    ("family", "readout"), [(f, r) for r in ("magnitude", "concat") for f in FAMILIES]
)
def test_gradcheck_complex128(family, readout):
    torch.manual_seed(3)
    config = tiny_config(
        family, True, vocab_size=9, sparse_embeddings=False, readout=readout, **SMALL[family]
    )
    model = build_model(config, dtype=torch.float64).eval()
    ids, mask = batch([4, 2], vocab=9)
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in model.named_parameters())
    assert model.embedding.word.weight.dtype == torch.complex128

    def f(*ps):
        return functional_call(model, dict(zip(names, ps)), (ids, mask))

    fast = _fast_mode(family, readout)
    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-5, fast_mode=fast)


@pytest.mark.parametrize(
    ("family", "encoding"),
    [
        ("cnn", "complex-order"),
        ("lstm", "sinusoidal"),
        *(("transformer", e) for e in ("rotary", "t5", "xpos", "alibi")),
    ],
)
def test_gradcheck_complex128_with_encodings(family, encoding):
    """The encoding's parameters are checked with the rest (real readout this time)."""
    torch.manual_seed(4)
    config = tiny_config(
        family,
        True,
        vocab_size=9,
        sparse_embeddings=False,
        readout="real",
        encoding=encoding,
        **SMALL[family],
    )
    model = build_model(config, dtype=torch.float64).eval()
    ids, mask = batch([4, 3], vocab=9)
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in model.named_parameters())

    def f(*ps):
        return functional_call(model, dict(zip(names, ps)), (ids, mask))

    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-5, fast_mode=_fast_mode(family))
