"""Turning examples into id sequences and padded batches.

Padding is at the end of each sequence (id 0, ``<pad>``) and ``padding_mask`` is True at padding,
as everywhere in cplxnet. Each epoch's order depends only on ``(seed, epoch)``, never on what ran
before, so a resumed run sees exactly the batches of an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .io import DataError, Example
from .text import PAD_ID, UNK_ID, LabelMap, Tokenizer, Vocab

__all__ = ["EncodedSplit", "encode_split", "encode_texts", "batch_indices", "collate"]


@dataclass
class EncodedSplit:
    """Token ids per example, label ids (``-1`` when unlabelled) and the source examples."""

    ids: list[list[int]]
    labels: torch.Tensor  # (N,) int64
    examples: list[Example]

    def __len__(self) -> int:
        return len(self.ids)

    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.ids), dtype=np.int64, count=len(self.ids))


def encode_texts(
    texts: Sequence[str],
    tokenizer: Tokenizer,
    vocab: Vocab,
    *,
    max_len: int | None = None,
    truncate: bool = True,
    limit_name: str = "max_len",
    where: Sequence[str] | None = None,
) -> list[list[int]]:
    """Tokenize and map to ids; a text with no tokens becomes ``[<unk>]``.

    Texts longer than ``max_len`` are cut to their first ``max_len`` tokens when ``truncate``;
    otherwise a :class:`DataError` names the text (``where[i]``), its length and the fix.
    """
    out = []
    for i, text in enumerate(texts):
        ids = vocab.encode(tokenizer(text)) or [UNK_ID]
        if max_len is not None and len(ids) > max_len:
            if not truncate:
                place = where[i] if where is not None else f"text {i + 1}"
                raise DataError(
                    f"{place}: the text has {len(ids)} tokens but the model's {limit_name} is "
                    f"{max_len}; pass --max-len N to truncate texts to N tokens (training with a "
                    "larger --max-len also raises the model's limit)"
                )
            ids = ids[:max_len]
        out.append(ids)
    return out


def encode_split(
    examples: Sequence[Example],
    tokenizer: Tokenizer,
    vocab: Vocab,
    labels: LabelMap | None,
    *,
    max_len: int | None = None,
    truncate: bool = True,
    limit_name: str = "max_len",
) -> EncodedSplit:
    """Encode labelled examples; a label unknown to ``labels`` is a :class:`DataError`."""
    ids = encode_texts(
        [ex.text for ex in examples],
        tokenizer,
        vocab,
        max_len=max_len,
        truncate=truncate,
        limit_name=limit_name,
        where=[ex.where for ex in examples],
    )
    y = [labels.encode(ex) for ex in examples] if labels is not None else [-1] * len(examples)
    return EncodedSplit(ids, torch.tensor(y, dtype=torch.long), list(examples))


def batch_indices(
    lengths: Sequence[int] | np.ndarray,
    batch_size: int,
    *,
    shuffle: bool = True,
    bucket: bool = True,
    seed: int = 0,
    epoch: int = 0,
    min_batch: int = 1,
    bucket_batches: int = 50,
) -> list[np.ndarray]:
    """The batches of one epoch as index arrays.

    With ``shuffle``, the order is a permutation drawn from ``(seed, epoch)``; with ``bucket``
    ("sort-ish" batching) each run of ``bucket_batches`` batches of the permutation is sorted by
    length before cutting into batches, and the batches are shuffled, so a batch holds texts of
    similar length (less padding) while each epoch still mixes the data. Without ``shuffle`` the
    batches follow the data order (sorted by length if ``bucket``). A final batch smaller than
    ``min_batch`` is merged into the one before (data-parallel ranks each need an example).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    lengths = np.asarray(lengths)
    n = len(lengths)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n) if shuffle else np.arange(n)
    if bucket:
        chunk = batch_size * bucket_batches if shuffle else max(n, 1)
        order = (
            np.concatenate(
                [
                    c[np.argsort(lengths[c], kind="stable")]
                    for c in np.split(order, range(chunk, n, chunk))
                ]
            )
            if n
            else order
        )
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if len(batches) > 1 and len(batches[-1]) < min_batch:
        last = batches.pop()
        batches[-1] = np.concatenate([batches[-1], last])
    if shuffle and bucket:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def collate(
    ids: Sequence[Sequence[int]], pad_to: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad id lists at the end: ``ids (B, L)`` int64 and ``padding_mask (B, L)`` (True = padding).

    ``L`` is the longest sequence, or ``pad_to`` if larger (all ranks of a data-parallel step pad
    to the global batch's length, so each example is computed exactly as in one process).
    """
    if not ids:
        raise DataError("cannot make a batch of zero texts")
    length = max(len(x) for x in ids)
    if pad_to is not None:
        length = max(length, pad_to)
    out = torch.full((len(ids), length), PAD_ID, dtype=torch.long)
    for i, x in enumerate(ids):
        out[i, : len(x)] = torch.as_tensor(x, dtype=torch.long)
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
    return out, torch.arange(length)[None, :] >= lengths[:, None]
