"""stratified_holdout's leftover slots (largest remainder): never a label's last example, and
every requested slot held out when the labels can give it."""

from collections import Counter

import pytest

from cplxnet.data import DataError, DataSpec, Example, stratified_holdout
from cplxnet.data.pipeline import load_splits


def _examples(counts):
    return [Example(f"{lab}{i}", lab) for lab, k in counts.items() for i in range(k)]


@pytest.mark.parametrize("counts, n", [({"z": 1, "y": 9}, 7), ({"a": 1, "b": 19}, 10)])
def test_the_leftover_slot_never_takes_a_labels_last_example(counts, n):
    ex = _examples(counts)
    for seed in range(3):
        rest, held = stratified_holdout(ex, n, seed=seed)
        assert len(held) == n and len(rest) == len(ex) - n
        assert set(Counter(e.label for e in rest)) == set(counts)  # every label still trains


def test_the_requested_size_is_held_out_when_the_labels_can_give_it():
    """A leftover slot a one-example label cannot take goes to a label that can: c gives up to
    7, a and b none, so 6 are held out with every label left in the rest."""
    ex = _examples({"a": 1, "b": 1, "c": 8})
    for seed in range(3):
        rest, held = stratified_holdout(ex, 6, seed=seed)
        assert len(held) == 6 and Counter(e.label for e in rest) == {"a": 1, "b": 1, "c": 2}


def test_more_than_the_labels_can_give_is_one_clear_error():
    with pytest.raises(DataError, match="keep an example of each of the 3 labels for training; "
                       "hold out at most 7"):  # fmt: skip
        stratified_holdout(_examples({"a": 1, "b": 1, "c": 8}), 8, seed=0)


def test_a_sample_may_take_a_labels_last_example():
    """``keep_each_label=False`` (the ``--limit`` sample): n of the examples, any label."""
    ex = _examples({"a": 1, "b": 1, "c": 8})
    rest, held = stratified_holdout(ex, 9, seed=0, keep_each_label=False)
    assert len(held) == 9 and len(rest) == 1


def test_holding_out_exactly_what_the_labels_can_give():
    """a, b: 1 each (none to give), c: 8 (7 to give): 7 is allowed, every label keeps one."""
    ex = _examples({"a": 1, "b": 1, "c": 8})
    for seed in range(3):
        rest, held = stratified_holdout(ex, 7, seed=seed)
        assert len(held) == 7 and Counter(e.label for e in rest) == {"a": 1, "b": 1, "c": 1}


def test_limit_samples_a_dev_file_of_one_example_per_label(tmp_path):
    """A dev file with one example of each of 6 labels and --limit 4: 4 dev examples (the
    held-out rule, keep one of each label, would refuse: nothing to give)."""
    labels = "abcdef"
    data = tmp_path / "all.tsv"
    data.write_text(
        "label\ttext\n" + "".join(f"{lab}\ttext {lab} {i}\n" for lab in labels for i in range(10))
    )
    dev = tmp_path / "dev.tsv"
    dev.write_text("label\ttext\n" + "".join(f"{lab}\tdev {lab}\n" for lab in labels))
    s = load_splits(DataSpec(str(data), dev=str(dev), limit=4))
    assert len(s.dev) == 4 and len({ex.label for ex in s.dev}) == 4


def test_a_split_holds_out_what_the_labels_can_give_and_says_how_many(tmp_path):
    """12 labels of one example and 4 of a third: the dev split holds out the one example the
    labels can give while each keeps one for training, and the description says 1."""
    data = tmp_path / "sparse.tsv"
    rows = [f"l{i}\tonly {i}" for i in range(12)] + [f"a\tmany {i}" for i in range(4)]
    data.write_text("label\ttext\n" + "\n".join(rows) + "\n")
    splits = load_splits(DataSpec(str(data)))
    assert splits.sizes() == {"train": 13, "dev": 1, "test": 2}
    assert "stratified dev of 1 held out of train" in splits.description
    assert {ex.label for ex in splits.train} == {f"l{i}" for i in range(12)} | {"a"}
