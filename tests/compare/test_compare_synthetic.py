"""The synthetic order task and the length bins (real data split by length)."""

from __future__ import annotations

import pytest

from cplxnet.compare import Cell, LengthBin, SyntheticOrderTask, length_bins, parse_encoding
from cplxnet.compare.grid.cells import data_spec
from cplxnet.compare.grid.extrapolate import length_split_data
from cplxnet.data import load_splits
from cplxnet.tasks.classify.synthetic import MARKER_A, MARKER_B, order_label


def _positions(text: str) -> tuple[int, int, int]:
    tokens = text.split()
    assert tokens.count(MARKER_A) == 1 and tokens.count(MARKER_B) == 1
    return len(tokens), tokens.index(MARKER_A), tokens.index(MARKER_B)


def test_length_bins():
    assert length_bins(16) == [LengthBin(1, 16), LengthBin(17, 32), LengthBin(33, 64)]
    assert [b.label for b in length_bins(5, (1, 3), min_len=2)] == ["2-5", "6-15"]
    assert 16 in LengthBin(1, 16) and 17 not in LengthBin(1, 16)
    for bad in [(2, 4), (1, 1), ()]:
        with pytest.raises(ValueError, match="factors"):
            length_bins(8, bad)
    with pytest.raises(ValueError, match="train_len"):
        length_bins(1)


def test_labels_correct_by_construction_and_lengths():
    task = SyntheticOrderTask(train_len=8, factors=(1, 2, 4), n_train=300, n_dev=50, n_test=200)
    train = task.train()
    assert len(train) == 300 and len(task.dev()) == 50
    for ex in train + task.dev():
        n, i, j = _positions(ex.text)
        assert 2 <= n <= 8
        assert ex.label == ("before" if i < j else "after")
    bins = task.test_bins()
    assert list(bins) == ["2-8", "9-16", "17-32"]
    for k, (label, examples) in enumerate(bins.items()):
        lo, hi = map(int, label.split("-"))
        assert len(examples) == 200
        for ex in examples:
            n, i, j = _positions(ex.text)
            assert lo <= n <= hi
            assert ex.label == ("before" if i < j else "after")
            if k > 0:  # a distance between the markers never seen in training (max 7)
                assert abs(i - j) >= 8
        labels = [ex.label for ex in examples]
        assert 0.3 < labels.count("before") / len(labels) < 0.7


def test_deterministic_under_seed():
    a = SyntheticOrderTask(train_len=6, n_train=20, n_dev=5, n_test=5, seed=3)
    b = SyntheticOrderTask(train_len=6, n_train=20, n_dev=5, n_test=5, seed=3)
    c = SyntheticOrderTask(train_len=6, n_train=20, n_dev=5, n_test=5, seed=4)
    assert a.train() == b.train() and a.test_bins() == b.test_bins()
    assert [e.text for e in a.train()] != [e.text for e in c.train()]
    assert a.train() != a.dev()[:20]


def test_bag_of_words_cannot_tell():
    """Each text's words without the order are compatible with both labels: swapping the two
    markers flips the label and keeps the multiset of words."""
    for ex in SyntheticOrderTask(train_len=6, n_train=30, n_dev=2, n_test=2).train():
        tokens = ex.text.split()
        i, j = tokens.index(MARKER_A), tokens.index(MARKER_B)
        tokens[i], tokens[j] = tokens[j], tokens[i]
        assert order_label(tokens) != ex.label
        assert sorted(tokens) == sorted(ex.text.split())


def test_bad_task_options():
    with pytest.raises(ValueError, match="min_len"):
        SyntheticOrderTask(train_len=4, min_len=1)
    with pytest.raises(ValueError, match="n_train"):
        SyntheticOrderTask(n_train=1)


def test_real_data_split_by_length(options, length_tsv):
    opts = options
    opts.extrapolate = {"train_len": 3, "factors": [1, 2, 4]}
    cell = Cell(length_tsv, None, "fasttext", parse_encoding("none"), "real", 0, "extrapolate")
    data, encoded, bins, dropped = length_split_data(cell, opts)
    assert [b.label for b in bins] == ["1-3", "4-6", "7-12"]
    assert max(map(len, data.train.ids)) <= 3 and max(map(len, data.dev.ids)) <= 3
    assert len(data.train) > 0 and len(data.dev) > 0
    for b in bins:
        lengths = [len(ids) for ids in encoded[b.label].ids]
        assert lengths and all(b.lo <= n <= b.hi for n in lengths)
    assert dropped == 0
    # against the test split itself: each text in the bin of its length, longer ones dropped
    opts.extrapolate = {"train_len": 2, "factors": [1, 2]}
    data, encoded, bins, dropped = length_split_data(cell, opts)
    test = load_splits(data_spec(cell, opts)).test
    lengths = [len(ex.text.split()) for ex in test]
    assert {b.label: len(encoded[b.label]) for b in bins} == {
        "1-2": sum(n <= 2 for n in lengths),
        "3-4": sum(3 <= n <= 4 for n in lengths),
    }
    assert dropped == sum(n > 4 for n in lengths) > 0
