"""The training engine: seeded, resumable, data-parallel training of a text classifier.

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
(``force``), how files are written and what :func:`resume` checks is in :mod:`cplxnet.runs`.

Optimisers: Adam (AdamW when ``weight_decay > 0``) for dense parameters, ``SparseAdam`` for the
embedding tables with sparse gradients (``models.sparse_parameters``): dense Adam over whole
vocabulary tables costs more than the forward pass (see ``performance.md``).

Data parallel: under ``torchrun`` (``torch.distributed`` initialised) the model is wrapped in
``DistributedDataParallel``; every rank takes a disjoint shard of each global batch of
``batch_size`` examples and the loss is scaled so that the averaged gradient is the gradient of
the global batch mean. Only rank 0 writes the run folder.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .data import (
    PAD_ID,
    DataError,
    DataSpec,
    EncodedSplit,
    LabelMap,
    PreparedData,
    Tokenizer,
    Vocab,
    batch_indices,
    collate,
    encode_split,
    encode_texts,
    prepare_data,
    read_examples,
    read_word_vectors,
)
from .runs import (
    RUN_FILES,
    RUN_FORMAT,
    RUN_MARKER,
    RunError,
    RunFolder,
    atomic_write,
    check_data_unchanged,
    check_model_memory,
    check_new_run_dir,
    data_hashes,
    load_checkpoint,
    load_weights,
    read_run_config,
    save_checkpoint,
    write_json,
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
]

CHECKPOINT_FORMAT = 1
#: The entries of ``checkpoint.pt`` that :func:`resume` needs, with their types.
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


# ------------------------------------------------------------------------------------------------
# small utilities


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _dist() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def _zoo(zoo: Any) -> Any:
    if zoo is not None:
        return zoo
    try:
        import cplxnet.models as models
    except ImportError as err:  # pragma: no cover - models ships with cplxnet
        raise RunError(f"the model zoo (package 'models') cannot be imported: {err}") from err
    return models


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
    for name in ("cplxnet", "complextorch"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def _rng_state() -> dict[str, Any]:
    """Every RNG state as tensors and numbers (loadable with ``weights_only=True``)."""
    version, mt, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "python_version": version,
        "python_state": torch.tensor(mt, dtype=torch.int64),
        "python_gauss": gauss,
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_pos": int(pos),
        "numpy_has_gauss": int(has_gauss),
        "numpy_gauss": float(cached),
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(
        (state["python_version"], tuple(state["python_state"].tolist()), state["python_gauss"])
    )
    np.random.set_state(
        (
            "MT19937",
            state["numpy_keys"].numpy().astype(np.uint32),
            state["numpy_pos"],
            state["numpy_has_gauss"],
            state["numpy_gauss"],
        )
    )


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
def _logits(model: nn.Module, ids: Sequence[Sequence[int]], batch_size: int) -> torch.Tensor:
    """Logits ``(N, C)`` of id sequences, in their order (batched by length, padded at the end)."""
    was_training = model.training
    model.eval()
    out: list[tuple[np.ndarray, torch.Tensor]] = []
    lengths = [len(x) for x in ids]
    for index in batch_indices(lengths, batch_size, shuffle=False, bucket=True):
        x, mask = collate([ids[i] for i in index])
        out.append((index, model(x, mask).float()))
    model.train(was_training)
    logits = torch.empty(len(ids), out[0][1].shape[1]) if out else torch.empty(0, 0)
    for index, value in out:
        logits[torch.as_tensor(index)] = value
    return logits


def evaluate(model: nn.Module, split: EncodedSplit, batch_size: int = 256) -> dict[str, float]:
    """Loss, accuracy and macro-F1 of ``model`` on a labelled split (eval mode, no gradients)."""
    if len(split) == 0:
        raise DataError("cannot evaluate on an empty split")
    logits = _logits(model, split.ids, batch_size)
    pred = logits.argmax(1)
    return {
        "loss": float(F.cross_entropy(logits, split.labels)),
        "accuracy": int((pred == split.labels).sum()) / len(split),
        "macro_f1": macro_f1(split.labels, pred),
        "n": len(split),
    }


# ------------------------------------------------------------------------------------------------
# run folder


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


def _ddp_handles_sparse(model: nn.Module, zoo: Any) -> bool:
    """True if every sparse-gradient parameter is the weight of a ``torch.nn.Embedding`` or
    ``EmbeddingBag`` with ``sparse=True`` (the only sparse gradients DDP expects)."""
    known = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
    }
    return all(id(p) in known for p in zoo.sparse_parameters(model))


def _set_sparse(model: nn.Module, sparse: bool) -> None:
    for module in model.modules():
        if isinstance(getattr(module, "sparse", None), bool):
            module.sparse = sparse


# ------------------------------------------------------------------------------------------------
# training


class _Logger:
    def __init__(self, quiet: bool, rank: int) -> None:
        self.on = not quiet and rank == 0

    def __call__(self, message: str) -> None:
        if self.on:
            print(message, flush=True)


def _progress(total: int, desc: str, quiet: bool, rank: int):
    from tqdm.auto import tqdm

    disable = quiet or rank != 0 or not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=disable, leave=False, dynamic_ncols=True)


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
            run files, or an empty one (:func:`cplxnet.runs.check_replaceable`); the new run
            trains in a sibling folder and takes its place after its first checkpoint.
        vectors: a GloVe/word2vec text file to initialise the word table (amplitudes of a
            complex table).
        quiet: no progress bar and no per-epoch lines.
        zoo: the zoo module (default :mod:`cplxnet.models`): ``build_model``, ``config_from_dict``
            and ``sparse_parameters``.
        callback: called as ``callback(epoch, metrics)`` after each epoch is saved.
    """
    options = options or TrainOptions()
    zoo = _zoo(zoo)
    world, rank = _dist()
    config = _fit_config(config, data)
    _check_lengths(config, data)
    log = _Logger(quiet, rank)
    check_model_memory(config, zoo)

    seed_everything(options.seed)
    model = zoo.build_model(config)
    vector_info = None
    if vectors is not None:
        wv = read_word_vectors(vectors, data.vocab)
        load = getattr(model, "load_word_vectors", None)
        if load is None:
            raise RunError(f"{type(model).__name__} cannot load pretrained word vectors")
        try:
            load(wv.vectors, wv.found)
        except (ValueError, TypeError) as err:
            raise DataError(f"{vectors}: {err}") from None
        vector_info = {
            "path": os.path.abspath(vectors),
            "dim": wv.dim,
            "found": wv.num_found,
            "vocab": len(data.vocab) - 2,
        }
        log(
            f"word vectors: {wv.num_found} of {len(data.vocab) - 2} vocabulary words found in "
            f"{vectors} (dim {wv.dim})"
        )

    run_config = {
        RUN_MARKER: RUN_FORMAT,
        "model": dataclasses.asdict(config),
        "train": dataclasses.asdict(options),
        "data": data.spec.to_dict(),
        "seed": options.seed,
        "vectors": vector_info,
        "data_sha256": data_hashes(data.spec),
        "world_size": world,
        "versions": _versions(),
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    check_new_run_dir(run_dir, force)  # every rank checks before rank 0 creates it
    if world > 1:
        dist.barrier()
    folder = RunFolder(run_dir, force) if rank == 0 else RunFolder.existing(run_dir)
    try:
        if rank == 0:
            write_json(os.path.join(folder.path, "config.json"), run_config)
            write_json(os.path.join(folder.path, "vocab.json"), data.vocab.to_dict(), indent=None)
            write_json(os.path.join(folder.path, "labels.json"), data.labels.labels, indent=None)
        log(data.summary())
        return _fit(model, config, data, folder, options, zoo, log, quiet, callback, state=None)
    except BaseException:
        folder.abort()  # before the first checkpoint: remove what this run wrote
        raise


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
    zoo = _zoo(zoo)
    world, rank = _dist()
    log = _Logger(quiet, rank)
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found; give the folder of an earlier run")
    run_config = read_run_config(run_dir)
    options = TrainOptions.from_dict(run_config["train"])
    if not os.path.exists(os.path.join(run_dir, "checkpoint.pt")):
        raise RunError(
            f"{run_dir} has no checkpoint.pt: the run stopped before its first epoch ended, so "
            "there is nothing to resume; start it again with the same command and --force"
        )
    state = load_checkpoint(os.path.join(run_dir, "checkpoint.pt"), keys=RESUME_KEYS)
    if state["format"] != CHECKPOINT_FORMAT:
        raise RunError(
            f"{run_dir}/checkpoint.pt has the unknown format {state['format']}; resume it with "
            "the cplxnet version that wrote it"
        )
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
    if world != run_config.get("world_size", 1):
        log(
            f"note: resuming a run of {run_config.get('world_size', 1)} process(es) with {world}; "
            "the result will not be bit-identical to an uninterrupted run"
        )
    config = zoo.config_from_dict(run_config["model"])
    spec = DataSpec.from_dict(run_config["data"])
    if not allow_changed_data:
        check_data_unchanged(
            spec,
            run_config.get("data_sha256") or {},
            run_dir,
            "resume on the original file, or pass --allow-changed-data to continue on the "
            "changed one",
        )
    vocab = Vocab.load(os.path.join(run_dir, "vocab.json"))
    labels = LabelMap.load(os.path.join(run_dir, "labels.json"))
    data = prepare_data(
        spec, vocab=vocab, labels=labels, model_max_len=getattr(config, "max_len", None)
    )
    model = zoo.build_model(config)

    def start() -> None:  # the checkpoint fits: only now change the run folder
        if rank == 0:
            if done:
                os.remove(os.path.join(run_dir, "results.json"))
            write_json(os.path.join(run_dir, "config.json"), run_config)
        log(f"resuming {run_dir} after epoch {state['epoch']} of {options.epochs}")

    folder = RunFolder.existing(run_dir)
    return _fit(
        model, config, data, folder, options, zoo, log, quiet, callback, state=state, start=start
    )


def _make_optimizers(
    model: nn.Module, options: TrainOptions, zoo: Any
) -> tuple[list[torch.optim.Optimizer], list[nn.Parameter]]:
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


def train_step(
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
) -> tuple[float, int, int]:
    """One optimiser step on this rank's shard ``batch[rank::world]`` of a global batch.

    ``constrain`` (the zoo model's ``apply_constraints``, e.g. max-norm on the head's rows) runs
    after the step; ``model`` may be a wrapper (DDP, compiled), so it is passed, not looked up.

    The loss is ``sum(cross-entropy over the shard) * world / len(batch)``: DDP averages the
    ranks' gradients, so the step follows the gradient of the mean loss over the global batch
    whatever the shard sizes. Every shard is padded to the global batch's longest text.
    Returns the shard's summed loss, correct predictions and size.
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
    correct = int((logits.detach().argmax(1) == y).sum())
    return float(loss_sum.detach()), correct, len(shard)


def _gather_rng(world: int) -> list[dict]:
    state = _rng_state()
    if world == 1:
        return [state]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, state)
    return out


def _fit(
    model: nn.Module,
    config: Any,
    data: PreparedData,
    folder: RunFolder,
    options: TrainOptions,
    zoo: Any,
    log: _Logger,
    quiet: bool,
    callback: Callable[[int, dict], None] | None,
    state: dict | None,
    start: Callable[[], None] | None = None,
) -> dict:
    world, rank = _dist()
    run_dir = folder.final  # for messages; files go to folder.path (see RunFolder)

    def path(name: str) -> str:
        return os.path.join(folder.path, name)

    forward_model: nn.Module = model
    # the trainer chooses the tables' gradients, whatever the config says: sparse with SparseAdam
    # (faster: a step touches only the rows of the batch's tokens) unless --dense
    _set_sparse(model, options.sparse)
    if not options.sparse:
        pass
    elif options.compile and zoo.sparse_parameters(model):
        # torch.compile (2.13) fails on the sparse backward of cplxnet's packed complex tables
        _set_sparse(model, False)
        log("note: --compile uses dense gradients for the embedding tables")
    elif world > 1 and not _ddp_handles_sparse(model, zoo):
        # DDP reduces sparse gradients only for torch's own Embedding/EmbeddingBag; other
        # sparse tables (cplxnet's packed complex Embedding, encodings' tables) go dense.
        _set_sparse(model, False)
        log("note: data-parallel training uses dense gradients for the embedding tables")
    if world > 1:
        forward_model = nn.parallel.DistributedDataParallel(model)
    if options.compile:
        forward_model = torch.compile(forward_model)
    optimizers, dense = _make_optimizers(model, options, zoo)

    history: list[dict] = []
    best: dict | None = None
    since_best = 0
    start_epoch = 0
    step = 0
    stopped = False
    if state is not None:
        load_weights(model, state["model"], path("checkpoint.pt"))
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
            _set_rng_state(rngs[rank] if len(rngs) == world else rngs[0])
        except (ValueError, TypeError, KeyError, IndexError, RuntimeError, AttributeError) as err:
            raise RunError(
                f"{path('checkpoint.pt')} does not fit this run ({type(err).__name__} in its "
                "optimiser or random state); restore the run's own file or start the run again "
                "with --force"
            ) from None
        history = list(state["history"])
        best = state["best"]
        since_best = state["since_best"]
        start_epoch = state["epoch"]
        step = state["step"]
        stopped = bool(state.get("stopped", False))
        if start is not None:
            start()
        if rank == 0:  # metrics.jsonl may have a line the checkpoint never saw: rewrite it
            atomic_write(
                path("metrics.jsonl"),
                lambda fh: fh.writelines(json.dumps(m) + "\n" for m in history),
            )

    lengths = data.train.lengths()
    started = time.perf_counter()
    epoch = start_epoch
    while epoch < options.epochs and not stopped:
        if options.max_steps is not None and step >= options.max_steps:
            break
        t0 = time.perf_counter()
        model.train()
        batches = batch_indices(
            lengths,
            options.batch_size,
            shuffle=True,
            bucket=options.bucket,
            seed=options.seed,
            epoch=epoch,
            min_batch=world,
        )
        totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count
        bar = _progress(len(batches), f"epoch {epoch + 1}/{options.epochs}", quiet, rank)
        try:
            for batch in batches:
                loss, correct, count = train_step(
                    forward_model,
                    data.train,
                    batch,
                    optimizers,
                    world=world,
                    rank=rank,
                    clip_norm=options.clip_norm,
                    clip_params=dense,
                    constrain=getattr(model, "apply_constraints", None),
                )
                step += 1
                totals += torch.tensor([loss, correct, count], dtype=torch.float64)
                bar.update(1)
                bar.set_postfix(
                    loss=f"{totals[0] / totals[2]:.4f}", acc=f"{totals[1] / totals[2]:.3f}"
                )
                if options.max_steps is not None and step >= options.max_steps:
                    break
        finally:
            bar.close()
        if world > 1:
            dist.all_reduce(totals)
        train_loss, train_acc = float(totals[0] / totals[2]), float(totals[1] / totals[2])
        if not math.isfinite(train_loss):
            raise RunError(
                f"the training loss became {train_loss} in epoch {epoch + 1}; lower --lr or set "
                "--clip-norm"
            )
        dev = evaluate(model, data.dev, options.eval_batch_size)
        improved = best is None or dev["accuracy"] > best["dev_accuracy"]
        epoch += 1
        metrics = {
            "epoch": epoch,
            "step": step,
            "train_loss": train_loss,
            "train_accuracy": train_acc,
            "dev_loss": dev["loss"],
            "dev_accuracy": dev["accuracy"],
            "dev_macro_f1": dev["macro_f1"],
            "best": improved,
            "seconds": round(time.perf_counter() - t0, 3),
        }
        history.append(metrics)
        if improved:
            best = {
                "epoch": epoch,
                "dev_accuracy": dev["accuracy"],
                "dev_loss": dev["loss"],
                "dev_macro_f1": dev["macro_f1"],
            }
            since_best = 0
        else:
            since_best += 1
        if options.patience is not None and since_best >= options.patience:
            stopped = True
        rngs = _gather_rng(world)
        if rank == 0:
            if improved:
                save_checkpoint(
                    {
                        "format": CHECKPOINT_FORMAT,
                        "epoch": epoch,
                        "model": model.state_dict(),
                        "dev": dict(best),
                    },
                    path("best.pt"),
                )
            save_checkpoint(
                {
                    "format": CHECKPOINT_FORMAT,
                    "epoch": epoch,
                    "step": step,
                    "model": model.state_dict(),
                    "optimizers": [opt.state_dict() for opt in optimizers],
                    "rng": rngs,
                    "history": history,
                    "best": best,
                    "since_best": since_best,
                    "stopped": stopped,
                },
                path("checkpoint.pt"),
            )
            with open(path("metrics.jsonl"), "a", encoding="utf-8") as fh:
                fh.write(json.dumps(metrics) + "\n")
            folder.promote()  # a new run replacing an old one takes its place now
            if folder.note:
                log(folder.note)
                folder.note = ""
        log(
            f"epoch {epoch}/{options.epochs}  train loss {train_loss:.4f} acc {train_acc:.4f}  "
            f"dev loss {dev['loss']:.4f} acc {dev['accuracy']:.4f} macro-F1 "
            f"{dev['macro_f1']:.4f}{'  *best' if improved else ''}  {metrics['seconds']:.1f}s"
        )
        if callback is not None:
            callback(epoch, metrics)
        if stopped:
            log(f"early stopping: no better dev accuracy for {options.patience} epochs")

    if best is None:
        raise RunError("no epoch was trained (epochs or max_steps too small)")
    # Score the test split once, with the best dev epoch's weights (on a copy of the model so
    # the in-memory state stays the last epoch's).
    best_state = load_checkpoint(path("best.pt"), keys={"model": dict}) if rank == 0 else None
    if world > 1:
        holder = [best_state]
        dist.broadcast_object_list(holder, src=0)
        best_state = holder[0]
    scorer = copy.deepcopy(
        model
    )  # keeps the live model's last-epoch state; draws no random numbers
    load_weights(scorer, best_state["model"], path("best.pt"))
    test = evaluate(scorer, data.test, options.eval_batch_size)
    n_params = sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())
    results = {
        "test_accuracy": test["accuracy"],
        "test_macro_f1": test["macro_f1"],
        "test_loss": test["loss"],
        "test_size": test["n"],
        "best_epoch": best["epoch"],
        "dev_accuracy": best["dev_accuracy"],
        "dev_macro_f1": best["dev_macro_f1"],
        "epochs_run": epoch,
        "steps": step,
        "stopped_early": stopped,
        "real_parameters": n_params,
        "seconds_this_session": round(time.perf_counter() - started, 1),
        "splits": data.splits.sizes(),
        "split": data.splits.description,
    }
    if rank == 0:
        write_json(path("results.json"), results)
    log(
        f"best dev accuracy {best['dev_accuracy']:.4f} at epoch {best['epoch']}; test accuracy "
        f"{test['accuracy']:.4f}, macro-F1 {test['macro_f1']:.4f} (n={test['n']}). "
        f"Run folder: {run_dir}"
    )
    return results


# ------------------------------------------------------------------------------------------------
# using a finished run


@dataclass
class LoadedRun:
    """A trained run ready for use: model (best dev weights, eval mode) and its text pipeline."""

    run_dir: str
    config: Any
    model: nn.Module
    spec: DataSpec
    tokenizer: Tokenizer
    vocab: Vocab
    labels: LabelMap
    run_config: dict

    @property
    def max_len(self) -> int | None:
        return (
            self.spec.max_len
            if self.spec.max_len is not None
            else getattr(self.config, "max_len", None)
        )


def load_run(run_dir: str, zoo: Any = None) -> LoadedRun:
    """Load a run folder's ``best.pt`` with its config, vocabulary and labels."""
    zoo = _zoo(zoo)
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found")
    run_config = read_run_config(run_dir)
    config = zoo.config_from_dict(run_config["model"])
    spec = DataSpec.from_dict(run_config["data"])
    best_path = os.path.join(run_dir, "best.pt")
    if not os.path.exists(best_path):
        raise RunError(
            f"{run_dir} has no best.pt (the run never finished an epoch); resume it with "
            f"cplxnet train --resume {run_dir}"
        )
    state = load_checkpoint(best_path, keys={"model": dict})
    model = zoo.build_model(config)
    load_weights(model, state["model"], best_path)
    model.eval()
    return LoadedRun(
        run_dir,
        config,
        model,
        spec,
        spec.tokenizer,
        Vocab.load(os.path.join(run_dir, "vocab.json")),
        LabelMap.load(os.path.join(run_dir, "labels.json")),
        run_config,
    )


def _text_limit(run: LoadedRun, max_len: int | None) -> tuple[int | None, bool]:
    """The token limit for new texts and whether longer ones are cut: the run's own, or
    ``max_len`` (truncate; at most the model's limit)."""
    if max_len is None:
        return run.max_len, run.spec.max_len is not None
    if max_len < 1:
        raise DataError(f"--max-len must be a positive number of tokens, got {max_len}")
    if run.max_len is not None and max_len > run.max_len:
        raise DataError(
            f"--max-len {max_len} is more than the {run.max_len} positions the model of "
            f"{run.run_dir} has; give --max-len {run.max_len} or less"
        )
    return max_len, True


def evaluate_run(
    run: LoadedRun | str,
    data: str | None = None,
    *,
    label_field: str | None = None,
    text_field: str | None = None,
    fmt: str | None = None,
    batch_size: int = 256,
    zoo: Any = None,
    max_len: int | None = None,
) -> dict[str, float]:
    """Accuracy and macro-F1 of a run's best weights on its test split or on a labelled file.

    A label that the training data never had is a :class:`DataError` naming it, the file and
    the line. ``max_len`` truncates the texts to that many tokens (at most the model's limit).
    """
    if isinstance(run, str):
        run = load_run(run, zoo)
    spec = run.spec
    limit, truncate = _text_limit(run, max_len)
    if data is None:
        check_data_unchanged(
            spec,
            run.run_config.get("data_sha256") or {},
            run.run_dir,
            "its test split cannot be rebuilt; score a file with --data FILE",
        )
        if max_len is not None:
            spec = dataclasses.replace(spec, max_len=limit)
        data_obj = prepare_data(spec, vocab=run.vocab, labels=run.labels, model_max_len=run.max_len)
        split = data_obj.test
    else:
        examples = read_examples(
            data, label_field or spec.label_field, text_field or spec.text_field, fmt
        )
        split = encode_split(
            examples, run.tokenizer, run.vocab, run.labels, max_len=limit, truncate=truncate
        )
    return evaluate(run.model, split, batch_size)


def predict(
    run: LoadedRun | str,
    texts: Sequence[str],
    *,
    where: Sequence[str] | None = None,
    batch_size: int = 256,
    zoo: Any = None,
    max_len: int | None = None,
) -> list[tuple[str, float]]:
    """The predicted label and its probability for each text. Empty texts are an error; a text
    longer than the run's limit is an error unless ``max_len`` (at most the model's limit) asks
    to truncate."""
    if isinstance(run, str):
        run = load_run(run, zoo)
    if not texts:
        raise DataError("no texts to classify")
    for i, text in enumerate(texts):
        if not text.strip():
            place = where[i] if where is not None else f"text {i + 1}"
            raise DataError(f"{place}: the text is empty; give a non-empty text to classify")
    limit, truncate = _text_limit(run, max_len)
    ids = encode_texts(
        texts, run.tokenizer, run.vocab, max_len=limit, truncate=truncate, where=where
    )
    probs = torch.softmax(_logits(run.model, ids, batch_size), dim=1)
    p, index = probs.max(1)
    return [(run.labels.decode(int(i)), float(q)) for i, q in zip(index, p)]


# ------------------------------------------------------------------------------------------------
# the pieces other engines (cplxnet.lm) share with this one; run folders are cplxnet.runs

__all__ += ["rng_state", "set_rng_state", "progress", "versions"]


def rng_state() -> dict[str, Any]:
    """Every RNG state (torch, Python, NumPy) as tensors and numbers, loadable with
    ``torch.load(weights_only=True)``; :func:`set_rng_state` restores it."""
    return _rng_state()


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the RNG states saved by :func:`rng_state`."""
    _set_rng_state(state)


def progress(total: int, desc: str, quiet: bool = False):
    """A tqdm progress bar on stderr (off when ``quiet``, off the first rank or not a terminal)."""
    return _progress(total, desc, quiet, _dist()[1])


def versions() -> dict[str, str]:
    """Versions of Python, torch, NumPy, cplxnet and complextorch (for a run's config.json)."""
    return _versions()
