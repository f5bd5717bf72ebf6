"""The engine every task trains with: :func:`fit` (the loop) and the :class:`Task` protocol it
asks its data, model, loss, metrics and evaluation from (:mod:`cplxnet.engine.loop`)."""

from __future__ import annotations

from .loop import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_FORMATS,
    CHECKPOINT_KEYS,
    LoopState,
    Task,
    check_checkpoint_format,
    fit,
    load_best,
    upgrade_checkpoint,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMATS",
    "CHECKPOINT_KEYS",
    "LoopState",
    "Task",
    "check_checkpoint_format",
    "fit",
    "load_best",
    "upgrade_checkpoint",
]
