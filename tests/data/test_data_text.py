"""Tokenizer, vocabulary (training split only) and label map."""

from __future__ import annotations

import pytest

from cplxnet.data import (
    PAD_ID,
    UNK_ID,
    DataError,
    DataSpec,
    Example,
    LabelMap,
    Tokenizer,
    Vocab,
    prepare_data,
)


def test_tokenizer_default_keeps_contractions_and_splits_punctuation():
    tok = Tokenizer()
    assert tok("The Rock's ''Conan'', isn't it? well-made!") == [
        "the",
        "rock's",
        "''",
        "conan",
        "''",
        ",",
        "isn't",
        "it",
        "?",
        "well-made",
        "!",
    ]
    assert Tokenizer(lowercase=False)("Hello World") == ["Hello", "World"]


def test_tokenizer_kim_cleaning():
    tok = Tokenizer(clean=True)
    assert tok("He's here, isn't he? (Yes) -- caf\u00e9 we'll") == [
        "he",
        "'s",
        "here",
        ",",
        "is",
        "n't",
        "he",
        "?",
        "(",
        "yes",
        ")",
        "caf",
        "we",
        "'ll",
    ]
    assert Tokenizer.from_dict(tok.to_dict()) == tok


def test_vocab_order_specials_min_freq_max_size(tmp_path):
    lists = [["b", "a", "c"], ["a", "b"], ["a", "d"]]
    v = Vocab.build(lists)
    assert v.itos == ["<pad>", "<unk>", "a", "b", "c", "d"]  # frequency, then alphabetical
    assert v.encode(["a", "zzz"]) == [2, UNK_ID] and v.stoi["<pad>"] == PAD_ID
    assert Vocab.build(lists, min_freq=2).itos == ["<pad>", "<unk>", "a", "b"]
    assert Vocab.build(lists, max_size=3).itos == ["<pad>", "<unk>", "a"]
    v.save(str(tmp_path / "v.json"))
    w = Vocab.load(str(tmp_path / "v.json"))
    assert w.itos == v.itos and len(w) == 6 and "c" in w


def test_vocab_and_labels_come_from_the_training_split_only():
    data = prepare_data(DataSpec("trec"))
    train_tokens = {t for ex in data.splits.train for t in data.tokenizer(ex.text)}
    assert set(data.vocab.itos[2:]) == train_tokens
    test_only = {t for ex in data.splits.test for t in data.tokenizer(ex.text)} - train_tokens
    assert test_only and not any(t in data.vocab for t in test_only)
    assert data.labels.labels == ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]


def test_label_map_unseen_label_names_it_and_the_line(tmp_path):
    labels = LabelMap.build([Example("x", "pos"), Example("y", "neg")])
    assert labels.labels == ["neg", "pos"] and labels.encode(Example("z", "pos")) == 1
    with pytest.raises(DataError, match=r"eval\.tsv line 7: label 'meh' never occurs.*neg, pos"):
        labels.encode(Example("z", "meh", "eval.tsv", 7))
    labels.save(str(tmp_path / "l.json"))
    assert LabelMap.load(str(tmp_path / "l.json")).labels == ["neg", "pos"]
    with pytest.raises(DataError, match="at least two"):
        LabelMap.build([Example("x", "pos")])
