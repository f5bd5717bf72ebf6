"""Text streams for language modelling: reading, tokenizing, the vocabulary, the split, windows.

A corpus is one stream of tokens: a plain UTF-8 text file, or the sentences of the bundled MR or
TREC data (:mod:`cplxnet.data`) joined by newlines in file order (MR: 10,576 sentences, 1.19 M
characters; TREC: 5,952 questions, 0.30 M characters). ``tokens="char"`` makes every character a
token (newlines included); ``tokens="word"`` splits on whitespace. The stream is split
contiguously: the first 90% of its tokens train, the next 5% are dev, the last 5% test, so dev
and test are text the model never trained on. The vocabulary is that of the training part plus
``<pad>`` (id 0, never in a stream) and ``<unk>`` (id 1, tokens unseen in training).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...data import BUNDLED, DataError, load_dataset
from ...data.io import check_text_bytes
from ...engine.runs import file_sha256

__all__ = [
    "TOKENIZATIONS",
    "SPLIT_FRACTIONS",
    "PAD",
    "UNK",
    "TokenVocab",
    "LMData",
    "max_context",
    "read_corpus",
    "tokenize",
    "detokenize",
    "prepare_lm_data",
    "windows",
    "file_sha256",
]

TOKENIZATIONS = ("char", "word")
SPLIT_FRACTIONS = (0.90, 0.05, 0.05)
PAD, UNK = "<pad>", "<unk>"


def read_corpus(source: str) -> str:
    """The text of ``source``: ``"mr"``/``"trec"`` (bundled sentences joined by newlines; TREC's
    train part then its test part) or the path of a plain UTF-8 text file.

    A missing, binary (NUL bytes or not UTF-8), empty or whitespace-only file is a
    :class:`~cplxnet.data.DataError` naming the file and what to do.
    """
    if source in BUNDLED:
        return "\n".join(ex.text for ex in load_dataset(source).examples)
    if not os.path.exists(source):
        raise DataError(
            f"{source}: no such file; give a UTF-8 text file or one of the bundled corpora "
            f"({', '.join(BUNDLED)})"
        )
    if os.path.isdir(source):
        raise DataError(f"{source} is a folder; give a UTF-8 text file")
    with open(source, "rb") as fh:
        raw = fh.read()
    check_text_bytes(raw, source)  # UTF-16/32, NUL bytes
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(
            f"{source} line {line}: byte {err.start} is not valid UTF-8; convert the file to "
            "UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None
    if not text.strip():
        raise DataError(f"{source}: the file is empty (no text); give a file with text")
    return text


def tokenize(text: str, tokens: str = "char") -> list[str]:
    """Characters (``"char"``) or whitespace-separated words (``"word"``) of ``text``."""
    if tokens not in TOKENIZATIONS:
        raise ValueError(f"unknown tokens {tokens!r}; valid: {', '.join(TOKENIZATIONS)}")
    return list(text) if tokens == "char" else text.split()


def detokenize(pieces: Sequence[str], tokens: str = "char") -> str:
    """The inverse of :func:`tokenize` (words are joined by single spaces)."""
    return "".join(pieces) if tokens == "char" else " ".join(pieces)


class TokenVocab:
    """Token <-> id. Ids 0 and 1 are ``<pad>`` and ``<unk>``, then ``extra`` special tokens, then
    the tokens by decreasing frequency (ties by the token), so the file is deterministic."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.itos = list(tokens)
        if self.itos[:2] != [PAD, UNK]:
            raise ValueError("TokenVocab: the first two tokens must be <pad> and <unk>")
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("TokenVocab: duplicate tokens")

    @classmethod
    def build(cls, pieces: Sequence[str], extra: Sequence[str] = ()) -> TokenVocab:
        counts = Counter(pieces)
        ordered = sorted(counts, key=lambda t: (-counts[t], t))
        special = {PAD, UNK, *extra}  # a corpus's own "<unk>" (PTB, WikiText) is the token
        return cls([PAD, UNK, *extra, *[t for t in ordered if t not in special]])

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenVocab) and self.itos == other.itos

    def encode(self, pieces: Sequence[str]) -> torch.Tensor:
        """``(N,)`` int64 ids; unknown tokens get ``<unk>``'s id 1."""
        get = self.stoi.get
        return torch.tensor([get(t, 1) for t in pieces], dtype=torch.long)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        return [self.itos[int(i)] for i in ids]

    def save(self, path: str) -> None:
        from ...engine.runs import write_json

        write_json(path, {"tokens": self.itos})

    @classmethod
    def load(cls, path: str) -> TokenVocab:
        from ...engine.runs import RunError

        try:
            with open(path, encoding="utf-8") as fh:
                return cls(json.load(fh)["tokens"])
        except FileNotFoundError:
            raise RunError(f"{path} is missing; the run folder is incomplete") from None
        except (ValueError, KeyError, TypeError) as err:
            raise RunError(f"{path} is not a token vocabulary ({err}); the run is damaged") from (
                None
            )


