"""The options of a language-model training run (:class:`LMOptions`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...engine.optimization import SCHEDULES, lr_at

__all__ = ["LM_PRESET", "LMOptions", "MONITORED", "MONITORS"]

#: The default preset of a language model (``train --task lm``, ``compare --task lm``).
LM_PRESET = "lm-char"

#: The dev scores that can choose ``best.pt`` and drive early stopping (:attr:`LMOptions.monitor`),
#: each with its name in words.
MONITORED = {"loss": "dev loss", "accuracy": "dev exact match"}
MONITORS = tuple(MONITORED)


@dataclass
class LMOptions:
    """Training options of a language model.

    Attributes:
        steps: optimiser steps in total.
        batch_size: windows (sequences) per step.
        lr: AdamW's peak learning rate.
        weight_decay: AdamW's decoupled weight decay.
        clip_norm: clip the gradient to this total norm (``None``: no clipping).
        eval_every: score dev (and save a checkpoint) every this many steps, and at the end.
        eval_multiples: test evaluation lengths as multiples of the training context.
        seed: model initialisation, dropout and the training windows.
        batch_tokens: about this many tokens per evaluation forward pass.
        schedule: ``"constant"`` or ``"cosine"`` (decay to ``min_lr_ratio * lr`` at the last
            step), after a linear warm-up of ``warmup_steps``
            (:func:`cplxnet.engine.optimization.lr_at`).
        warmup_steps: steps of linear warm-up (0: none).
        min_lr_ratio: the cosine schedule's floor as a fraction of ``lr``.
        patience: stop when this many evaluations in a row bring no better monitored dev score
            (``None``: train all ``steps``).
        monitor: the dev score that chooses ``best.pt`` and counts for ``patience``: ``"loss"``
            (lower is better) or, on a synthetic task, ``"accuracy"``, the exact match of the dev
            prompts (higher is better; only a strictly higher exact match is better, so a run
            that has reached its highest exact match stops after ``patience`` evaluations and
            keeps the first checkpoint with it).
    """

    steps: int = 1500
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 0.01
    clip_norm: float | None = 1.0
    eval_every: int = 250
    eval_multiples: tuple[int, ...] = (1, 2, 4, 8)
    seed: int = 0
    batch_tokens: int = 16384
    schedule: str = "constant"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    patience: int | None = None
    monitor: str = "loss"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_every", "batch_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0, got {self.clip_norm}")
        self.eval_multiples = tuple(int(m) for m in self.eval_multiples)
        if not self.eval_multiples or min(self.eval_multiples) < 1:
            raise ValueError(f"eval_multiples must be positive ints, got {self.eval_multiples}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got "
                             f"{self.schedule!r}")  # fmt: skip
        w = self.warmup_steps
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= self.steps:
            raise ValueError(f"warmup_steps must be an int in 0..steps ({self.steps}), got {w!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        p = self.patience
        if p is not None and (isinstance(p, bool) or not isinstance(p, int) or p < 1):
            raise ValueError(f"patience must be a positive int (evaluations), got {p!r}")
        if self.monitor not in MONITORS:
            raise ValueError(f"monitor must be one of {', '.join(MONITORS)}, got {self.monitor!r}")

    def lr_at(self, step: int) -> float:
        """The learning rate of optimiser step ``step`` (0-based)."""
        return lr_at(step, self.lr, self.steps, schedule=self.schedule,
                     warmup_steps=self.warmup_steps, min_lr_ratio=self.min_lr_ratio)  # fmt: skip

    def stalled(self, history: list[dict]) -> bool:
        """True when the last ``patience`` evaluations of ``history`` (metrics.jsonl lines)
        brought no better monitored dev score (early stopping)."""
        if self.patience is None or len(history) <= self.patience:
            return False
        return not any(m["best"] for m in history[-self.patience :])

    @property
    def monitored(self) -> str:
        """The monitored score in words (``"dev loss"``, ``"dev exact match"``)."""
        return MONITORED[self.monitor]

    @classmethod
    def from_dict(cls, d: dict) -> LMOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
