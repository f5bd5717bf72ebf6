"""What a classification run's checkpoints hold and how training state goes in and out of them.

``checkpoint.pt`` holds the state after the last finished epoch (:class:`TrainState`, the model,
the optimisers and every rank's RNG state) for :func:`cplxnet.train.resume`; ``best.pt`` holds the
weights of the epoch with the best dev accuracy, the ones :func:`score_best` scores.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from .data import PreparedData
from .metrics import evaluate
from .runs import (
    RunError,
    RunFolder,
    append_line,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from .runtime import Logger, dist_info, set_rng_state
from .train_options import TrainOptions

__all__ = [
    "CHECKPOINT_FORMAT",
    "RESUME_KEYS",
    "TrainState",
    "restore_state",
    "save_epoch",
    "score_best",
]

CHECKPOINT_FORMAT = 1
#: The entries of ``checkpoint.pt`` that :func:`cplxnet.train.resume` needs, with their types.
RESUME_KEYS: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "epoch": int,
    "step": int,
    "model": dict,
    "optimizers": list,
    "rng": list,
    "history": list,
    "best": (dict, type(None)),
    "since_best": int,
}


@dataclass
class TrainState:
    """Where a run stands after its finished epochs (what ``checkpoint.pt`` keeps)."""

    history: list[dict] = field(default_factory=list)
    best: dict | None = None  # epoch, dev accuracy, loss and macro-F1 of the best dev epoch
    since_best: int = 0
    epoch: int = 0
    step: int = 0
    stopped: bool = False

    def steps_left(self, options: TrainOptions) -> bool:
        return options.max_steps is None or self.step < options.max_steps

    def record(self, metrics: dict, dev: dict, patience: int | None) -> bool:
        """Add a finished epoch's metrics; True if its dev accuracy is the best so far."""
        improved = self.best is None or dev["accuracy"] > self.best["dev_accuracy"]
        metrics["best"] = improved
        self.history.append(metrics)
        if improved:
            self.best = {
                "epoch": self.epoch,
                "dev_accuracy": dev["accuracy"],
                "dev_loss": dev["loss"],
                "dev_macro_f1": dev["macro_f1"],
            }
            self.since_best = 0
        else:
            self.since_best += 1
        if patience is not None and self.since_best >= patience:
            self.stopped = True
        return improved


def restore_state(
    state: dict,
    model: nn.Module,
    optimizers: list[torch.optim.Optimizer],
    checkpoint: str,
    run_dir: str,
    world: int,
    rank: int,
) -> TrainState:
    """Load a checkpoint's weights, optimiser and RNG states; returns where the run stood."""
    load_weights(model, state["model"], checkpoint)
    if len(optimizers) != len(state["optimizers"]):
        raise RunError(
            f"{run_dir} was trained with {len(state['optimizers'])} optimiser(s) and this "
            f"setup has {len(optimizers)} (sparse tables are dense under data-parallel "
            "training); resume with the number of processes the run started with"
        )
    try:
        for opt, opt_state in zip(optimizers, state["optimizers"]):
            opt.load_state_dict(opt_state)
        rngs = state["rng"]
        set_rng_state(rngs[rank] if len(rngs) == world else rngs[0])
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError, AttributeError) as err:
        raise RunError(
            f"{checkpoint} does not fit this run ({type(err).__name__} in its "
            "optimiser or random state); restore the run's own file or start the run again "
            "with --force"
        ) from None
    return TrainState(
        history=list(state["history"]),
        best=state["best"],
        since_best=state["since_best"],
        epoch=state["epoch"],
        step=state["step"],
        stopped=bool(state.get("stopped", False)),
    )


def save_epoch(
    folder: RunFolder,
    model: nn.Module,
    optimizers: list[torch.optim.Optimizer],
    standing: TrainState,
    rngs: list[dict],
    improved: bool,
    log: Logger,
) -> None:
    """Write ``best.pt`` (when the epoch improved), ``checkpoint.pt`` and the metrics line
    (rank 0 only); a new run replacing an old one takes its place now."""
    path = folder.path
    if improved:
        save_checkpoint(
            {
                "format": CHECKPOINT_FORMAT,
                "epoch": standing.epoch,
                "model": model.state_dict(),
                "dev": dict(standing.best),
            },
            os.path.join(path, "best.pt"),
        )
    save_checkpoint(
        {
            "format": CHECKPOINT_FORMAT,
            "epoch": standing.epoch,
            "step": standing.step,
            "model": model.state_dict(),
            "optimizers": [opt.state_dict() for opt in optimizers],
            "rng": rngs,
            "history": standing.history,
            "best": standing.best,
            "since_best": standing.since_best,
            "stopped": standing.stopped,
        },
        os.path.join(path, "checkpoint.pt"),
    )
    append_line(os.path.join(path, "metrics.jsonl"), json.dumps(standing.history[-1]))
    folder.promote()
    if folder.note:
        log(folder.note)
        folder.note = ""


def score_best(model: nn.Module, folder: RunFolder, data: PreparedData, batch_size: int) -> dict:
    """The test split scored once, with the best dev epoch's weights (on a copy of the model, so
    the in-memory state stays the last epoch's)."""
    world, rank = dist_info()
    best_path = os.path.join(folder.path, "best.pt")
    best_state = load_checkpoint(best_path, keys={"model": dict}) if rank == 0 else None
    if world > 1:
        holder = [best_state]
        dist.broadcast_object_list(holder, src=0)
        best_state = holder[0]
    scorer = copy.deepcopy(model)  # draws no random numbers
    load_weights(scorer, best_state["model"], best_path)
    return evaluate(scorer, data.test, batch_size)
