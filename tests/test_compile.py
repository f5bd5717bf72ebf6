"""``torch.compile`` runs every model of the zoo (the 4 classifier families and the decoder,
complex and real) with outputs and gradients matching eager.

The tests use ``backend="aot_eager"`` (dynamo graph capture + AOTAutograd, the part where complex
tensors and graph breaks can fail) because inductor's code generation takes 10-60 s per tiny
model on 2 cores, too long for the suite; inductor itself is exercised by
``benchmarks/models.py`` (its compile rows) and by ``cplxnet train --compile``.
Embedding tables use dense gradients, as ``cplxnet train --compile`` does (the sparse backward of
packed complex tables does not compile in torch 2.13).
"""

from __future__ import annotations

import pytest
import torch

import cplxnet.models as models
import cplxnet.nn as cnn

V, B, L = 40, 3, 7
WIDTHS = {
    "fasttext": {},
    "cnn": {"num_filters": 4, "kernel_sizes": (2, 3)},
    "lstm": {"hidden_size": 4},
    "transformer": {"num_heads": 2, "dim_feedforward": 16, "attention_dropout": 0.0},
    "decoder": {"num_layers": 1, "num_heads": 2, "dim_feedforward": 16, "attention_dropout": 0.0},
}
# complex-order replaces the word table (the paper's setting); the word-table path (cplxnet's
# packed complex Embedding) with encoding "none" for one family
CASES = [(f, c, "complex-order") for f in WIDTHS for c in (True, False)]
CASES += [("cnn", True, "none")]


def _model(family: str, complex_: bool, encoding: str) -> torch.nn.Module:
    cfg = models.make_config(
        family,
        vocab_size=V,
        **({} if family == "decoder" else {"num_classes": 3}),
        d_model=8,
        complex=complex_,
        encoding=encoding,
        sparse_embeddings=False,
        dropout=0.0,
        max_len=16,
        **WIDTHS[family],
    )
    torch.manual_seed(0)
    return models.build_model(cfg, dtype=torch.float64)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (B, L), generator=g)
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[0, 5:] = True  # padding at the end of two sequences
    mask[2, 3:] = True
    return ids.masked_fill(mask, 0), mask


@pytest.mark.parametrize(
    ("family", "complex_", "encoding"),
    # seconds per model: the complex FastText in the fast subset, the others slow
    [pytest.param(*c, marks=[pytest.mark.slow] * (c[:2] != ("fasttext", True))) for c in CASES],
)
def test_compiled_model_matches_eager(family, complex_, encoding):
    torch._dynamo.reset()
    model = _model(family, complex_, encoding)
    ids, mask = _batch()
    compiled = torch.compile(model, backend="aot_eager")

    out = compiled(ids, mask)
    out.square().sum().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    ref = model(ids, mask)
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    want = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == want.keys() and want
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-10, msg=name)

    if family == "transformer" and complex_:  # a second length recompiles and still matches
        ids2, mask2 = ids[:, :5], mask[:, :5]
        got2 = compiled(ids2, mask2)
        torch.testing.assert_close(got2, model(ids2, mask2), rtol=1e-10, atol=1e-10)


def test_compile_covers_every_family_both_fields():
    families = {*models.FAMILIES, *models.LM_FAMILIES}
    assert {(f, c) for f, c, _ in CASES} == {(f, c) for f in families for c in (True, False)}


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_split_gate_rnns_compile_in_training_on_data_without_grad(name, with_lengths):
    """On raw data (no input gradient) in training, AOTAutograd cannot trace torch's oneDNN
    RNN kernel; compiled, the split-gate LSTM/GRU run their scan over time instead, with and
    without lengths, in one graph, matching eager in outputs and parameter gradients."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    rnn = getattr(cnn, name)(5, 4, batch_first=True, bidirectional=True)
    x = torch.randn(2, 7, 5, dtype=torch.complex64)
    kwargs = {"lengths": torch.tensor([7, 4])} if with_lengths else {}
    compiled = torch.compile(rnn, backend="aot_eager", fullgraph=True)
    outs = [m(x, **kwargs)[0] for m in (rnn, compiled)]
    torch.testing.assert_close(outs[1], outs[0])
    grads = [torch.autograd.grad(o.abs().sum(), list(rnn.parameters())) for o in outs]
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a)
