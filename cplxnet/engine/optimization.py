"""One optimiser step of a classifier and what it needs: the optimisers (Adam or AdamW for dense
parameters, ``SparseAdam`` for embedding tables with sparse gradients), the choice of sparse
or dense gradients for the tables, and the learning-rate schedule (:func:`lr_at`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data import EncodedSplit, collate
from .options import TrainOptions

__all__ = [
    "ddp_handles_sparse", "set_sparse", "make_optimizers", "optimizer_step", "train_step",
    "SCHEDULES", "lr_at", "set_lr",
]  # fmt: skip

#: learning-rate schedules of :func:`lr_at`
SCHEDULES = ("constant", "cosine")


def lr_at(
    step: int,
    lr: float,
    total_steps: int,
    *,
    schedule: str = "constant",
    warmup_steps: int = 0,
    min_lr_ratio: float = 0.1,
) -> float:
    r"""The learning rate of optimiser step ``step`` (0-based) of ``total_steps``: nanoGPT's
    recipe (Karpathy, 2022), a linear warm-up then (``schedule="cosine"``) a cosine decay to the
    floor :math:`\eta_{min} = r\,\eta` (``r = min_lr_ratio``), reached at the last step.

    .. math::
        \eta_t = \eta\,\frac{t + 1}{W + 1} \ (t < W), \qquad
        \eta_t = \eta_{min} + \tfrac12 (1 + \cos \pi \tfrac{t - W}{T - 1 - W})
        (\eta - \eta_{min}) \ (t \ge W)

    with ``W = warmup_steps`` and ``T = total_steps``; ``"constant"`` keeps :math:`\eta` after
    the warm-up. A pure function of the step, so a resumed run follows the same curve.

    Examples::

        >>> [round(lr_at(t, 1.0, 10, schedule="cosine", warmup_steps=2), 3) for t in (0, 2, 9)]
        [0.333, 1.0, 0.1]
    """
    if step < warmup_steps:
        return lr * (step + 1) / (warmup_steps + 1)
    if schedule not in SCHEDULES:
        raise ValueError(f"lr_at: schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule == "constant" or total_steps - 1 <= warmup_steps:
        return lr
    decay = min(1.0, (step - warmup_steps) / (total_steps - 1 - warmup_steps))
    floor = lr * min_lr_ratio
    return floor + 0.5 * (1.0 + math.cos(math.pi * decay)) * (lr - floor)


def set_lr(optimizers: Sequence[torch.optim.Optimizer], lr: float) -> None:
    """Set the learning rate of every parameter group of ``optimizers``."""
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = lr


def ddp_handles_sparse(model: nn.Module, zoo: Any) -> bool:
    """True if every sparse-gradient parameter is the weight of a ``torch.nn.Embedding`` or
    ``EmbeddingBag`` with ``sparse=True`` (the only sparse gradients DDP expects)."""
    known = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
    }
    return all(id(p) in known for p in zoo.sparse_parameters(model))


def set_sparse(model: nn.Module, sparse: bool) -> None:
    """Set the ``sparse`` flag (sparse gradients) of every submodule that has one."""
    for module in model.modules():
        if isinstance(getattr(module, "sparse", None), bool):
            module.sparse = sparse


def make_optimizers(
    model: nn.Module, options: TrainOptions, zoo: Any
) -> tuple[list[torch.optim.Optimizer], list[nn.Parameter]]:
    """The optimisers of ``model`` and its dense parameters: ``SparseAdam`` for the tables of
    ``zoo.sparse_parameters`` (when ``options.sparse``), Adam for the rest (AdamW when
    ``options.weight_decay > 0``)."""
    sparse_ids = set()
    sparse = []
    if options.sparse:
        for p in zoo.sparse_parameters(model):
            if p.requires_grad and id(p) not in sparse_ids:
                sparse_ids.add(id(p))
                sparse.append(p)
    dense = [p for p in model.parameters() if p.requires_grad and id(p) not in sparse_ids]
    optimizers: list[torch.optim.Optimizer] = []
    if dense:
        if options.weight_decay > 0:
            optimizers.append(
                torch.optim.AdamW(dense, lr=options.lr, weight_decay=options.weight_decay)
            )
        else:
            optimizers.append(torch.optim.Adam(dense, lr=options.lr))
    if sparse:
        optimizers.append(torch.optim.SparseAdam(sparse, lr=options.lr))
    return optimizers, dense


def optimizer_step(
    model: nn.Module,
    split: EncodedSplit,
    batch: np.ndarray,
    optimizers: Sequence[torch.optim.Optimizer],
    *,
    world: int = 1,
    rank: int = 0,
    clip_norm: float | None = None,
    clip_params: Sequence[nn.Parameter] = (),
    constrain: Callable[[], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One optimiser step on this rank's shard ``batch[rank::world]`` of a global batch.

    ``constrain`` (the zoo model's ``apply_constraints``, e.g. max-norm on the head's rows) runs
    after the step; ``model`` may be a wrapper (DDP, compiled), so it is passed, not looked up.
    The loss is ``sum(cross-entropy over the shard) * world / len(batch)``: DDP averages the
    ranks' gradients, so the step follows the gradient of the mean loss over the global batch
    whatever the shard sizes. Every shard is padded to the global batch's longest text.

    Returns the shard's summed loss, correct predictions and size as tensors on the logits'
    device (nothing is read back to the host; :func:`train_step` reads them).
    """
    shard = batch[rank::world]
    pad_to = max(len(split.ids[i]) for i in batch)
    ids, mask = collate([split.ids[i] for i in shard], pad_to=pad_to)
    y = split.labels[torch.as_tensor(shard)]
    logits = model(ids, mask)
    loss_sum = F.cross_entropy(logits, y, reduction="sum")
    (loss_sum * (world / len(batch))).backward()
    if clip_norm is not None and clip_params:
        torch.nn.utils.clip_grad_norm_(clip_params, clip_norm)
    for opt in optimizers:
        opt.step()
    if constrain is not None:
        constrain()
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    correct = (logits.detach().argmax(1) == y).sum()
    count = torch.tensor(len(shard), device=logits.device)
    return loss_sum.detach(), correct, count


def train_step(
    model: nn.Module,
    split: EncodedSplit,
    batch: np.ndarray,
    optimizers: Sequence[torch.optim.Optimizer],
    **kwargs: Any,
) -> tuple[float, int, int]:
    """:func:`optimizer_step` (same arguments) with its shard's summed loss, correct
    predictions and size read as Python numbers."""
    loss, correct, count = optimizer_step(model, split, batch, optimizers, **kwargs)
    return float(loss), int(correct), int(count)
