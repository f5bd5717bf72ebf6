"""The engine every task trains with: :func:`fit` (the loop) and the :class:`Task` protocol it
asks its data, model, loss, metrics and evaluation from (:mod:`~cplxnet.engine.loop`); the
checkpoint format (:mod:`~cplxnet.engine.checkpoints`), run folders (:mod:`~cplxnet.engine.runs`
with :mod:`~cplxnet.engine.folder_lock`), seeds, ranks and progress
(:mod:`~cplxnet.engine.runtime`), optimisers and schedules (:mod:`~cplxnet.engine.optimization`),
metrics (:mod:`~cplxnet.engine.metrics`) and :class:`~cplxnet.engine.options.TrainOptions`
(:mod:`~cplxnet.engine.options`)."""

from __future__ import annotations

from .checkpoints import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_FORMATS,
    CHECKPOINT_KEYS,
    check_checkpoint_format,
    read_checkpoint,
    upgrade_checkpoint,
)
from .loop import LoopState, Task, fit, load_best

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMATS",
    "CHECKPOINT_KEYS",
    "LoopState",
    "Task",
    "check_checkpoint_format",
    "fit",
    "load_best",
    "read_checkpoint",
    "upgrade_checkpoint",
]
