"""Tokenizer, vocabulary and label map (all built from the training split only, saved as JSON)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from .io import DataError, Example, clip

__all__ = ["Tokenizer", "Vocab", "LabelMap", "PAD", "UNK", "PAD_ID", "UNK_ID"]

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1

# Words (letters/digits/underscore, with inner apostrophes or hyphens: "don't", "well-made"), the
# two-character quotes of the MR data (`` and ''), and any other single non-space character.
_TOKEN = re.compile(r"``|''|\w+(?:['\u2019-]\w+)*|[^\w\s]")

# Kim (2014) "clean_str": keep ASCII letters, digits and a few punctuation marks, split the
# English clitics ('s 've n't 're 'd 'll) off their word and space out , ! ( ) ?
_KIM_DROP = re.compile(r"[^A-Za-z0-9(),!?'`]")
_KIM_CLITIC = re.compile(r"(n't|'s|'ve|'re|'d|'ll)\b")
_KIM_PUNCT = re.compile(r"([,!()?])")


@dataclass(frozen=True)
class Tokenizer:
    """Regex word tokenizer.

    Args:
        lowercase: lower-case the text first.
        clean: apply Kim (2014)-style cleaning first (drop characters other than ASCII letters,
            digits and ``(),!?'` ``; split clitics such as ``n't`` and ``'s`` off their word).
            Without it, words keep inner apostrophes and hyphens and every other punctuation
            character is its own token.
    """

    lowercase: bool = True
    clean: bool = False

    def __call__(self, text: str) -> list[str]:
        if self.clean:
            text = _KIM_DROP.sub(" ", text)
            text = _KIM_CLITIC.sub(r" \1", text)
            text = _KIM_PUNCT.sub(r" \1 ", text)
            tokens = text.split()
        else:
            tokens = _TOKEN.findall(text)
        if self.lowercase:
            tokens = [t.lower() for t in tokens]
        return tokens

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Tokenizer:
        return cls(**d)


class Vocab:
    """Token <-> id map with ``<pad>`` = 0 and ``<unk>`` = 1, then tokens by falling frequency.

    Build it from the training split only (:meth:`build`); ties in frequency are broken
    alphabetically so the ids are deterministic.
    """

    def __init__(self, tokens: Sequence[str], min_freq: int = 1, max_size: int | None = None):
        if list(tokens[:2]) != [PAD, UNK]:
            raise ValueError(f"Vocab: the first two tokens must be {PAD!r} and {UNK!r}")
        self.itos = list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("Vocab: duplicate tokens")
        self.min_freq = min_freq
        self.max_size = max_size

    @classmethod
    def build(
        cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None
    ) -> Vocab:
        """Tokens seen at least ``min_freq`` times, the ``max_size`` most frequent (``None``: all);
        ``max_size`` counts ``<pad>`` and ``<unk>``."""
        if min_freq < 1:
            raise ValueError(f"Vocab.build: min_freq must be >= 1, got {min_freq}")
        if max_size is not None and max_size < 3:
            raise ValueError(
                f"Vocab.build: max_size must be >= 3 (pad, unk, one word), got {max_size}"
            )
        counts = Counter(t for tokens in token_lists for t in tokens)
        counts.pop(PAD, None)
        counts.pop(UNK, None)
        words = sorted(
            (w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w)
        )
        if max_size is not None:
            words = words[: max_size - 2]
        return cls([PAD, UNK, *words], min_freq=min_freq, max_size=max_size)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def to_dict(self) -> dict:
        return {"min_freq": self.min_freq, "max_size": self.max_size, "tokens": self.itos}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        return cls(d["tokens"], d.get("min_freq", 1), d.get("max_size"))

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, ensure_ascii=False)

    @classmethod
    def load(cls, path: str) -> Vocab:
        with open(path, encoding="utf-8") as fh:
            return cls.from_dict(json.load(fh))


class LabelMap:
    """Label string <-> class index, from the labels of the training split (sorted)."""

    def __init__(self, labels: Sequence[str]):
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}
        if len(self.index) != len(self.labels):
            raise ValueError("LabelMap: duplicate labels")

    @classmethod
    def build(cls, examples: Iterable[Example]) -> LabelMap:
        labels = sorted({ex.label for ex in examples})
        if len(labels) < 2:
            raise DataError(
                f"the training split has {len(labels)} distinct label(s) {labels}; a classifier "
                "needs at least two"
            )
        return cls(labels)

    def __len__(self) -> int:
        return len(self.labels)

    def encode(self, example: Example) -> int:
        try:
            return self.index[example.label]
        except KeyError:
            raise DataError(
                f"{example.where}: label {clip(example.label)} never occurs in the training data "
                f"(known labels: {', '.join(clip(label, 40)[1:-1] for label in self.labels[:20])}"
                f"{', ...' if len(self.labels) > 20 else ''}); fix the label or retrain with it"
            ) from None

    def decode(self, index: int) -> str:
        return self.labels[index]

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.labels, fh, ensure_ascii=False)

    @classmethod
    def load(cls, path: str) -> LabelMap:
        with open(path, encoding="utf-8") as fh:
            return cls(json.load(fh))
