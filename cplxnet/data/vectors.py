"""Pretrained word vectors from a GloVe / word2vec text file."""

from __future__ import annotations

import gzip
import math
import os
import zlib
from dataclasses import dataclass

import torch

from .io import DataError, clip, not_found
from .text import Vocab

__all__ = ["WordVectors", "read_word_vectors"]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class WordVectors:
    """Rows for the vocabulary: ``vectors (V, D)`` (zeros where not found), ``found (V,)`` bool."""

    vectors: torch.Tensor
    found: torch.Tensor
    dim: int
    path: str

    @property
    def num_found(self) -> int:
        return int(self.found.sum())


def _gzip_damage(path: str) -> str | None:
    """Why the gzip file ``path`` does not inflate to its end with a matching CRC, or ``None``."""
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as err:
        return str(err)
    return None


def read_word_vectors(path: str, vocab: Vocab, dtype: torch.dtype = torch.float32) -> WordVectors:
    """Read a text file of word vectors and pick the rows of ``vocab``'s words.

    Each line is a word and its ``D`` numbers separated by spaces (or tabs); a first line of two
    integers (``N D``) is a word2vec header. A line with more fields whose second field is not a
    number is a word holding spaces (glove.840B's ``. . .``): its last ``D`` fields are the
    numbers. The whole file is scanned but only vocabulary words are kept.
    A word in the file matches a vocabulary token exactly or, failing that, lower-cased (the first
    such line wins). ``<pad>`` and ``<unk>`` are never set. Lines of inconsistent length, numbers
    that do not parse and a used vector holding nan, inf or a value beyond ``dtype``'s range are a
    :class:`DataError` naming the line; so is a damaged ``.gz`` file.
    """
    if os.path.isdir(path):
        raise DataError(
            f"{path}: is a directory; give --vectors a word-vector text file (GloVe or word2vec)"
        )
    if not os.path.exists(path):
        raise not_found(path, "the --vectors path")
    if not os.path.isfile(path):
        raise DataError(
            f"{path}: not a regular file (a pipe, socket or device); give --vectors a "
            "word-vector text file (GloVe or word2vec)"
        )
    opener = gzip.open if path.endswith(".gz") else open
    vectors: dict[int, list[float]] = {}
    exact: set[int] = set()
    dim = None
    number = 0
    largest = torch.finfo(dtype).max
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="strict") as fh:
            for number, line in enumerate(fh, 1):
                parts = line.rstrip("\n").rstrip("\r").replace("\t", " ").rstrip(" ").split(" ")
                if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    dim = int(parts[1])  # word2vec header "N D"
                    continue
                if len(parts) < 2 or not parts[0]:
                    if not line.strip():
                        continue
                    raise DataError(f"{path} line {number}: expected a word and its numbers")
                if dim is None:
                    dim = len(parts) - 1
                if len(parts) - 1 > dim and not _is_number(parts[1]):
                    parts = [" ".join(parts[:-dim]), *parts[-dim:]]  # a word holding spaces
                if len(parts) - 1 != dim:
                    raise DataError(
                        f"{path} line {number}: {len(parts) - 1} numbers where the file's vectors "
                        f"have {dim}; every line must be a word and {dim} numbers"
                    )
                word = parts[0]
                index = vocab.stoi.get(word)
                is_exact = index is not None
                if index is None:
                    index = vocab.stoi.get(word.lower())
                if (
                    index is None
                    or index < 2
                    or index in exact
                    or (not is_exact and index in vectors)
                ):
                    continue
                try:
                    vectors[index] = [float(v) for v in parts[1:]]
                except ValueError:
                    raise DataError(
                        f"{path} line {number}: numbers that do not parse after the word "
                        f"{clip(word)}"
                    ) from None
                if not all(math.isfinite(v) for v in vectors[index]):
                    raise DataError(
                        f"{path} line {number}: the vector of {clip(word)} holds nan or inf; fix "
                        "or remove the line"
                    )
                if any(abs(v) > largest for v in vectors[index]):
                    raise DataError(
                        f"{path} line {number}: the vector of {clip(word)} holds a value beyond "
                        f"{largest:.4g}, the largest {dtype} number; fix or remove the line"
                    )
                if is_exact:
                    exact.add(index)
    except (DataError, UnicodeDecodeError) as err:
        # a damaged .gz can inflate to garbage before its CRC fails: the damage is the cause
        damage = _gzip_damage(path) if path.endswith(".gz") else None
        if damage is None and isinstance(err, DataError):
            raise
        if damage is None:
            raise DataError(
                f"{path}: bytes that are not UTF-8 (line {number + 1}); word-vector files must "
                "be UTF-8 text (binary word2vec files are not supported: convert them to text "
                "first)"
            ) from None
    except (OSError, EOFError, zlib.error) as err:  # a damaged .gz, a read error
        damage = str(err)
    else:
        damage = None
    if damage is not None:
        raise DataError(
            f"{path}: cannot read the word-vector file after line {number} ({damage}); give a "
            "complete file (a .gz name must hold gzip data)"
        )
    if dim is None:
        raise DataError(f"{path}: the word-vector file is empty")
    table = torch.zeros(len(vocab), dim, dtype=dtype)
    found = torch.zeros(len(vocab), dtype=torch.bool)
    for index, row in vectors.items():
        table[index] = torch.tensor(row, dtype=dtype)
        found[index] = True
    return WordVectors(table, found, dim, path)
