"""Deterministic train/dev/test splits (seeded, stratified by label).

* TREC: the official test set is kept as is; a stratified dev set of 500 is held out of train.
* MR: ``split="cv"`` is the paper's 10-fold cross-validation (``fold=k`` is the test fold, a dev
  set of one tenth of the data is held out of the other nine folds); ``split="quick"`` is a single
  stratified 80/10/10 split.
* One user file: a stratified 80/10/10 split; separate ``dev``/``test`` files are used as given
  (what is missing is held out of the training file).

The same ``seed`` always gives the same split, whatever the training seed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .io import DataError, Dataset, Example

__all__ = ["Splits", "SPLITS", "split_dataset", "stratified_holdout", "stratified_folds"]

SPLITS = ("quick", "cv")
TREC_DEV_SIZE = 500


@dataclass
class Splits:
    """The three splits and a one-line description of how they were made."""

    train: list[Example]
    dev: list[Example]
    test: list[Example]
    description: str = ""

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)}


def _by_label(examples: Sequence[Example], rng: np.random.Generator) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[ex.label].append(i)
    return {
        label: [groups[label][j] for j in rng.permutation(len(groups[label]))]
        for label in sorted(groups)
    }


def stratified_holdout(
    examples: Sequence[Example],
    n: int,
    seed: int | Sequence[int],
    *,
    keep_each_label: bool = True,
) -> tuple[list[Example], list[Example]]:
    """Split off ``n`` examples with the label proportions of ``examples`` (largest remainder).

    Returns ``(rest, held_out)``; both keep the original order of ``examples``. With
    ``keep_each_label`` (a held-out split) the rest keeps at least one example of every label,
    so that training sees each; a ``DataError`` says so when ``n`` leaves no room for that.
    Without it (a sample of ``n``) any example may be taken.
    """
    total = len(examples)
    if not 0 < n < total:
        raise DataError(f"cannot hold out {n} of {total} examples; the data is too small")
    rng = np.random.default_rng(seed)
    groups = _by_label(examples, rng)
    quota = {label: n * len(idx) / total for label, idx in groups.items()}
    kept = 1 if keep_each_label else 0  # examples of each label the rest keeps
    room = {label: len(idx) - kept for label, idx in groups.items()}
    if n > sum(room.values()):
        raise DataError(
            f"cannot hold out {n} of {total} examples and keep an example of each of the "
            f"{len(groups)} labels for training; hold out at most {sum(room.values())}"
        )
    take = {label: int(q) for label, q in quota.items()}  # n < total: int(q) <= room
    left = n - sum(take.values())
    order = sorted(quota, key=lambda lab: (-(quota[lab] - take[lab]), lab))
    while left:  # the leftover slots by largest remainder, again where a label has no room
        for label in order:
            if left and take[label] < room[label]:
                take[label] += 1
                left -= 1
    held = sorted(i for label, idx in groups.items() for i in idx[: take[label]])
    held_set = set(held)
    rest = [ex for i, ex in enumerate(examples) if i not in held_set]
    return rest, [examples[i] for i in held]


def stratified_folds(examples: Sequence[Example], k: int, seed: int | Sequence[int]) -> list[int]:
    """A fold number ``0..k-1`` per example; every fold has each label's share (+-1)."""
    if k < 2 or k > len(examples):
        raise DataError(f"cannot make {k} folds of {len(examples)} examples")
    rng = np.random.default_rng(seed)
    fold = [0] * len(examples)
    position = 0
    for idx in _by_label(examples, rng).values():
        for i in idx:
            fold[i] = position % k
            position += 1
    return fold


def _holdout(examples: list, n: int, seed: int, salt: int) -> tuple[list, list]:
    """:func:`stratified_holdout` of ``n`` examples, or of as many as the labels can give while
    each keeps one for training (none: every example stays, and the empty split is refused by
    the caller's check)."""
    room = len(examples) - len({ex.label for ex in examples})
    if min(n, room) < 1:
        return list(examples), []
    return stratified_holdout(examples, min(n, room), [seed, salt])


def split_dataset(
    dataset: Dataset,
    *,
    split: str = "quick",
    fold: int | None = None,
    num_folds: int = 10,
    seed: int = 0,
    dev: Sequence[Example] | None = None,
    test: Sequence[Example] | None = None,
    dev_fraction: float = 0.1,
    test_fraction: float = 0.1,
) -> Splits:
    """Split ``dataset`` deterministically (see the module docstring).

    Args:
        split: ``"quick"`` (one held-out split) or ``"cv"`` (``num_folds``-fold cross-validation,
            test fold ``fold``; only for a dataset without an official test set).
        fold: the test fold for ``split="cv"``, ``0 <= fold < num_folds``.
        seed: the split seed (independent of the training seed).
        dev, test: examples from separate files; used as given instead of holding out.
    """
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; valid splits are {', '.join(SPLITS)}")
    if fold is not None and split != "cv":
        split = "cv"
    has_test = "test" in dataset.parts or test is not None
    if split == "cv":
        if has_test:
            raise DataError(
                f"{dataset.name} has a test set, so cross-validation folds do not apply; "
                "drop --fold"
            )
        if fold is None:
            raise DataError(f"cross-validation needs a test fold: pass --fold 0..{num_folds - 1}")
        if not 0 <= fold < num_folds:
            raise DataError(f"fold {fold} is out of range; valid folds are 0..{num_folds - 1}")
    if "train" in dataset.parts:
        train, official_test = list(dataset.parts["train"]), list(dataset.parts.get("test", []))
    else:
        train, official_test = list(dataset.parts["all"]), []
    if test is not None:
        official_test = list(test)

    if split == "cv":
        counts = Counter(ex.label for ex in train)
        rare = sorted(label for label, n in counts.items() if n < 2)
        if rare:
            raise DataError(
                f"{dataset.name}: the label(s) {', '.join(map(repr, rare[:5]))} have a single "
                "example, which the test fold can take from the training folds; cross-validation "
                "needs at least 2 examples of each label: add examples or remove the label"
            )
        folds = stratified_folds(train, num_folds, [seed, 1])
        test_part = [ex for ex, f in zip(train, folds) if f == fold]
        rest = [ex for ex, f in zip(train, folds) if f != fold]
        how = f"{num_folds}-fold cross-validation, test fold {fold}"
    elif official_test:
        test_part, rest = official_test, train
        how = "given test set"
    else:
        rest, test_part = _holdout(train, _count(len(train), test_fraction), seed, 2)
        how = f"stratified {round(100 * test_fraction)}% test held out"
    if dev is not None:
        dev_part, train_part = list(dev), rest
        how += ", given dev set"
    else:
        n_dev = (
            TREC_DEV_SIZE
            if dataset.name == "trec" and dataset.bundled
            else _count(len(train), dev_fraction)
        )
        train_part, dev_part = _holdout(rest, n_dev, seed, 3)
        how += f", stratified dev of {len(dev_part)} held out of train"
    return Splits(train_part, dev_part, test_part, f"{how} (split seed {seed})")


def _count(total: int, fraction: float) -> int:
    if not 0 < fraction < 1:
        raise DataError(f"a split fraction must be between 0 and 1, got {fraction}")
    return max(1, round(total * fraction))
