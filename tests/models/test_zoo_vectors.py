"""load_word_vectors: rows copied (real) or used as amplitudes (complex), padding row and
rows not found untouched, clear errors."""

from __future__ import annotations

import pytest
import torch
from zoo_helpers import VOCAB, tiny_config

from cplxnet.models import build_model


def _vectors(d: int):
    vectors = torch.randn(VOCAB, d)
    found = torch.rand(VOCAB) < 0.6
    found[1] = True
    found[2] = False
    return vectors, found


def test_real_model_copies_rows():
    model = build_model(tiny_config("cnn", False))
    before = model.embedding.word.weight.detach().clone()
    vectors, found = _vectors(6)
    n = model.load_word_vectors(vectors, found)
    w = model.embedding.word.weight
    expect = found.clone()
    expect[0] = False
    assert n == int(expect.sum())
    torch.testing.assert_close(w[expect], vectors[expect])
    torch.testing.assert_close(w[~expect], before[~expect])
    assert (w[0] == 0).all()  # padding row stays zero


def test_complex_model_takes_amplitudes_and_keeps_phases():
    model = build_model(tiny_config("fasttext", True))
    before = model.embedding.word.weight.detach().clone()
    vectors, found = _vectors(6)
    model.load_word_vectors(vectors, found)
    w = model.embedding.word.weight.detach()
    rows = found.clone()
    rows[0] = False
    torch.testing.assert_close(w[rows].abs(), vectors[rows].abs())
    # the phase of each entry is its initial phase (up to pi where the vector is negative)
    ratio = w[rows] / before[rows]
    torch.testing.assert_close(ratio.imag, torch.zeros_like(ratio.imag), atol=1e-5, rtol=0)
    torch.testing.assert_close(w[~rows], before[~rows])


def test_all_rows_when_found_is_none():
    model = build_model(tiny_config("lstm", False))
    vectors = torch.randn(VOCAB, 6)
    assert model.load_word_vectors(vectors) == VOCAB - 1
    torch.testing.assert_close(model.embedding.word.weight[1:], vectors[1:])


def test_dimension_mismatch_is_a_clear_error():
    model = build_model(tiny_config("cnn", True))
    with pytest.raises(ValueError, match=r"word table is \(23, 6\).*d_model=5"):
        model.load_word_vectors(torch.randn(VOCAB, 5), torch.ones(VOCAB, dtype=torch.bool))
    with pytest.raises(ValueError, match="found must be"):
        model.load_word_vectors(torch.randn(VOCAB, 6), torch.ones(VOCAB))
    with pytest.raises(TypeError, match="real"):
        model.load_word_vectors(torch.randn(VOCAB, 6, dtype=torch.cfloat))


def test_loaded_vectors_train_and_forward():
    model = build_model(tiny_config("transformer", True))
    model.load_word_vectors(torch.randn(VOCAB, 8))
    ids = torch.randint(1, VOCAB, (2, 5))
    model(ids).sum().backward()


@pytest.mark.parametrize("complex", [True, False], ids=["complex", "real"])
def test_complex_order_takes_the_vectors_as_amplitudes(complex):
    model = build_model(tiny_config("cnn", complex, encoding="complex-order", d_model=8))
    table = model.encoding.amplitude_weight
    width = 8 if complex else 4  # a real twin of width 8 sees 4 complex features
    assert table.shape == (VOCAB, width)
    freq = model.encoding.frequency_weight.detach().clone()
    vectors, found = _vectors(width)
    model.load_word_vectors(vectors, found)
    rows = found.clone()
    rows[0] = False
    torch.testing.assert_close(table[rows], vectors[rows])
    torch.testing.assert_close(model.encoding.frequency_weight, freq)
    with pytest.raises(ValueError, match=f"d_model={6 * 8 // width}"):
        model.load_word_vectors(torch.randn(VOCAB, 6))


def test_shared_amplitudes_cannot_take_vectors():
    model = build_model(
        tiny_config(
            "fasttext", True, encoding="complex-order", encoding_options={"amplitude": "shared"}
        )
    )
    with pytest.raises(TypeError, match="no per-word amplitude table"):
        model.load_word_vectors(torch.randn(VOCAB, 6))
