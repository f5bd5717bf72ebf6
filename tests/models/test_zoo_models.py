"""Every family, complex and real: shapes, dtypes, padding invariance, short texts, errors,
parameter counts, sparse tables."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from zoo_helpers import CLASSES, VOCAB, batch, tiny_config

from cplxnet.models import (
    FAMILIES,
    build_model,
    count_parameters,
    real_twin,
    sparse_parameters,
)

CASES = [(f, c) for f in FAMILIES for c in (True, False)]
IDS = [f"{f}-{'complex' if c else 'real'}" for f, c in CASES]


@pytest.mark.parametrize(("family", "complex"), CASES, ids=IDS)
def test_forward_shapes_and_dtypes(family, complex):
    model = build_model(tiny_config(family, complex))
    ids, mask = batch([5, 3, 1])
    logits = model(ids, mask)
    assert logits.shape == (3, CLASSES)
    assert logits.dtype == torch.float32 and not logits.is_complex()
    assert torch.isfinite(logits).all()
    counts = count_parameters(model)
    assert model.embedding.word.weight.is_complex() == complex
    assert (counts.complex > 0) == complex
    if not complex:
        assert not any(p.is_complex() for p in model.parameters())
    assert model.head.weight.dtype == torch.float32  # the head is real in both
    # no padding mask means no padding
    assert model(ids[:1, :5]).shape == (1, CLASSES)


@pytest.mark.parametrize(("family", "complex"), CASES, ids=IDS)
def test_double_precision(family, complex):
    model = build_model(tiny_config(family, complex), dtype=torch.float64)
    ids, mask = batch([4, 2])
    assert model(ids, mask).dtype == torch.float64
    want = torch.complex128 if complex else torch.float64
    assert model.embedding.word.weight.dtype == want


@pytest.mark.parametrize(("family", "complex"), CASES, ids=IDS)
def test_padding_invariance(family, complex):
    """Tokens at padded positions and extra trailing padding change no logit (eval mode)."""
    torch.manual_seed(1)
    model = build_model(tiny_config(family, complex), dtype=torch.float64).eval()
    ids, mask = batch([6, 4, 1, 2])
    ref = model(ids, mask)
    noisy = torch.where(mask, torch.randint(1, VOCAB, ids.shape), ids)
    torch.testing.assert_close(model(noisy, mask), ref)
    longer_ids = torch.cat([noisy, torch.randint(1, VOCAB, (4, 5))], dim=1)
    longer_mask = torch.cat([mask, torch.ones(4, 5, dtype=torch.bool)], dim=1)
    torch.testing.assert_close(model(longer_ids, longer_mask), ref)
    # each sequence alone, without padding, gives its row of the batch
    for b, n in enumerate([6, 4, 1, 2]):
        torch.testing.assert_close(model(ids[b : b + 1, :n]), ref[b : b + 1])


@pytest.mark.parametrize("complex", [True, False])
def test_cnn_short_texts(complex):
    """Texts shorter than the widest filter work (zero vectors up to the widest filter)."""
    model = build_model(tiny_config("cnn", complex, kernel_sizes=(2, 3, 5))).eval()
    ids, mask = batch([1, 2])
    assert model(ids, mask).shape == (2, CLASSES)
    one = model(ids[:1, :1])
    torch.testing.assert_close(model(ids, mask)[:1], one)
    # a one-token text equals that token followed by explicit zero-id padding
    padded = torch.cat([ids[:1, :1], torch.zeros(1, 6, dtype=torch.long)], dim=1)
    pmask = torch.arange(7)[None] >= 1
    torch.testing.assert_close(model(padded, pmask), one)


@pytest.mark.parametrize("pooling", ["final", "mean", "max"])
@pytest.mark.parametrize("complex", [True, False])
def test_lstm_poolings(pooling, complex):
    model = build_model(
        tiny_config("lstm", complex, pooling=pooling, bidirectional=False, num_layers=2)
    ).eval()
    ids, mask = batch([5, 2, 3])
    out = model(ids, mask)
    assert out.shape == (3, CLASSES)
    torch.testing.assert_close(model(ids[1:2, :2]), out[1:2])


@pytest.mark.parametrize("readout", ["magnitude", "concat", "real"])
def test_readouts(readout):
    model = build_model(tiny_config("fasttext", True, readout=readout))
    width = 2 * 6 if readout == "concat" else 6
    assert model.head.in_features == width
    ids, mask = batch([3, 2])
    assert model(ids, mask).shape == (2, CLASSES)


def test_input_errors_are_clear():
    model = build_model(tiny_config("fasttext"))
    ids, mask = batch([3, 2])
    with pytest.raises(TypeError, match="FastText: ids must be an int64"):
        model(ids.float(), mask)
    with pytest.raises(ValueError, match=r"FastText: ids must have shape \(B, L\)"):
        model(ids[0], mask)
    with pytest.raises(TypeError, match="padding_mask must be a torch.bool"):
        model(ids, mask.long())
    with pytest.raises(ValueError, match="padding_mask must have the shape of ids"):
        model(ids, mask[:, :2])
    with pytest.raises(ValueError, match="exceeds max_len"):
        model(torch.ones(1, 40, dtype=torch.long))
    with pytest.raises(ValueError, match=r"FastText: ids have no positions \(shape \(2, 0\)\)"):
        model(ids[:, :0])


@pytest.mark.parametrize(("family", "complex"), CASES, ids=IDS)
def test_bad_ids_and_misplaced_padding_are_clear_errors(family, complex):
    """Out-of-range ids (the real twin's torch.nn.Embedding would raise torch's 'index out of
    range in self') and padding that is not at the end (silently wrong lengths) are errors."""
    model = build_model(tiny_config(family, complex))
    name = type(model).__name__
    ids, mask = batch([3, 2])
    for bad in (VOCAB, -1):
        with pytest.raises(IndexError, match=f"{name}: index {bad} in ids is out of range"):
            model(ids.masked_fill(mask, bad), mask)
    front = mask.flip(1)  # padding at the start of the second text
    with pytest.raises(ValueError, match=f"{name}: padding_mask must mark padding .* at the end"):
        model(ids, front)


@pytest.mark.parametrize("family", FAMILIES)
def test_parameter_counts(family):
    model = build_model(tiny_config(family, True))
    counts = count_parameters(model)
    word = model.embedding.word
    n_complex = sum(p.numel() for p in model.parameters() if p.is_complex())
    n_complex += word.weight.numel()  # the complex word table is stored packed as reals
    n_real = sum(p.numel() for p in model.parameters() if not p.is_complex())
    n_real -= 2 * word.weight.numel()
    assert counts == (n_complex, n_real, 2 * n_complex + n_real)
    assert counts.complex == n_complex and counts.total_real == 2 * n_complex + n_real
    real = build_model(tiny_config(family, False))
    rc = count_parameters(real)
    assert rc.complex == 0 and rc.real == rc.total_real == sum(p.numel() for p in real.parameters())
    # the equal-FLOP twin has the same embedding parameters in reals as the complex model
    twin = build_model(real_twin(tiny_config(family, True)))
    assert twin.embedding.word.weight.numel() == 2 * model.embedding.word.weight.numel()


@pytest.mark.parametrize(("family", "complex"), CASES, ids=IDS)
def test_sparse_parameters(family, complex):
    model = build_model(tiny_config(family, complex, sparse_embeddings=True))
    sparse = sparse_parameters(model)
    word_params = list(model.embedding.word.parameters())
    assert len(word_params) == 1 and any(p is word_params[0] for p in sparse)
    ids, mask = batch([4, 3])
    model(ids, mask).sum().backward()
    for p in sparse:
        assert p.grad is None or p.grad.is_sparse
    dense_ids = {id(p) for p in model.parameters()} - {id(p) for p in sparse}
    assert all(
        not p.grad.is_sparse
        for p in model.parameters()
        if id(p) in dense_ids and p.grad is not None
    )
    off = build_model(tiny_config(family, complex, sparse_embeddings=False))
    assert sparse_parameters(off) == []


def test_build_model_accepts_dicts_and_rejects_others():
    c = tiny_config("cnn")
    assert isinstance(build_model(c.to_dict()), type(build_model(c)))
    with pytest.raises(TypeError, match="expected a ModelConfig"):
        build_model("cnn")


@pytest.mark.parametrize("complex", [True, False], ids=["complex", "real"])
def test_sparse_parameters_of_a_token_encoding(complex):
    """complex-order gets the model's padding_idx and sparse flag; its per-word tables (and
    only they: not a shared amplitude) are the sparse parameters."""
    config = tiny_config(
        "cnn",
        complex,
        encoding="complex-order",
        sparse_embeddings=True,
        encoding_options={"amplitude": "shared"},
    )
    model = build_model(config)
    enc = model.encoding
    assert enc.padding_idx == 0 and enc.sparse
    assert model.embedding.word is None  # the encoding replaces the word table
    sparse = sparse_parameters(model)
    assert {id(p) for p in sparse} == {id(p) for p in enc.sparse_parameters()}
    assert all(p is not enc.amplitude_weight for p in sparse)
    ids, mask = batch([4, 2])
    model(ids, mask).sum().backward()
    assert all(p.grad.is_sparse for p in sparse)
    assert not enc.amplitude_weight.grad.is_sparse
    dense = build_model(
        tiny_config("cnn", complex, encoding="complex-order", sparse_embeddings=False)
    )
    assert sparse_parameters(dense) == [] and not dense.encoding.sparse


@pytest.mark.parametrize(
    "activation", ["crelu", "modrelu", "zrelu", "cardioid", "split_tanh", "split_gelu"]
)
@pytest.mark.parametrize("complex", [True, False], ids=["complex", "real"])
def test_cnn_activations(activation, complex):
    model = build_model(tiny_config("cnn", complex, activation=activation))
    ids, mask = batch([4, 2])
    out = model(ids, mask)
    assert out.shape == (2, CLASSES) and torch.isfinite(out).all()
    out.sum().backward()


def test_real_cnn_with_crelu_is_kims_max_over_time():
    """The real twin's max-by-magnitude after ReLU is the plain max of Kim's CNN."""
    model = build_model(tiny_config("cnn", False, kernel_sizes=(2,))).eval()
    ids, mask = batch([5, 3])
    x = model.embedding(ids, mask, model.encoding)  # (B, L, D), zero at padding
    h = torch.relu(model.convs[0](x.transpose(1, 2)))  # (B, F, L - 1)
    want = torch.stack([h[0, :, :4].amax(-1), h[1, :, :2].amax(-1)])
    torch.testing.assert_close(model.features(x, mask), want)


def test_complex_cnn_pools_the_entry_of_largest_modulus():
    model = build_model(tiny_config("cnn", True, kernel_sizes=(3,))).eval()
    ids, mask = batch([6, 2])  # the second text is shorter than the filter: one zero-padded window
    x = model.embedding(ids, mask, model.encoding)
    h = model.activation(model.convs[0](x.transpose(1, 2)))  # (B, F, 4) complex
    want = []
    for b, windows in enumerate([4, 1]):
        hb = h[b, :, :windows]  # (F, windows)
        want.append(hb.gather(1, hb.abs().argmax(1, keepdim=True)).squeeze(1))
    torch.testing.assert_close(model.features(x, mask), torch.stack(want))


def test_real_and_complex_lstm_classifiers_name_their_rnn_parameters_alike():
    """The real twin's LSTM is torch's (a subclass, no wrapper level): its state_dict keys are
    those of the complex model's cplxnet.nn.LSTM (``rnn.weight_ih_l0``, ...)."""
    cfg = tiny_config("lstm", True, num_layers=2)
    keys = {}
    for complex in (True, False):
        model = build_model(real_twin(cfg, match="width") if not complex else cfg)
        keys[complex] = sorted(k for k in model.state_dict() if k.startswith("rnn."))
    assert keys[True] == keys[False]
    assert "rnn.weight_ih_l0" in keys[False] and "rnn.bias_hh_l1_reverse" in keys[False]


def test_real_lstm_classifier_loads_the_former_wrapper_layout():
    """State dicts with the keys of a wrapper around torch's LSTM (``rnn.lstm.*``) load."""
    model = build_model(tiny_config("lstm", False))
    old = {k.replace("rnn.", "rnn.lstm.", 1): v.clone() + 1 for k, v in model.state_dict().items()}
    model.load_state_dict(old)
    torch.testing.assert_close(model.rnn.weight_ih_l0, old["rnn.lstm.weight_ih_l0"])


@pytest.mark.parametrize(("family", "complex"), CASES, ids=IDS)
def test_empty_batch_gives_empty_logits(family, complex):
    """B = 0 (e.g. the last shard of a split) gives (0, C) logits, in training and eval mode,
    and a loss over them back-propagates."""
    model = build_model(tiny_config(family, complex))
    ids, mask = torch.zeros(0, 4, dtype=torch.long), torch.zeros(0, 4, dtype=torch.bool)
    for train in (True, False):
        model.train(train)
        logits = model(ids, mask)
        assert logits.shape == (0, CLASSES) and logits.dtype == torch.float32
    model(ids).sum().backward()


def test_real_lstm_runs_an_empty_batch():
    from cplxnet.models.common import RealLSTM

    rnn = RealLSTM(4, 3, bidirectional=True)
    out, (h, c) = rnn(torch.zeros(0, 5, 4), lengths=torch.zeros(0, dtype=torch.long))
    assert out.shape == (0, 5, 6) and h.shape == c.shape == (2, 0, 3)


def test_transformer_real_projection_option():
    """TransformerConfig.projection="real": every projection weight of the complex model is real
    (half the reals of a complex weight), the model trains end to end; the real twin has real
    weights anyway, so the option changes nothing there."""
    cfg = tiny_config("transformer", True, projection="real")
    model = build_model(cfg)
    full = build_model(tiny_config("transformer", True))
    real = [n for n, p in model.named_parameters() if not p.is_complex()]
    assert "encoder.layers.0.self_attn.in_proj_weight" in real
    assert "encoder.layers.1.linear2.weight" in real
    D, Fw, layers = 8, 12, 2
    dense = layers * (4 * D * D + 2 * D * Fw)  # projection weights (complex entries in `full`)
    assert count_parameters(full).total_real - count_parameters(model).total_real == dense
    ids, mask = batch([5, 3])
    model(ids, mask).sum().backward()
    assert model.encoder.layers[0].linear1.weight.grad.dtype == torch.float32
    twin = real_twin(cfg)
    shapes = {k: v.shape for k, v in build_model(twin).state_dict().items()}
    ref = build_model(dataclasses.replace(twin, projection="complex")).state_dict()
    assert shapes == {k: v.shape for k, v in ref.items()}
