"""The classification task: seeded, resumable, data-parallel training of a text classifier.

:func:`train` fits a model of the zoo (:mod:`cplxnet.models`) on prepared data
(:func:`cplxnet.data.prepare_data`) and keeps everything in a run folder::

    config.json     model config, training options, data spec, seed, world size, versions
    vocab.json      the vocabulary (training split only)
    labels.json     the label names, in class-index order
    metrics.jsonl   one line per finished epoch (train and dev loss/accuracy, dev macro-F1)
    checkpoint.pt   the state after the last finished epoch (model, optimisers, RNG) for --resume
    best.pt         the weights of the epoch with the best dev accuracy
    results.json    written last, when the run is complete: test accuracy and macro-F1 of best.pt

The dev split chooses the epoch; the test split is scored once, at the end, with ``best.pt``.
Each epoch's batch order is a function of ``(seed, epoch)`` and the checkpoint holds every RNG
state, so :func:`resume` ends with exactly the parameters and metrics of an uninterrupted run.
Checkpoints are plain dicts of tensors, numbers and strings, written atomically (temporary file
+ ``os.replace``) and read with ``torch.load(..., weights_only=True)``. What may be replaced
(``force``), how files are written and what :func:`resume` checks is in :mod:`cplxnet.engine.runs`.

Optimisers: Adam (AdamW when ``weight_decay > 0``) for dense parameters, ``SparseAdam`` for the
embedding tables with sparse gradients (``models.sparse_parameters``): dense Adam over whole
vocabulary tables costs more than the forward pass.

Data parallel: under ``torchrun`` (``torch.distributed`` initialised) the model is wrapped in
``DistributedDataParallel``; every rank takes a disjoint shard of each global batch of
``batch_size`` examples and the loss is scaled so that the averaged gradient is the gradient of
the global batch mean. Only rank 0 writes the run folder.

This module holds :func:`train`, :func:`resume` and :class:`ClassifyTask`, the classifier's
side of the training loop every task shares (:func:`cplxnet.engine.fit`: rounds, checkpoints,
resume, early stopping, data parallelism); the other parts are :mod:`cplxnet.engine.options`
(:class:`TrainOptions`), :mod:`cplxnet.engine.optimization` (optimisers, :func:`train_step`),
:mod:`cplxnet.engine.metrics`, :mod:`cplxnet.tasks.classify.inference` (:func:`load_run`,
:func:`evaluate_run`, :func:`predict`) and :mod:`cplxnet.engine.runtime` (seeds, RNG states, rank,
progress). Their public names are importable from here too.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ...data import (
    PAD_ID,
    DataError,
    EncodedSplit,
    PreparedData,
    batch_indices,
    prepare_data,
    read_word_vectors,
)
from ...engine.checkpoints import read_checkpoint
from ...engine.loop import LoopState, fit, new_run_config, resume_notes, take_run_folder
from ...engine.metrics import evaluate, macro_f1
from ...engine.optimization import (
    ddp_handles_sparse,
    make_optimizers,
    optimizer_step,
    set_sparse,
    train_step,
)
from ...engine.options import TrainOptions
from ...engine.runs import (
    RUN_FILES,
    RunError,
    RunFolder,
    begin_resume,
    check_data_unchanged,
    check_model_memory,
    check_run_started,
    data_hashes,
    load_checkpoint,
    record_changed_data,
    save_checkpoint,
    write_json,
)
from ...engine.runtime import (
    Logger,
    dist_info,
    progress,
    resolve_zoo,
    rng_state,
    seed_everything,
    set_rng_state,
    versions,
)
from ...utils import count_parameters
from .inference import (
    LoadedRun,
    build_run_model,
    evaluate_run,
    load_run,
    load_vocab_and_labels,
    predict,
    read_classify_config,
)

__all__ = [
    "TrainOptions",
    "RunError",
    "train",
    "resume",
    "evaluate",
    "macro_f1",
    "load_run",
    "LoadedRun",
    "evaluate_run",
    "predict",
    "save_checkpoint",
    "load_checkpoint",
    "seed_everything",
    "RUN_FILES",
    "train_step",
    "ClassifyTask",
    "rng_state",
    "set_rng_state",
    "progress",
    "versions",
]


# ------------------------------------------------------------------------------------------------
# preparing a run


def _check_lengths(config: Any, data: PreparedData) -> None:
    """The longest text must fit the model's ``max_len`` (unless truncation was asked for)."""
    limit = getattr(config, "max_len", None)
    if limit is None:
        return
    for name in ("train", "dev", "test"):
        split: EncodedSplit = getattr(data, name)
        for ids, ex in zip(split.ids, split.examples):
            if len(ids) > limit:
                raise DataError(
                    f"{ex.where}: the text has {len(ids)} tokens but the model's max_len is "
                    f"{limit}; pass --max-len N to truncate texts to N tokens (a larger "
                    "--max-len also raises the model's limit)"
                )


