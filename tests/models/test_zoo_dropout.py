"""The embedding stage's two dropouts, on which the tuned presets rely: ``word_dropout`` drops whole
tokens (every feature of a position) at rate p in training and scales the survivors by
1 / (1 - p); ``embedding_dropout`` drops single entries (a whole complex number in a complex
model) at rate p with the same scaling; in evaluation neither changes anything."""

from __future__ import annotations

import pytest
import torch
from zoo_helpers import batch, tiny_config

from cplxnet.models import build_model

P = 0.3
LENGTHS = [30] * 300 + [20] * 100  # 11,000 tokens: the binomial std of a drop rate is 0.0044
# (complex, encoding): a real model with a word table, and a complex model whose encoding
# (complex-order) replaces the word table, so both branches of the embedding stage are covered.
CASES = [(False, "none"), (True, "complex-order")]
IDS = ["real-none", "complex-complex-order"]


def _stage(complex, encoding, **dropouts):
    torch.manual_seed(0)
    model = build_model(tiny_config("fasttext", complex, encoding=encoding, **dropouts))
    stage = model.embedding
    ids, mask = batch(LENGTHS, generator=torch.Generator().manual_seed(1))

    def run():
        return stage(ids, mask, model.encoding)

    with torch.no_grad():
        model.eval()
        clean = run()  # (B, L, D): no dropout
        model.train()
        torch.manual_seed(2)
        noisy = run()
    return model, run, clean, noisy, ids, mask


def _features(x):
    """Real view: complex entries as (re, im) pairs, so a dropped entry is a dropped pair."""
    return torch.view_as_real(x) if x.is_complex() else x.unsqueeze(-1)


@pytest.mark.parametrize(("complex", "encoding"), CASES, ids=IDS)
def test_word_dropout_drops_whole_tokens_at_rate_p_in_training_only(complex, encoding):
    model, run, clean, noisy, ids, mask = _stage(complex, encoding, word_dropout=P)
    assert model.embedding.word_dropout == P
    real = ~mask
    assert (_features(clean)[real] != 0).all()  # every real token has a non-zero vector
    dropped = (_features(noisy) == 0).flatten(2).all(-1)  # (B, L): the whole token is zero
    kept = real & ~dropped
    # a token is either all zero or all kept, scaled by 1 / (1 - p)
    assert ((_features(noisy) != 0).flatten(2).all(-1) | dropped).all()
    torch.testing.assert_close(noisy[kept], clean[kept] / (1 - P))
    assert (noisy[mask] == 0).all()
    rate = (dropped & real).sum().item() / real.sum().item()
    assert abs(rate - P) < 0.02, rate
    # the same word is dropped at some positions and kept at others (tokens, not word types)
    word = ids[real].mode().values
    at_word = (ids == word) & real
    assert dropped[at_word].any() and (~dropped[at_word]).any()
    model.eval()
    with torch.no_grad():
        assert torch.equal(run(), clean)


@pytest.mark.parametrize(("complex", "encoding"), CASES, ids=IDS)
def test_embedding_dropout_drops_single_entries_at_rate_p_in_training_only(complex, encoding):
    model, run, clean, noisy, _, mask = _stage(complex, encoding, embedding_dropout=P)
    real = ~mask
    entry_dropped = (_features(noisy) == 0).all(-1)  # (B, L, D): whole entries (complex numbers)
    assert ((_features(noisy) != 0).all(-1) | entry_dropped)[real].all()
    kept = real.unsqueeze(-1) & ~entry_dropped
    torch.testing.assert_close(noisy[kept], clean[kept] / (1 - P))
    rate = entry_dropped[real].float().mean().item()
    assert abs(rate - P) < 0.02, rate
    # entries, not tokens: most tokens keep some entries and lose others
    partial = entry_dropped.any(-1) & ~entry_dropped.all(-1)
    assert partial[real].float().mean() > 0.5
    model.eval()
    with torch.no_grad():
        assert torch.equal(run(), clean)


@pytest.mark.parametrize(("complex", "encoding"), CASES, ids=IDS)
def test_no_dropout_leaves_training_output_unchanged(complex, encoding):
    _, _, clean, noisy, _, _ = _stage(complex, encoding)
    assert torch.equal(noisy, clean)
