"""The training loop of every task: steps, evaluation cadence, checkpoints, resume, early
stopping, progress, data parallelism and the run folder's bookkeeping.

A task (:class:`Task`: :class:`cplxnet.tasks.classify.task.ClassifyTask`,
:class:`cplxnet.tasks.lm.task.LMTask`) supplies the data, the model's optimisers, one optimiser
step (its loss), the metrics and the evaluations; :func:`fit` drives it in *rounds*: the steps
between two evaluations (an epoch of a classifier, ``eval_every`` steps of a language model). After
each round the loop sums the round's training statistics over the ranks, scores dev, records the
metrics line, keeps the best dev round, stops early after ``patience`` rounds without a better one,
and (rank 0) writes ``best.pt``, ``checkpoint.pt`` and the line of ``metrics.jsonl``. At the end
the test part is scored once with ``best.pt`` and ``results.json`` written.

The hot loop reads nothing back to the host: a step returns its statistics as a tensor that the
loop sums on the device; they are read at the end of the round (and for the progress bar, only
when it is shown, every :data:`POSTFIX_EVERY` steps).

``checkpoint.pt`` (format :data:`CHECKPOINT_FORMAT`) holds :data:`CHECKPOINT_KEYS` (the state
of the loop, the model, every optimiser and every rank's RNG state) and the task's own entries
(a classifier's ``epoch``); the format 1 checkpoints of either task load through
:func:`upgrade_checkpoint`.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

from .checkpoints import (
    CHECKPOINT_FORMAT,
)
from .runs import (
    RUN_FORMAT,
    RUN_MARKER,
    RunError,
    RunFolder,
    append_line,
    atomic_write,
    load_checkpoint,
    load_weights,
    save_checkpoint,
    write_json,
)
from .runtime import (
    Logger,
    dist_info,
    gather_rng_states,
    on_rank0_first,
    progress,
    set_rng_state,
    versions,
)

__all__ = [
    "POSTFIX_EVERY",
    "LoopState",
    "Task",
    "save_round",
    "fit",
    "load_best",
    "new_run_config",
    "resume_notes",
    "take_run_folder",
]

#: Steps between two updates of a shown progress bar's running loss (a read to the host).
POSTFIX_EVERY = 25


@dataclass
class LoopState:
    """Where a run stands after its finished rounds (what ``checkpoint.pt`` keeps)."""

    step: int = 0
    evaluations: int = 0
    history: list[dict] = field(default_factory=list)
    best: dict | None = None
    since_best: int = 0
    stopped: bool = False
    seconds: float = 0.0
    cpu_seconds: float = 0.0


class Task(Protocol):
    """What :func:`fit` asks of a task (``kind``: ``"classify"`` or ``"lm"``)."""

    kind: str

    def prepare(
        self, model: nn.Module, world: int, rank: int, log: Logger
    ) -> tuple[nn.Module, list[torch.optim.Optimizer]]:
        """The module to call forward on (DDP, compiled) and the optimisers."""

    def done(self, state: LoopState) -> bool:
        """True when the planned training is over (before a round)."""

    def round(self, state: LoopState) -> Sequence[Any]:
        """The batches of the next round (what :meth:`step` takes)."""

    def round_label(self, state: LoopState) -> str:
        """The progress bar's label of the next round."""

    def step(self, forward: nn.Module, batch: Any, step: int) -> torch.Tensor:
        """One optimiser step on this rank's part of ``batch``; its statistics (float64, summed
        over the round and the ranks by the loop)."""

    def round_over(self, state: LoopState) -> bool:
        """True to end the round after the step just taken (a step budget)."""

    def postfix(self, totals: torch.Tensor, steps: int) -> dict[str, str]:
        """The progress bar's running figures of this rank."""

    def train_metrics(self, totals: torch.Tensor, steps: int, state: LoopState) -> dict:
        """The round's training metrics from the summed statistics (a non-finite loss is a
        :class:`RunError`)."""

    def score_dev(self, model: nn.Module) -> dict:
        """The dev scores."""

    def improved(self, dev: dict, best: dict | None) -> bool:
        """True if ``dev`` beats the best round so far."""

    def best_entry(self, state: LoopState, dev: dict) -> dict:
        """What the loop keeps of the best round (``state`` already counts it)."""

    def metrics(self, state: LoopState, train: dict, dev: dict, improved: bool,
                seconds: float, total_seconds: float) -> dict:  # fmt: skip
        """The metrics.jsonl line of the round just scored."""

    def checkpoint_entries(self, state: LoopState) -> dict:
        """The task's own entries of checkpoint.pt and best.pt."""

    def describe(self, state: LoopState, metrics: dict, improved: bool) -> str:
        """The log line of a round."""

    def callback_key(self, state: LoopState) -> int:
        """The first argument of the user's callback (the epoch or the step)."""

    def stop_message(self, state: LoopState) -> str:
        """The log line of an early stop."""

    def nothing_trained(self) -> str:
        """The error when no round was trained."""

    def score_test(self, scorer: nn.Module, log: Logger) -> dict:
        """The test scores of the best weights."""

    def results(self, model: nn.Module, state: LoopState, test: dict, timing: dict) -> dict:
        """``results.json``."""

    def final_line(self, results: dict, run_dir: str) -> str:
        """The log line after ``results.json`` is written."""


