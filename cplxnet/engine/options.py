"""The options of a classification training run (:class:`TrainOptions`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

__all__ = ["TrainOptions"]


@dataclass
class TrainOptions:
    """Training options (everything that changes the result besides the model and the data).

    Attributes:
        epochs: maximum number of epochs.
        batch_size: global batch size (split across data-parallel ranks).
        lr: learning rate of Adam and SparseAdam.
        weight_decay: decoupled weight decay (AdamW) on the dense parameters; the sparse tables
            get none (``SparseAdam`` has none).
        clip_norm: clip the dense gradients to this total norm (``None``: no clipping).
        patience: stop after this many epochs without a better dev accuracy (``None``: never).
        seed: seeds the model initialisation, dropout and the batch order.
        bucket: sort-ish batching (batches of similar lengths) instead of plain shuffling.
        compile: run the model through ``torch.compile``.
        sparse: sparse gradients + SparseAdam for the embedding tables (when the model has them).
        max_steps: stop after this many optimiser steps in total (smoke tests; ``None``: no cap).
        eval_batch_size: batch size for dev/test scoring.
    """

    epochs: int = 10
    batch_size: int = 50
    lr: float = 1e-3
    weight_decay: float = 0.0
    clip_norm: float | None = None
    patience: int | None = None
    seed: int = 0
    bucket: bool = True
    compile: bool = False
    sparse: bool = True
    max_steps: int | None = None
    eval_batch_size: int = 256

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"lr must be a finite number > 0, got {self.lr}")
        if not 0 <= self.weight_decay < math.inf:
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if self.clip_norm is not None and not 0 < self.clip_norm < math.inf:
            raise ValueError(f"clip_norm must be a finite number > 0, got {self.clip_norm}")
        if isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be an integer 0..2**63-1, got {self.seed}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1, got {self.patience}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    @classmethod
    def from_dict(cls, d: dict) -> TrainOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
