"""Scoring a model: :func:`evaluating` (evaluation mode for a block), and for a classifier batched
logits, macro-F1 and :func:`evaluate` (loss, accuracy, macro-F1 on a labelled split)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data import DataError, EncodedSplit, batch_indices, collate

__all__ = ["evaluating", "macro_f1", "batch_logits", "evaluate"]


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` in evaluation mode for the block, then back in the mode it had, also when the
    block raises (a caller that skips a length it cannot score keeps training with dropout)."""
    was = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was)


def macro_f1(y_true: torch.Tensor, y_pred: torch.Tensor) -> float:
    """Mean over classes (those occurring in ``y_true`` or ``y_pred``) of the F1 score."""
    scores = []
    for c in torch.unique(torch.cat([y_true, y_pred])).tolist():
        tp = int(((y_pred == c) & (y_true == c)).sum())
        fp = int(((y_pred == c) & (y_true != c)).sum())
        fn = int(((y_pred != c) & (y_true == c)).sum())
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else 0.0


@torch.no_grad()
def batch_logits(model: nn.Module, ids: Sequence[Sequence[int]], batch_size: int) -> torch.Tensor:
    """Logits ``(N, C)`` of id sequences, in their order (batched by length, padded at the end)."""
    out: list[tuple[np.ndarray, torch.Tensor]] = []
    lengths = [len(x) for x in ids]
    with evaluating(model):
        for index in batch_indices(lengths, batch_size, shuffle=False, bucket=True):
            x, mask = collate([ids[i] for i in index])
            out.append((index, model(x, mask).float()))
    logits = torch.empty(len(ids), out[0][1].shape[1]) if out else torch.empty(0, 0)
    for index, value in out:
        logits[torch.as_tensor(index)] = value
    return logits


def evaluate(model: nn.Module, split: EncodedSplit, batch_size: int = 256) -> dict[str, float]:
    """Loss, accuracy and macro-F1 of ``model`` on a labelled split (eval mode, no gradients)."""
    if len(split) == 0:
        raise DataError("cannot evaluate on an empty split")
    logits = batch_logits(model, split.ids, batch_size)
    pred = logits.argmax(1)
    return {
        "loss": float(F.cross_entropy(logits, split.labels)),
        "accuracy": int((pred == split.labels).sum()) / len(split),
        "macro_f1": macro_f1(split.labels, pred),
        "n": len(split),
    }