def _fit_config(config: Any, data: PreparedData) -> Any:
    """The model config with the data's vocabulary size, classes, padding id and max_len."""
    changes = {"vocab_size": len(data.vocab), "num_classes": len(data.labels)}
    names = {f.name for f in dataclasses.fields(config)}
    if "padding_idx" in names:
        changes["padding_idx"] = PAD_ID
    if data.spec.max_len is not None and "max_len" in names:
        changes["max_len"] = data.spec.max_len
    return dataclasses.replace(config, **{k: v for k, v in changes.items() if k in names})


def _load_vectors(model: nn.Module, vectors: str, data: PreparedData, log: Logger) -> dict:
    """Initialise the model's word table from a word-vector file; returns what config.json
    records about it."""
    wv = read_word_vectors(vectors, data.vocab)
    load = getattr(model, "load_word_vectors", None)
    if load is None:
        raise RunError(f"{type(model).__name__} cannot load pretrained word vectors")
    try:
        load(wv.vectors, wv.found)
    except (ValueError, TypeError) as err:
        raise DataError(f"{vectors}: {err}") from None
    log(
        f"word vectors: {wv.num_found} of {len(data.vocab) - 2} vocabulary words found in "
        f"{vectors} (dim {wv.dim})"
    )
    return {
        "path": os.path.abspath(vectors),
        "dim": wv.dim,
        "found": wv.num_found,
        "vocab": len(data.vocab) - 2,
    }


def train(
    config: Any,
    data: PreparedData,
    run_dir: str,
    options: TrainOptions | None = None,
    *,
    force: bool = False,
    vectors: str | None = None,
    quiet: bool = False,
    zoo: Any = None,
    callback: Callable[[int, dict], None] | None = None,
) -> dict:
    """Train a new model and return the final results (also in ``run_dir/results.json``).

    Args:
        config: a model config of the zoo (``make_config``); its vocabulary size, number
            of classes, padding id (and ``max_len`` when ``data.spec.max_len`` is set) are taken
            from ``data``.
        data: prepared splits, vocabulary and labels (:func:`cplxnet.data.prepare_data`).
        run_dir: the run folder to create (see the module docstring).
        options: training options (:class:`TrainOptions`).
        force: replace an existing run folder, only a cplxnet run folder holding nothing but its
            run files, or an empty one (:func:`cplxnet.engine.runs.check_replaceable`); the new run
            trains in a sibling folder and takes its place after its first checkpoint.
        vectors: a GloVe/word2vec text file to initialise the word table (amplitudes of a
            complex table).
        quiet: no progress bar and no per-epoch lines.
        zoo: the zoo module (default :mod:`cplxnet.models`): ``build_model``, ``config_from_dict``
            and ``sparse_parameters``.
        callback: called as ``callback(epoch, metrics)`` after each epoch is saved.
    """
    options = options or TrainOptions()
    zoo = resolve_zoo(zoo)
    world, rank = dist_info()
    config = _fit_config(config, data)
    _check_lengths(config, data)
    log = Logger(quiet, rank)
    check_model_memory(config, zoo)

    seed_everything(options.seed)
    model = zoo.build_model(config)
    vector_info = None if vectors is None else _load_vectors(model, vectors, data, log)

    run_config = new_run_config(config, options, data.spec.to_dict(), tail={
        "vectors": vector_info, "data_sha256": data_hashes(data.spec)})  # fmt: skip
    folder = take_run_folder(run_dir, force)
    try:
        if rank == 0:
            write_json(os.path.join(folder.path, "config.json"), run_config)
            write_json(os.path.join(folder.path, "vocab.json"), data.vocab.to_dict(), indent=None)
            write_json(os.path.join(folder.path, "labels.json"), data.labels.labels, indent=None)
        log(data.summary())
        return _fit(model, data, folder, options, zoo, quiet, callback, state=None)
    except BaseException:
        folder.abort()  # before the first checkpoint: remove what this run wrote
        raise
    finally:
        folder.release()