def new_run_config(config: Any, options: Any, data: dict, *, head: dict | None = None,
                   tail: dict | None = None) -> dict:  # fmt: skip
    """``config.json`` of a new run: the run marker, ``head`` (a task's ``"task"``), the model
    config, the training options, ``data``, the seed, ``tail`` (a task's own entries), the world
    size, the number of torch threads, the versions and the time."""
    return {
        RUN_MARKER: RUN_FORMAT,
        **(head or {}),
        "model": dataclasses.asdict(config),
        "train": dataclasses.asdict(options),
        "data": data,
        "seed": options.seed,
        **(tail or {}),
        "world_size": dist_info()[0],
        "threads": torch.get_num_threads(),
        "versions": versions(),
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def resume_notes(run_config: dict) -> list[str]:
    """The notes of a resume whose result will not be bit-identical to an uninterrupted run's:
    another number of processes, or of torch threads (CPU kernels round differently), than the
    run's ``config.json`` records."""
    notes = []
    world, before = dist_info()[0], run_config.get("world_size", 1)
    if world != before:
        notes.append(f"note: resuming a run of {before} process(es) with {world}; the result "
                     "will not be bit-identical to an uninterrupted run")  # fmt: skip
    threads, now = run_config.get("threads"), torch.get_num_threads()
    if threads is not None and threads != now:
        notes.append(f"note: resuming a run trained with {threads} torch thread(s) with {now}; "
                     "the result will not be bit-identical to an uninterrupted run (--threads "
                     f"{threads} keeps it)")  # fmt: skip
    return notes


def take_run_folder(run_dir: str, force: bool | None) -> RunFolder:
    """The run folder ``run_dir``, taken by rank 0 (its lock first: one owner at a time; the
    other ranks raise rank 0's error, if any): a new run's (``force``: it may replace an old run)
    or, with ``force=None``, an existing run's (resume)."""
    if force is None:
        return on_rank0_first(
            lambda: RunFolder.existing(run_dir), lambda: RunFolder.existing(run_dir, lock=False)
        )
    return on_rank0_first(
        lambda: RunFolder(run_dir, force), lambda: RunFolder.existing(run_dir, lock=False)
    )


def _restore(state: dict, model: nn.Module, optimizers: list[torch.optim.Optimizer],
             path: str, run_dir: str, world: int, rank: int) -> LoopState:  # fmt: skip
    """Load a checkpoint's weights, optimiser and RNG states; returns where the run stood."""
    load_weights(model, state["model"], path)
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
            f"{path} does not fit this run ({type(err).__name__} in its optimiser state or "
            "random state); restore the run's own file or start the run again with --force"
        ) from None
    return LoopState(
        step=state["step"], evaluations=state["evaluations"], history=list(state["history"]),
        best=state["best"], since_best=state["since_best"], stopped=state["stopped"],
        seconds=float(state["seconds"]), cpu_seconds=float(state["cpu_seconds"]),
    )  # fmt: skip


def save_round(folder: RunFolder, task: Task, model: nn.Module,
          optimizers: list[torch.optim.Optimizer], state: LoopState, rngs: list[dict],
          improved: bool, log: Logger) -> None:  # fmt: skip
    """Write ``best.pt`` (when the round improved), ``checkpoint.pt`` and the metrics line; a
    new run (replacing an old one: in its place) is kept from its first ``checkpoint.pt`` on,
    so that an interrupt after it leaves a run to resume."""
    head = {"format": CHECKPOINT_FORMAT, "task": task.kind, "step": state.step,
            "evaluations": state.evaluations, **task.checkpoint_entries(state)}  # fmt: skip
    if improved:
        save_checkpoint({**head, "model": model.state_dict(), "best": dict(state.best)},
                        os.path.join(folder.path, "best.pt"))  # fmt: skip
    save_checkpoint(
        {**head, "model": model.state_dict(),
         "optimizers": [opt.state_dict() for opt in optimizers], "rng": rngs,
         "history": state.history, "best": state.best, "since_best": state.since_best,
         "stopped": state.stopped, "seconds": state.seconds, "cpu_seconds": state.cpu_seconds},
        os.path.join(folder.path, "checkpoint.pt"),
    )  # fmt: skip
    folder.promote()
    append_line(os.path.join(folder.path, "metrics.jsonl"), json.dumps(state.history[-1]))
    if folder.note:
        log(folder.note)
        folder.note = ""


