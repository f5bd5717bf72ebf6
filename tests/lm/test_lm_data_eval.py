"""Text streams (reading, errors, the contiguous split, the vocabulary), the evaluation windows,
and bits per character / perplexity against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cplxnet.data import DataError
from cplxnet.models import build_model, make_config
from cplxnet.tasks.lm import (
    NA,
    TokenVocab,
    evaluate_lengths,
    prepare_lm_data,
    read_corpus,
    score_stream,
    tokenize,
    windows,
)
from cplxnet.tasks.lm.data import min_tokens

# -- windows --------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 400), st.integers(1, 70))
def test_windows_predict_every_token_but_the_first_exactly_once(n, length):
    cuts = windows(n, length)
    targets = [t for s, e in cuts for t in range(s + 1, e + 1)]
    assert targets == list(range(1, n))  # each once, in order
    assert all(e - s == length for s, e in cuts[:-1])
    assert 1 <= cuts[-1][1] - cuts[-1][0] <= length
    assert all(e1 == s2 for (_, e1), (s2, _) in zip(cuts, cuts[1:]))  # no overlap, no gap


def test_windows_examples():
    assert windows(10, 4) == [(0, 4), (4, 8), (8, 9)]  # a shorter last window
    assert windows(9, 4) == [(0, 4), (4, 8)]
    assert windows(2, 5) == [(0, 1)]


# -- scoring against hand computations ----------------------------------------------------------


class Bigram(nn.Module):
    """Logits at position t depend on token t only (a fixed table)."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table)

    def forward(self, ids):
        return self.table[ids]