def resume(
    run_dir: str,
    *,
    epochs: int | None = None,
    quiet: bool = False,
    zoo: Any = None,
    callback: Callable[[int, dict], None] | None = None,
    allow_changed_data: bool = False,
) -> dict:
    """Continue an interrupted run from ``checkpoint.pt`` to the end of its planned epochs.

    The result (parameters, metrics, ``results.json``) equals that of an uninterrupted run.
    ``epochs`` sets the planned number of epochs (to extend a finished or early-stopped run; its
    ``results.json`` is then removed until the new end). A data file whose SHA-256 differs from
    the one recorded at the start is an error unless ``allow_changed_data``.
    """
    zoo = resolve_zoo(zoo)
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found; give the folder of an earlier run")
    # rank 0 owns the folder (its lock) before it reads or changes anything
    folder = take_run_folder(run_dir, None)
    try:
        return _resume(folder, epochs, quiet, zoo, callback, allow_changed_data)
    finally:
        folder.release()


def _resume(
    folder: RunFolder,
    epochs: int | None,
    quiet: bool,
    zoo: Any,
    callback: Callable[[int, dict], None] | None,
    allow_changed_data: bool,
) -> dict:
    run_dir = folder.path
    rank = dist_info()[1]
    log = Logger(quiet, rank)
    run_config, config, options, spec = read_classify_config(run_dir, zoo)
    check_run_started(run_dir, "epoch ended")
    state = read_checkpoint(os.path.join(run_dir, "checkpoint.pt"), "classify")
    options, done = _resumed_options(run_dir, run_config, state, options, epochs)
    for note in resume_notes(run_config):
        log(note)
    if not allow_changed_data:
        check_data_unchanged(
            spec,
            run_config.get("data_sha256") or {},
            run_dir,
            "resume on the original file, or pass --allow-changed-data to continue on the "
            "changed one",
        )
    elif "data_sha256" in run_config:
        record_changed_data(run_config, "data_sha256", data_hashes(spec))
    vocab, labels = load_vocab_and_labels(run_dir, config)
    data = prepare_data(
        spec, vocab=vocab, labels=labels, model_max_len=getattr(config, "max_len", None)
    )
    model = build_run_model(config, run_dir, zoo)

    def start() -> None:  # the checkpoint fits: only now change the run folder
        if rank == 0:
            begin_resume(run_dir, run_config, done)
        log(f"resuming {run_dir} after epoch {state['epoch']} of {options.epochs}")

    return _fit(model, data, folder, options, zoo, quiet, callback, state=state, start=start)