@dataclass
class LMData:
    """A tokenized corpus split 90/5/5: ``train``, ``dev``, ``test`` are ``(N,)`` int64 id
    streams."""

    source: str
    tokens: str
    vocab: TokenVocab
    train: torch.Tensor
    dev: torch.Tensor
    test: torch.Tensor
    unknown_test: int = 0

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)}

    def summary(self) -> str:
        s = self.sizes()
        unit = "characters" if self.tokens == "char" else "words"
        unknown = ""
        if self.unknown_test:  # tokens the training split never had: scored as <unk>
            share = 100 * self.unknown_test / max(s["test"], 1)
            unknown = (f"; {self.unknown_test:,} test {unit} ({share:.1f}%) are not in the "
                       "training vocabulary and are scored as <unk>")  # fmt: skip
        return (
            f"corpus {self.source}: {s['train']:,} / {s['dev']:,} / {s['test']:,} {unit} "
            f"(train / dev / test, contiguous 90/5/5), vocabulary {len(self.vocab)}{unknown}"
        )


def _cuts(n: int) -> tuple[int, int]:
    """Where a stream of ``n`` tokens splits into train ``[0, a)``, dev ``[a, b)``, test
    ``[b, n)``."""
    a = int(n * SPLIT_FRACTIONS[0])
    return a, a + int(n * SPLIT_FRACTIONS[1])


def _fits(n: int, context: int) -> bool:
    """True if each part of a split stream of ``n`` tokens holds a window of ``context + 1``
    tokens (and the training part one more, for a random offset)."""
    a, b = _cuts(n)
    return a >= context + 2 and b - a >= context + 1 and n - b >= context + 1


def max_context(n: int) -> int:
    """The longest context a text of ``n`` tokens holds (:func:`_fits`; below 1: none)."""
    a, b = _cuts(n)
    return min(a - 2, b - a - 1, n - b - 1)


def min_tokens(context: int) -> int:
    """The fewest tokens a text needs for ``context`` (see :func:`prepare_lm_data`)."""
    n = max(1, int((context + 1) / SPLIT_FRACTIONS[1]) - 2)
    while not _fits(n, context):
        n += 1
    return n


def prepare_lm_data(
    source: str, tokens: str = "char", context: int = 64, vocab: TokenVocab | None = None
) -> LMData:
    """Read, tokenize and split ``source`` (see :func:`read_corpus`).

    ``vocab``: the vocabulary to use (a run's ``vocab.json``); ``None`` builds it from the
    training part. The stream must be long enough for ``context``: the dev and test parts (5%
    each) must each hold at least one window of ``context + 1`` tokens (the inputs and their
    next tokens), else a :class:`~cplxnet.data.DataError` says how long the text must be.
    """
    if tokens not in TOKENIZATIONS:
        raise DataError(f"unknown --tokens {tokens!r}; valid: {', '.join(TOKENIZATIONS)}")
    if context < 1:
        raise DataError(f"--context must be at least 1, got {context}")
    pieces = tokenize(read_corpus(source), tokens)
    n = len(pieces)
    unit = "characters" if tokens == "char" else "words"
    most = max_context(n)
    fix = f"--context {most} or less" if most >= 1 else "a longer text (no context fits in it)"
    if context + 1 > n:
        raise DataError(
            f"--context {context} is larger than the data: {source} has {n:,} {unit}; choose "
            f"{fix} (the dev and test parts, 5% each, must each hold a window of L + 1 tokens)"
        )
    if not _fits(n, context):
        need = min_tokens(context)
        raise DataError(
            f"{source} is too short for --context {context}: it has {n:,} {unit}, and the "
            f"dev and test parts (5% each) must each hold a window of {context + 1} tokens, "
            f"so it needs at least {need:,}; give a longer text or {fix}"
        )
    a, b = _cuts(n)
    if vocab is None:
        vocab = TokenVocab.build(pieces[:a])
    test = vocab.encode(pieces[b:])
    unknown = int((test == 1).sum()) - pieces[b:].count(UNK)  # a literal "<unk>" is the token
    return LMData(
        source=source,
        tokens=tokens,
        vocab=vocab,
        train=vocab.encode(pieces[:a]),
        dev=vocab.encode(pieces[a:b]),
        test=test,
        unknown_test=unknown,
    )


def windows(num_tokens: int, length: int) -> list[tuple[int, int]]:
    """Non-overlapping windows ``[start, end)`` of at most ``length`` *inputs* over a stream of
    ``num_tokens`` tokens, such that every token but the first is predicted exactly once.

    Window ``(s, e)`` feeds tokens ``s .. e-1`` and scores their next tokens ``s+1 .. e``, so
    the windows are ``(0, L), (L, 2L), ...``: targets ``1 .. num_tokens - 1`` each once. The
    last window is shorter when ``num_tokens - 1`` is not a multiple of ``length`` (its tokens
    are scored with the shorter context they have; no token is dropped or scored twice).
    """
    if length < 1:
        raise ValueError(f"windows: length must be >= 1, got {length}")
    last = num_tokens - 1  # inputs 0 .. last-1 predict 1 .. last
    return [(s, min(s + length, last)) for s in range(0, max(last, 0), length)]