class PositionInWindow(nn.Module):
    """Logits at position p of a window are row p of a table: the score depends on the cuts."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table)

    def forward(self, ids):
        return self.table[: ids.shape[1]].expand(ids.shape[0], -1, -1)


def test_bpc_of_a_bigram_model_is_the_hand_computed_one():
    torch.manual_seed(0)
    V = 5
    table = torch.randn(V, V, dtype=torch.float64)
    stream = torch.randint(0, V, (103,))
    nll = 0.0
    for t in range(1, len(stream)):
        p = math.exp(table[stream[t - 1], stream[t]]) / sum(
            math.exp(table[stream[t - 1], w]) for w in range(V)
        )
        nll -= math.log(p)
    mean = nll / (len(stream) - 1)
    for length in (1, 7, 10, 102, 500):
        out = score_stream(Bigram(table), stream, length, tokens="char")
        assert out["tokens"] == 102
        assert out["windows"] == math.ceil(102 / length)
        assert out["loss"] == pytest.approx(mean, rel=1e-12)
        assert out["bpc"] == pytest.approx(mean / math.log(2), rel=1e-12)
    word = score_stream(Bigram(table), stream, 7, tokens="word")
    assert word["perplexity"] == pytest.approx(math.exp(mean), rel=1e-12)


def test_each_token_is_scored_with_its_own_window_context():
    torch.manual_seed(1)
    V, length = 4, 5
    table = torch.randn(16, V, dtype=torch.float64)
    stream = torch.randint(0, V, (13,))  # 12 targets: windows of 5, 5 and a last one of 2
    nll = 0.0
    for t in range(1, 13):
        p = torch.log_softmax(table[(t - 1) % length], -1)[stream[t]]
        nll -= float(p)
    out = score_stream(PositionInWindow(table), stream, length, batch_tokens=5)
    assert out["loss"] == pytest.approx(nll / 12, rel=1e-12)


def test_batched_scoring_equals_scoring_each_window_alone():
    torch.manual_seed(2)
    config = make_config(
        "decoder", vocab_size=9, d_model=4, num_heads=2, dim_feedforward=8, encoding="rotary"
    )
    model = build_model(config, dtype=torch.float64).eval()
    stream = torch.randint(1, 9, (60,))
    total, count = 0.0, 0
    for s, e in windows(60, 8):
        with torch.no_grad():
            logits = model(stream[s:e][None])[0]
        total += float(nn.functional.cross_entropy(logits, stream[s + 1 : e + 1], reduction="sum"))
        count += e - s
    out = score_stream(model, stream, 8, batch_tokens=24)
    assert out["loss"] == pytest.approx(total / count, rel=1e-10)


def test_evaluate_lengths_reports_na_for_a_trainable_table_beyond_max_len():
    config = make_config(
        "decoder",
        vocab_size=9,
        d_model=4,
        num_heads=2,
        dim_feedforward=8,
        encoding="trainable",
        max_len=8,
    )
    model = build_model(config)
    stream = torch.randint(1, 9, (100,))
    out = evaluate_lengths(model, stream, [8, 16, 32])
    assert out["8"]["bpc"] > 0 and NA not in out["8"]
    for key in ("16", "32"):
        assert out[key]["bpc"] is None and "max_len=8" in out[key][NA]


# -- reading and splitting ------------------------------------------------------------------------


def test_bundled_corpora_are_their_sentences_joined():
    text = read_corpus("trec")
    assert text.startswith("How did serfdom develop in and then leave Russia ?\n")
    assert text.count("\n") == 5951  # 5,952 questions


def test_split_is_contiguous_90_5_5_with_a_training_vocabulary(tmp_path):
    path = tmp_path / "t.txt"
    text = "abcab" * 400 + "xyz" * 50  # 'x', 'y', 'z' occur only at the end (test)
    path.write_text(text, encoding="utf-8")
    data = prepare_lm_data(str(path), "char", context=8)
    n = len(text)
    assert data.sizes() == {
        "train": int(0.9 * n),
        "dev": int(0.05 * n),
        "test": n - int(0.9 * n) - int(0.05 * n),
    }
    whole = torch.cat([data.train, data.dev, data.test])
    assert data.vocab.decode(whole[: data.sizes()["train"]]) == list(text[: int(0.9 * n)])
    assert set(data.vocab.itos) == {"<pad>", "<unk>", "a", "b", "c"}
    assert data.unknown_test == int((data.test == 1).sum()) == len(data.test) == 108
    assert data.summary().endswith(
        "vocabulary 5; 108 test characters (100.0%) are not in the training vocabulary and are "
        "scored as <unk>"
    ), data.summary()
    path.write_text("the cat sat on the mat\n" * 100, encoding="utf-8")
    words = prepare_lm_data(str(path), "word", context=4)
    assert words.sizes() == {"train": 540, "dev": 30, "test": 30}
    assert words.vocab.decode(words.test[:4]) == ["the", "cat", "sat", "on"]
    assert words.unknown_test == 0 and words.summary().endswith("contiguous 90/5/5), vocabulary 7")
    # a word corpus with its own <unk> (PTB, WikiText-2): the token, not a stranger
    path.write_text("the <unk> sat on the mat\n" * 99 + "a <unk> zebra\n", encoding="utf-8")
    ptb = prepare_lm_data(str(path), "word", context=4)
    assert ptb.vocab.itos.count("<unk>") == 1 and int((ptb.train == 1).sum()) == 90
    assert ptb.unknown_test == 2 and "2 test words (6.5%) are not in the training" in ptb.summary()


def test_vocab_round_trip(tmp_path):
    vocab = TokenVocab.build(tokenize("hello world", "char"))
    assert vocab.itos[:2] == ["<pad>", "<unk>"] and vocab.itos[2] == "l"  # most frequent
    vocab.save(str(tmp_path / "v.json"))
    assert TokenVocab.load(str(tmp_path / "v.json")) == vocab
    assert vocab.encode(["h", "?"]).tolist() == [vocab.stoi["h"], 1]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"abc\x00def" * 100, "binary"),
        (b"caf\xe9 " * 100, "not valid UTF-8"),
        (b"", "empty"),
        (b"  \n\n\t ", "empty"),
    ],
)
def test_bad_files_are_clear_errors(tmp_path, content, match):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=match):
        prepare_lm_data(str(path), "char", 4)


def test_short_text_and_long_context_are_clear_errors(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("x" * 300, encoding="utf-8")
    with pytest.raises(DataError, match="larger than the data"):
        prepare_lm_data(str(path), "char", context=300)
    with pytest.raises(DataError, match="too short for --context 64.*at least 1,300"):
        prepare_lm_data(str(path), "char", context=64)
    for context in (13, 14, 64, 100):  # the bound is the real minimum: one token less fails
        need = min_tokens(context)
        path.write_text("x" * need, encoding="utf-8")
        data = prepare_lm_data(str(path), "char", context=context)
        assert min(len(data.dev), len(data.test)) >= context + 1 < len(data.train)
        path.write_text("x" * (need - 1), encoding="utf-8")
        with pytest.raises(DataError, match=f"at least {need:,}"):
            prepare_lm_data(str(path), "char", context=context)
    path.write_text("x" * 300, encoding="utf-8")
    assert len(prepare_lm_data(str(path), "char", context=13).dev) == 15  # 15 >= 13 + 1 + ...
    with pytest.raises(DataError, match="no such file"):
        read_corpus(str(tmp_path / "missing.txt"))
    with pytest.raises(DataError, match="folder"):
        read_corpus(str(tmp_path))