def load_best(model: nn.Module, folder: RunFolder) -> nn.Module:
    """A copy of ``model`` with the weights of ``best.pt`` (read by rank 0 and sent to the
    others); the copy draws no random numbers and ``model`` keeps its state."""
    world, rank = dist_info()
    path = os.path.join(folder.path, "best.pt")
    best = load_checkpoint(path, keys={"model": dict}) if rank == 0 else None
    if world > 1:
        holder = [best]
        dist.broadcast_object_list(holder, src=0)
        best = holder[0]
    scorer = copy.deepcopy(model)
    load_weights(scorer, best["model"], path)
    return scorer


def fit(
    task: Task,
    model: nn.Module,
    folder: RunFolder,
    *,
    patience: int | None,
    quiet: bool,
    callback: Callable[[int, dict], None] | None = None,
    state: dict | None = None,
    start: Callable[[], None] | None = None,
) -> dict:
    """Train ``model`` from ``state`` (a :func:`read_checkpoint`, or ``None`` for a new run) to
    the task's planned end, score the test part with ``best.pt`` and write ``results.json``;
    ``start`` runs once the checkpoint is loaded (the first change to a resumed folder)."""
    world, rank = dist_info()
    log = Logger(quiet, rank)
    forward, optimizers = task.prepare(model, world, rank, log)
    loop = LoopState()
    if state is not None:
        path = os.path.join(folder.path, "checkpoint.pt")
        loop = _restore(state, model, optimizers, path, folder.final, world, rank)
        best = os.path.join(folder.path, "best.pt")
        if loop.evaluations and not os.path.isfile(best):  # every rank reads this folder
            raise RunError(
                f"{best} is missing: the run has lost the weights of its best evaluation, which "
                "its test score needs; restore the file, or start the run again with --force"
            )
        if loop.evaluations:  # a damaged or foreign best.pt stops the run before it changes
            load_best(model, folder)
        if start is not None:
            start()
        if rank == 0:  # metrics.jsonl may have lines the checkpoint never saw: rewrite it
            atomic_write(
                os.path.join(folder.path, "metrics.jsonl"),
                lambda fh: fh.writelines(json.dumps(m) + "\n" for m in loop.history),
            )
    base_seconds, base_cpu = loop.seconds, loop.cpu_seconds
    started, cpu_started = time.perf_counter(), time.process_time()
    while not loop.stopped and not task.done(loop):
        t0 = time.perf_counter()
        batches = task.round(loop)
        totals: torch.Tensor | None = None
        steps = 0
        bar = progress(len(batches), task.round_label(loop), quiet, rank)
        try:
            for batch in batches:
                stats = task.step(forward, batch, loop.step)
                loop.step += 1
                steps += 1
                totals = stats if totals is None else totals + stats
                bar.update(1)
                if not bar.disable and steps % POSTFIX_EVERY == 0:
                    bar.set_postfix(task.postfix(totals, steps))
                if task.round_over(loop):
                    break
        finally:
            bar.close()
        if totals is None:
            break
        if world > 1:
            dist.all_reduce(totals)
        train = task.train_metrics(totals, steps, loop)
        dev = task.score_dev(model)
        loop.evaluations += 1
        improved = task.improved(dev, loop.best)
        elapsed = time.perf_counter() - started
        metrics = task.metrics(loop, train, dev, improved, seconds=time.perf_counter() - t0,
                               total_seconds=base_seconds + elapsed)  # fmt: skip
        loop.history.append(metrics)
        if improved:
            loop.best, loop.since_best = task.best_entry(loop, dev), 0
        else:
            loop.since_best += 1
        loop.stopped = patience is not None and loop.since_best >= patience
        loop.seconds = base_seconds + elapsed
        loop.cpu_seconds = base_cpu + time.process_time() - cpu_started
        rngs = gather_rng_states(world)
        if rank == 0:
            save_round(folder, task, model, optimizers, loop, rngs, improved, log)
        log(task.describe(loop, metrics, improved))
        if callback is not None:
            callback(task.callback_key(loop), metrics)
        if loop.stopped:
            log(task.stop_message(loop))
    loop.seconds = base_seconds + time.perf_counter() - started
    loop.cpu_seconds = base_cpu + time.process_time() - cpu_started
    if loop.best is None:
        raise RunError(task.nothing_trained())
    t0 = time.perf_counter()
    test = task.score_test(load_best(model, folder), log)
    timing = {"train_seconds": loop.seconds, "train_cpu_seconds": loop.cpu_seconds,
              "test_seconds": time.perf_counter() - t0,
              "session_seconds": time.perf_counter() - started}  # fmt: skip
    results = task.results(model, loop, test, timing)
    if rank == 0:
        write_json(os.path.join(folder.path, "results.json"), results)
    log(task.final_line(results, folder.final))
    return results