def _resumed_options(
    run_dir: str, run_config: dict, state: dict, options: TrainOptions, epochs: int | None
) -> tuple[TrainOptions, bool]:
    """The options to resume with (``epochs`` extends the plan, in ``run_config`` and ``state``
    too) and whether the run has a ``results.json``; a run with nothing left to train is an
    error."""
    if epochs is not None and (epochs != options.epochs or state.get("stopped")):
        if epochs < state["epoch"]:
            raise RunError(
                f"{run_dir} already ran {state['epoch']} epochs; --epochs {epochs} is less"
            )
        options = dataclasses.replace(options, epochs=epochs)
        run_config["train"] = dataclasses.asdict(options)
        state["stopped"] = False
    done = os.path.exists(os.path.join(run_dir, "results.json"))
    if done and (state["epoch"] >= options.epochs or state.get("stopped")):
        how = "stopped early after" if state.get("stopped") else "finished"
        raise RunError(
            f"run {run_dir} is already complete ({how} epoch {state['epoch']}; results.json "
            f"exists); pass --epochs N with N > {state['epoch']} to train it for more epochs"
        )
    return options, done


class ClassifyTask:
    """A text classifier as a task of the training loop (:class:`cplxnet.engine.Task`): a round
    is an epoch of shuffled, length-bucketed batches (each rank takes its shard of every global
    batch, :func:`cplxnet.engine.optimization.train_step`); dev accuracy chooses the best epoch."""

    kind = "classify"

    def __init__(self, data: PreparedData, options: TrainOptions, zoo: Any, model: nn.Module):
        self.data, self.options, self.zoo, self.model = data, options, zoo, model
        self.world, self.rank = 1, 0

    def prepare(self, model: nn.Module, world: int, rank: int, log: Logger):
        """Choose the tables' gradients, wrap the model (DDP, compile) and make the optimisers."""
        options, zoo = self.options, self.zoo
        self.world, self.rank = world, rank
        # the trainer chooses the tables' gradients, whatever the config says: sparse with
        # SparseAdam (a step touches only the rows of the batch's tokens) unless --dense
        set_sparse(model, options.sparse)
        if not options.sparse:
            pass
        elif options.compile and zoo.sparse_parameters(model):
            # torch.compile (2.13) fails on the sparse backward of cplxnet's packed complex tables
            set_sparse(model, False)
            log("note: --compile uses dense gradients for the embedding tables")
        elif world > 1 and not ddp_handles_sparse(model, zoo):
            # DDP reduces sparse gradients only for torch's own Embedding/EmbeddingBag; other
            # sparse tables (cplxnet's packed complex Embedding, encodings' tables) go dense.
            set_sparse(model, False)
            log("note: data-parallel training uses dense gradients for the embedding tables")
        forward = model
        if world > 1:
            forward = nn.parallel.DistributedDataParallel(model)
        if options.compile:
            forward = torch.compile(forward)
        self.optimizers, self.dense = make_optimizers(model, options, zoo)
        return forward, self.optimizers

    def _steps_left(self, state: LoopState) -> bool:
        return self.options.max_steps is None or state.step < self.options.max_steps

    def done(self, state: LoopState) -> bool:
        return state.evaluations >= self.options.epochs or not self._steps_left(state)

    def round(self, state: LoopState) -> list:
        o = self.options
        return batch_indices(self.data.train.lengths(), o.batch_size, shuffle=True,
                             bucket=o.bucket, seed=o.seed, epoch=state.evaluations,
                             min_batch=self.world)  # fmt: skip

    def round_label(self, state: LoopState) -> str:
        return f"epoch {state.evaluations + 1}/{self.options.epochs}"

    def step(self, forward: nn.Module, batch: Any, step: int) -> torch.Tensor:
        loss, correct, count = optimizer_step(
            forward, self.data.train, batch, self.optimizers, world=self.world,
            rank=self.rank, clip_norm=self.options.clip_norm, clip_params=self.dense,
            constrain=getattr(self.model, "apply_constraints", None),
        )  # fmt: skip
        return torch.stack([loss.double(), correct.double(), count.double()])

    def round_over(self, state: LoopState) -> bool:
        return not self._steps_left(state)

    def postfix(self, totals: torch.Tensor, steps: int) -> dict[str, str]:
        return {"loss": f"{totals[0] / totals[2]:.4f}", "acc": f"{totals[1] / totals[2]:.3f}"}

    def train_metrics(self, totals: torch.Tensor, steps: int, state: LoopState) -> dict:
        loss, acc = float(totals[0] / totals[2]), float(totals[1] / totals[2])
        if not math.isfinite(loss):
            raise RunError(
                f"the training loss became {loss} in epoch {state.evaluations + 1}; lower --lr "
                "or set --clip-norm"
            )
        return {"train_loss": loss, "train_accuracy": acc}

    def score_dev(self, model: nn.Module) -> dict:
        return evaluate(model, self.data.dev, self.options.eval_batch_size)

    def improved(self, dev: dict, best: dict | None) -> bool:
        return best is None or dev["accuracy"] > best["dev_accuracy"]

    def best_entry(self, state: LoopState, dev: dict) -> dict:
        return {"epoch": state.evaluations, "dev_accuracy": dev["accuracy"],
                "dev_loss": dev["loss"], "dev_macro_f1": dev["macro_f1"]}  # fmt: skip

    def metrics(self, state, train, dev, improved, seconds, total_seconds) -> dict:
        return {"epoch": state.evaluations, "step": state.step, **train,
                "dev_loss": dev["loss"], "dev_accuracy": dev["accuracy"],
                "dev_macro_f1": dev["macro_f1"], "best": improved,
                "seconds": round(seconds, 3)}  # fmt: skip

    def checkpoint_entries(self, state: LoopState) -> dict:
        return {"epoch": state.evaluations}

    def describe(self, state: LoopState, m: dict, improved: bool) -> str:
        return (
            f"epoch {state.evaluations}/{self.options.epochs}  train loss {m['train_loss']:.4f} "
            f"acc {m['train_accuracy']:.4f}  dev loss {m['dev_loss']:.4f} acc "
            f"{m['dev_accuracy']:.4f} macro-F1 {m['dev_macro_f1']:.4f}"
            f"{'  *best' if improved else ''}  {m['seconds']:.1f}s"
        )

    def callback_key(self, state: LoopState) -> int:
        return state.evaluations

    def stop_message(self, state: LoopState) -> str:
        return f"early stopping: no better dev accuracy for {self.options.patience} epochs"

    def nothing_trained(self) -> str:
        return "no epoch was trained (epochs or max_steps too small)"

    def score_test(self, scorer: nn.Module, log: Logger) -> dict:
        return evaluate(scorer, self.data.test, self.options.eval_batch_size)

    def results(self, model: nn.Module, state: LoopState, test: dict, timing: dict) -> dict:
        best, data = state.best, self.data
        return {
            "test_accuracy": test["accuracy"],
            "test_macro_f1": test["macro_f1"],
            "test_loss": test["loss"],
            "test_size": test["n"],
            "best_epoch": best["epoch"],
            "dev_accuracy": best["dev_accuracy"],
            "dev_macro_f1": best["dev_macro_f1"],
            "epochs_run": state.evaluations,
            "steps": state.step,
            "stopped_early": state.stopped,
            "real_parameters": count_parameters(model, trainable_only=False).total_real,
            "seconds_this_session": round(timing["session_seconds"], 1),
            "splits": data.splits.sizes(),
            "split": data.splits.description,
        }

    def final_line(self, r: dict, run_dir: str) -> str:
        return (
            f"best dev accuracy {r['dev_accuracy']:.4f} at epoch {r['best_epoch']}; test "
            f"accuracy {r['test_accuracy']:.4f}, macro-F1 {r['test_macro_f1']:.4f} "
            f"(n={r['test_size']}). Run folder: {run_dir}"
        )


def _fit(model, data, folder, options, zoo, quiet, callback, state, start=None) -> dict:
    task = ClassifyTask(data, options, zoo, model)
    return fit(task, model, folder, patience=options.patience, quiet=quiet, callback=callback,
               state=state, start=start)  # fmt: skip
