"""Deterministic, stratified splits: TREC keeps its test set, MR folds partition the data."""

from __future__ import annotations

from collections import Counter

import pytest

from cplxnet.data import (
    DataError,
    DataSpec,
    Example,
    load_dataset,
    load_splits,
    split_dataset,
    stratified_folds,
    stratified_holdout,
)


def key(examples):
    return [(ex.source, ex.line) for ex in examples]


@pytest.fixture(scope="module")
def mr():
    return load_dataset("mr")


@pytest.fixture(scope="module")
def trec():
    return load_dataset("trec")


def test_trec_keeps_official_test_and_holds_out_stratified_dev(trec):
    s = split_dataset(trec, seed=0)
    assert key(s.test) == key(trec.parts["test"])  # untouched, same order
    assert len(s.dev) == 500 and len(s.train) == 5452 - 500
    assert set(key(s.train)).isdisjoint(key(s.dev))
    assert set(key(s.train)) | set(key(s.dev)) == set(key(trec.parts["train"]))
    train_counts = Counter(ex.label for ex in trec.parts["train"])
    dev_counts = Counter(ex.label for ex in s.dev)
    for label, n in train_counts.items():  # proportional to within one example
        assert abs(dev_counts[label] - 500 * n / 5452) < 1
    assert key(split_dataset(trec, seed=0).dev) == key(s.dev)
    assert key(split_dataset(trec, seed=1).dev) != key(s.dev)


def test_mr_quick_split_is_80_10_10_and_deterministic(mr):
    s = split_dataset(mr, split="quick", seed=0)
    assert (len(s.train), len(s.dev), len(s.test)) == (8460, 1058, 1058)
    parts = [set(key(p)) for p in (s.train, s.dev, s.test)]
    assert sum(map(len, parts)) == len(set().union(*parts)) == 10576
    assert key(split_dataset(mr, split="quick", seed=0).test) == key(s.test)
    assert key(split_dataset(mr, split="quick", seed=5).test) != key(s.test)


def test_mr_ten_folds_partition_the_data(mr):
    tests = [split_dataset(mr, split="cv", fold=k, seed=0) for k in range(10)]
    fold_keys = [set(key(s.test)) for s in tests]
    assert sum(map(len, fold_keys)) == 10576
    assert set().union(*fold_keys) == set(key(mr.examples))
    for s in tests:
        assert abs(len(s.test) - 1057.6) <= 1
        assert set(key(s.test)).isdisjoint(key(s.train)) and set(key(s.test)).isdisjoint(key(s.dev))
        assert len(s.train) + len(s.dev) + len(s.test) == 10576
        labels = Counter(ex.label for ex in s.test)
        assert abs(labels["0"] - 529.7) < 1 and abs(labels["1"] - 527.9) < 1  # stratified
    again = split_dataset(mr, split="cv", fold=3, seed=0)
    assert key(again.test) == key(tests[3].test) and key(again.dev) == key(tests[3].dev)


def test_split_errors(mr, trec):
    with pytest.raises(DataError, match=r"fold 10 is out of range; valid folds are 0\.\.9"):
        split_dataset(mr, split="cv", fold=10)
    with pytest.raises(DataError, match="needs a test fold"):
        split_dataset(mr, split="cv")
    with pytest.raises(DataError, match="trec has a test set"):
        split_dataset(trec, fold=1)
    with pytest.raises(DataError, match="unknown split 'halves'; valid splits are quick, cv"):
        split_dataset(mr, split="halves")


def test_file_options_with_bundled_data_are_an_error_not_ignored():
    with pytest.raises(DataError, match="--label-field describe.* 'mr' is bundled data"):
        load_splits(DataSpec("mr", label_field="y"))
    with pytest.raises(DataError, match="--format, --text-field describe"):
        load_splits(DataSpec("trec", format="csv", text_field="t"))


def test_stratified_helpers_never_hold_out_a_whole_label():
    ex = [Example(str(i), "a") for i in range(18)] + [Example("x", "b"), Example("y", "b")]
    rest, held = stratified_holdout(ex, 10, seed=0)
    assert len(held) == 10 and Counter(e.label for e in rest)["b"] >= 1
    folds = stratified_folds(ex, 4, seed=0)
    assert sorted(Counter(folds).values()) == [5, 5, 5, 5]


def test_user_file_splits_and_separate_files(tmp_path):
    lines = ["label\ttext"] + [f"{'ab'[i % 2]}\ttext {i}" for i in range(40)]
    main = tmp_path / "all.tsv"
    main.write_text("\n".join(lines) + "\n")
    other = tmp_path / "test.tsv"
    other.write_text("label\ttext\na\tone\nb\ttwo\n")
    s = load_splits(DataSpec(str(main)))
    assert (len(s.train), len(s.dev), len(s.test)) == (32, 4, 4)
    s = load_splits(DataSpec(str(main), test=str(other)))
    assert [ex.text for ex in s.test] == ["one", "two"] and len(s.train) + len(s.dev) == 40
    s = load_splits(DataSpec(str(main), test=str(other), dev=str(other)))
    assert len(s.train) == 40 and len(s.dev) == 2
    s = load_splits(DataSpec(str(main), limit=6))
    assert (len(s.train), len(s.dev), len(s.test)) == (6, 4, 4)
