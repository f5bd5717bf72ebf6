"""A synthetic order-sensitive task for length extrapolation: "is marker ``a`` before ``b``?".

Each text is a sequence of filler words ``w0 .. w{V-1}`` (uniform, uninformative) with the two
markers ``a`` and ``b`` at distinct positions; the label is ``before`` when ``a`` comes first,
``after`` otherwise. A bag of words cannot solve it (both labels have the same words), so the
accuracy measures what a model knows about order.

Lengths and distances:

* training and dev texts have ``min_len <= n <= train_len`` tokens and markers at uniformly drawn
  distinct positions, so every distance between them is at most ``train_len - 1``;
* a test bin ``(lo, hi]`` above ``train_len`` has ``lo < n <= hi`` tokens and a marker distance
  ``d`` drawn uniformly from ``train_len .. n-1``: a distance never seen in training;
* the in-distribution bin ``[min_len, train_len]`` is drawn like the training data.

Everything is a function of ``seed``: the same seed gives the same texts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...data import Example

__all__ = [
    "SyntheticOrderTask",
    "LengthBin",
    "length_bins",
    "order_label",
    "MARKER_A",
    "MARKER_B",
    "LABELS",
]

MARKER_A, MARKER_B = "a", "b"
LABELS = ("after", "before")


@dataclass(frozen=True)
class LengthBin:
    """Texts of ``lo <= length <= hi`` tokens (both inclusive)."""

    lo: int
    hi: int

    @property
    def label(self) -> str:
        return f"{self.lo}-{self.hi}"

    def __contains__(self, length: int) -> bool:
        return self.lo <= length <= self.hi


def length_bins(
    train_len: int, factors: tuple[int, ...] = (1, 2, 4), min_len: int = 1
) -> list[LengthBin]:
    """Bins ``[min_len, L]``, ``(L, f2 L]``, ``(f2 L, f3 L]``, ... for factors ``(1, f2, f3..)``
    (``L`` = ``train_len``; the first factor must be 1: the in-distribution bin)."""
    if train_len < 2:
        raise ValueError(f"train_len must be at least 2, got {train_len}")
    factors = tuple(int(f) for f in factors)
    if not factors or factors[0] != 1 or any(b <= a for a, b in zip(factors, factors[1:])):
        raise ValueError(f"factors must start at 1 and increase, got {factors}")
    bins = [LengthBin(min_len, train_len)]
    for a, b in zip(factors, factors[1:]):
        bins.append(LengthBin(a * train_len + 1, b * train_len))
    return bins


def order_label(tokens: list[str]) -> str:
    """The true label of a token list: ``before`` if ``a`` precedes ``b``."""
    return "before" if tokens.index(MARKER_A) < tokens.index(MARKER_B) else "after"


@dataclass(frozen=True)
class SyntheticOrderTask:
    """Generator of the task (see the module docstring).

    Args:
        train_len: longest training text ``L``.
        factors: test bins ``(L, f2 L]``, ``(f2 L, f3 L]``, ... (see :func:`length_bins`).
        vocab: number of filler words.
        min_len: shortest text (at least 2: the two markers).
        n_train, n_dev, n_test: examples in train, dev, and in each test bin.
        seed: the data seed (independent of the training seed).
    """

    train_len: int = 16
    factors: tuple[int, ...] = (1, 2, 4)
    vocab: int = 50
    min_len: int = 2
    n_train: int = 2000
    n_dev: int = 400
    n_test: int = 400
    seed: int = 0

    def __post_init__(self) -> None:
        if self.min_len < 2 or self.min_len > self.train_len:
            raise ValueError(
                f"min_len must be in [2, train_len={self.train_len}], got {self.min_len}"
            )
        if self.vocab < 1:
            raise ValueError(f"vocab must be >= 1, got {self.vocab}")
        for name in ("n_train", "n_dev", "n_test"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be at least 2, got {getattr(self, name)}")
        length_bins(self.train_len, self.factors, self.min_len)  # validates

    @property
    def bins(self) -> list[LengthBin]:
        return length_bins(self.train_len, self.factors, self.min_len)

    def _text(self, rng: np.random.Generator, n: int, i: int, j: int) -> list[str]:
        tokens = [f"w{k}" for k in rng.integers(0, self.vocab, size=n)]
        tokens[i], tokens[j] = MARKER_A, MARKER_B
        return tokens

    def _examples(self, part: int, count: int, lo: int, hi: int, unseen: bool) -> list[Example]:
        """``count`` texts of ``lo..hi`` tokens; ``unseen``: marker distance >= train_len."""
        rng = np.random.default_rng([self.seed, part])
        out = []
        source = f"synthetic:{lo}-{hi}"
        for k in range(count):
            n = int(rng.integers(lo, hi + 1))
            if unseen:
                d = int(rng.integers(self.train_len, n))  # train_len <= d <= n - 1
                first = int(rng.integers(0, n - d))
                i, j = first, first + d
            else:
                i, j = (int(v) for v in rng.choice(n, size=2, replace=False))
            if rng.random() < 0.5:  # which marker comes first
                i, j = min(i, j), max(i, j)
            else:
                i, j = max(i, j), min(i, j)
            tokens = self._text(rng, n, i, j)
            out.append(Example(" ".join(tokens), order_label(tokens), source, k + 1))
        return out

    def train(self) -> list[Example]:
        return self._examples(0, self.n_train, self.min_len, self.train_len, unseen=False)

    def dev(self) -> list[Example]:
        return self._examples(1, self.n_dev, self.min_len, self.train_len, unseen=False)

    def test_bins(self) -> dict[str, list[Example]]:
        """Examples per bin label; the first bin is in-distribution, the others have unseen
        lengths and unseen marker distances."""
        out = {}
        for k, b in enumerate(self.bins):
            out[b.label] = self._examples(2 + k, self.n_test, b.lo, b.hi, unseen=k > 0)
        return out

    def to_dict(self) -> dict:
        return {
            "train_len": self.train_len,
            "factors": list(self.factors),
            "vocab": self.vocab,
            "min_len": self.min_len,
            "n_train": self.n_train,
            "n_dev": self.n_dev,
            "n_test": self.n_test,
            "seed": self.seed,
        }
