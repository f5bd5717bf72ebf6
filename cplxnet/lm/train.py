"""The language-model engine: train a causal decoder on a text stream or a synthetic task.

:func:`train_lm` fits a ``decoder`` of the zoo (:class:`cplxnet.models.DecoderConfig`) and keeps
everything in a run folder, as the classification engine (:mod:`cplxnet.train`) does::

    config.json     model config, training options, data (source, tokens, context), versions
    vocab.json      the token vocabulary (training part of the stream)
    metrics.jsonl   one line per evaluation (every ``eval_every`` steps): train loss, dev score
    checkpoint.pt   the state at the last evaluation (model, optimiser, RNG, history) for resume
    best.pt         the weights with the best dev loss
    results.json    written last: the test scores of best.pt per evaluation length (or bin)

Training: AdamW, a constant or warm-up + cosine learning rate (:meth:`LMOptions.lr_at`; each
metrics.jsonl line records the ``lr`` of its last step), gradient clipping, optional early
stopping (``patience`` evaluations without a better dev loss); each step takes ``batch_size``
windows of ``context`` tokens at random offsets of the training stream (or, for a synthetic
task, fresh sequences). The offsets of step ``t`` come from a generator seeded by
``(seed, t)`` and the checkpoint holds every RNG state, so :func:`resume_lm` ends with exactly
the parameters and results of an uninterrupted run. ``train_seconds`` is the wall time of
training and dev scoring summed over sessions (a session's time after its last checkpoint is
lost with it); ``train_cpu_seconds`` the process CPU time of the same (the better measure on a
shared machine with one thread). The dev part chooses the checkpoint (dev
loss at the training context); the test part is scored once, at the end, with best.pt, at
``context * m`` for each ``m`` of ``eval_multiples`` (text) or on the prompt-length bins
(synthetic, :mod:`cplxnet.lm.synthetic`).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..data import DataError
from ..optimization import set_lr
from ..runs import (
    RUN_FORMAT,
    RUN_MARKER,
    RunError,
    RunFolder,
    append_line,
    atomic_write,
    check_new_run_dir,
    load_checkpoint,
    load_weights,
    read_run_config,
    run_task,
    save_checkpoint,
    write_json,
)
from ..runtime import progress, rng_state, seed_everything, set_rng_state, versions
from ..utils import count_parameters
from .data import LMData, TokenVocab, file_sha256, prepare_lm_data
from .evaluate import NA, effective_length, evaluate_lengths, metric_name, score_stream
from .options import LMOptions
from .synthetic import IGNORE, TASKS, SyntheticTask

__all__ = [
    "LMOptions",
    "LMTask",
    "make_task",
    "train_lm",
    "resume_lm",
    "is_lm_run",
    "load_lm_config",
    "build_lm_model",
    "SYNTHETIC_PREFIX",
]

SYNTHETIC_PREFIX = "synthetic:"
CHECKPOINT_FORMAT = 1


# ------------------------------------------------------------------------------------------------
# tasks: where batches come from and how dev and test are scored


class LMTask:
    """A text stream (``source`` a file, ``"mr"`` or ``"trec"``) or a synthetic task
    (``"synthetic:copy"``, ``"synthetic:reverse"``), with the training ``context``.

    ``batch(step, seed, batch_size)`` -> ``(ids, targets, padding_mask | None)``; ``dev(model)``
    -> dev scores (``"loss"`` chooses the checkpoint); ``test(model, options)`` -> the test
    entries of results.json.
    """

    def __init__(
        self, source: str, tokens: str, context: int, vocab: TokenVocab | None = None
    ) -> None:
        self.source, self.context = source, context
        self.synthetic: SyntheticTask | None = None
        self.data: LMData | None = None
        if source.startswith(SYNTHETIC_PREFIX):
            name = source[len(SYNTHETIC_PREFIX) :]
            if name not in TASKS:
                raise DataError(
                    f"unknown synthetic task {name!r}; valid: "
                    + ", ".join(SYNTHETIC_PREFIX + t for t in TASKS)
                )
            self.synthetic = SyntheticTask(name, context)
            self.tokens = "synthetic"
            self.vocab = self.synthetic.vocab
        else:
            self.data = prepare_lm_data(source, tokens, context, vocab)
            self.tokens = tokens
            self.vocab = self.data.vocab

    @property
    def metric(self) -> str:
        return metric_name(self.tokens)

    @property
    def longest_input(self) -> int:
        """The longest training input (the decoder's ``max_len``)."""
        return self.synthetic.longest_input if self.synthetic is not None else self.context

    def spec(self) -> dict[str, Any]:
        """The data part of config.json (rebuilds this task with :meth:`from_spec`)."""
        spec: dict[str, Any] = {"source": self.source, "tokens": self.tokens,
                                "context": self.context}  # fmt: skip
        if self.synthetic is None and os.path.isfile(self.source):
            spec["path"] = os.path.abspath(self.source)
            spec["sha256"] = file_sha256(self.source)
        return spec

    @classmethod
    def from_spec(cls, spec: dict[str, Any], vocab: TokenVocab | None = None) -> LMTask:
        source = spec.get("path", spec["source"])
        digest = spec.get("sha256")
        if digest is not None:
            fix = (
                "restore the file as it was, or train a new run on the text as it is now "
                "(--force, or another --run-dir; to resume on it: --allow-changed-data)"
            )
            if not os.path.isfile(source):
                raise RunError(f"the training text {source} is gone, so the run's splits cannot "
                               f"be rebuilt; {fix}")  # fmt: skip
            now = file_sha256(source)
            if now != digest:
                raise RunError(
                    f"the training text {source} changed since the run started (recorded sha256 "
                    f"{digest[:12]}..., now {now[:12]}...), so its splits cannot be rebuilt; {fix}"
                )
        task = cls(source, spec["tokens"] if spec["tokens"] != "synthetic" else "char",
                   spec["context"], vocab)  # fmt: skip
        task.source = spec["source"]
        return task

    def summary(self) -> str:
        if self.synthetic is not None:
            s = self.synthetic
            return (
                f"synthetic {s.task}: prompts of 1-{s.max_prompt} symbols over {s.alphabet} "
                f"symbols; test bins {', '.join(b[0] for b in s.bins())}"
            )
        return self.data.summary()

    def batch(
        self, step: int, seed: int, batch_size: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        if self.synthetic is not None:
            return self.synthetic.batch(g, batch_size)
        train, L = self.data.train, self.context
        starts = torch.randint(0, len(train) - L, (batch_size,), generator=g)
        chunk = train[starts[:, None] + torch.arange(L + 1)]  # (B, L + 1)
        return chunk[:, :-1], chunk[:, 1:], None

    def dev(self, model: nn.Module, batch_tokens: int) -> dict[str, float]:
        if self.synthetic is not None:
            return {"loss": self.synthetic.loss(model, self.synthetic.dev_prompts())}
        out = score_stream(model, self.data.dev, self.context, tokens=self.tokens,
                           batch_tokens=batch_tokens)  # fmt: skip
        return {"loss": out["loss"], self.metric: out[self.metric]}

    def test(self, model: nn.Module, options: LMOptions, log: Callable | None = None, *,
             model_at: Callable[[int], nn.Module] | None = None) -> dict:  # fmt: skip
        """The test entries; ``log`` gets a line per synthetic bin (its prompts and seconds).
        ``model_at(n)`` gives the model that scores inputs of at most ``n`` tokens (a window,
        or a bin's longest sequence ``2 hi + 1``); default ``model`` for every length."""
        out: dict[str, dict] = {}
        if self.synthetic is None:
            for n in (self.context * m for m in options.eval_multiples):
                window = effective_length(len(self.data.test), n)
                out.update(evaluate_lengths(model_at(window) if model_at else model,
                                            self.data.test, [n], tokens=self.tokens,
                                            batch_tokens=options.batch_tokens))  # fmt: skip
            return out
        s = self.synthetic
        for name, lo, hi in s.bins():
            scorer = model_at(2 * hi + 1) if model_at else model
            reason = scorer.unsupported_length(2 * hi + 1)
            if reason is not None:
                out[name] = {"accuracy": None, NA: reason}
                continue
            prompts = s.test_prompts(lo, hi)
            t0 = time.perf_counter()
            accuracy = s.accuracy(scorer, prompts, options.batch_tokens)
            out[name] = {"accuracy": accuracy, "n": len(prompts)}
            if log is not None:
                log(f"test prompt lengths {name}: {len(prompts)} prompts scored in "
                    f"{time.perf_counter() - t0:.1f}s")  # fmt: skip
        return out


def make_task(source: str, tokens: str = "char", context: int = 64) -> LMTask:
    """The task of ``source`` (see :class:`LMTask`)."""
    return LMTask(source, tokens, context)


# ------------------------------------------------------------------------------------------------
# the run


def is_lm_run(run_dir: str) -> bool:
    """True if ``run_dir`` holds a language-model run (its config.json says ``"task": "lm"``)."""
    return run_task(run_dir) == "lm"


def _fit_config(config: Any, task: LMTask) -> Any:
    if getattr(config, "family", None) != "decoder":
        raise ValueError(
            f"a language model needs the 'decoder' family, got {getattr(config, 'family', None)!r}"
        )
    return dataclasses.replace(
        config, vocab_size=len(task.vocab), padding_idx=0, max_len=task.longest_input
    )


def train_lm(
    config: Any,
    source: str,
    run_dir: str,
    options: LMOptions | None = None,
    *,
    tokens: str = "char",
    context: int = 64,
    force: bool = False,
    quiet: bool = False,
    callback: Callable[[int, dict], None] | None = None,
) -> dict:
    """Train a new causal language model and return its results (also ``run_dir/results.json``).

    Args:
        config: a ``decoder`` config (``make_config("decoder", ...)`` or ``preset_config(
            "lm-char")``); its ``vocab_size``, ``padding_idx`` and ``max_len`` (= the longest
            training input) are set from the data.
        source: a UTF-8 text file, ``"mr"``, ``"trec"``, ``"synthetic:copy"`` or
            ``"synthetic:reverse"``.
        run_dir: the run folder to create (see the module docstring).
        options: :class:`LMOptions`.
        tokens: ``"char"`` or ``"word"`` (text sources).
        context: training length ``L`` (synthetic tasks: the longest training prompt).
        force: replace an existing run folder (only a cplxnet run folder or an empty one).
        quiet: no progress bar and no log lines.
        callback: ``callback(step, metrics)`` after each evaluation is saved.

    Returns the results dict::

        {"task": "lm", "data": source, "tokens": "char", "context": 64, "metric": "bpc",
         "test": {"64": {"bpc": 2.61, "loss": 1.81, "tokens": 59610, "windows": 932},
                  "128": {...}, "256": {...},
                  "512": {"bpc": None, "n/a": "reason"}},     # a length the encoding lacks
         "dev": {"loss": ..., "bpc": ...}, "best_step": 1750, "steps": 2000,
         "train_seconds": 161.2, "train_cpu_seconds": 158.0, "test_seconds": 9.8,
         "real_parameters": 113316,
         "splits": {"train": ..., "dev": ..., "test": ...}}

    Synthetic tasks have ``"metric": "accuracy"`` and ``"test": {"1-16": {"accuracy": 1.0,
    "n": 100}, "17-32": {...}, "33-64": {...}}`` (prompt-length bins).
    """
    options = options or LMOptions()
    check_new_run_dir(run_dir, force)  # before reading any data; touches nothing
    task = LMTask(source, tokens, context)
    config = _fit_config(config, task)
    seed_everything(options.seed)
    from .. import models as zoo

    model = zoo.build_model(config)
    run_config = {
        RUN_MARKER: RUN_FORMAT,
        "task": "lm",
        "model": dataclasses.asdict(config),
        "train": dataclasses.asdict(options),
        "data": task.spec(),
        "seed": options.seed,
        "versions": versions(),
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    folder = RunFolder(run_dir, force)  # its lock first: one owner at a time
    try:
        write_json(os.path.join(folder.path, "config.json"), run_config)
        task.vocab.save(os.path.join(folder.path, "vocab.json"))
        _logger(quiet)(task.summary())
        return _fit(model, task, folder, options, quiet, callback, state=None)
    finally:
        folder.abort()  # before the first checkpoint: remove what this run wrote; let it go


def resume_lm(
    run_dir: str,
    *,
    steps: int | None = None,
    quiet: bool = False,
    callback: Callable[[int, dict], None] | None = None,
    allow_changed_data: bool = False,
) -> dict:
    """Continue an interrupted language-model run from ``checkpoint.pt``; ``steps`` raises the
    planned number of steps (to extend a finished run; a cosine schedule then decays over the
    new total from the next step on). The result equals an uninterrupted run's. A changed
    training text (SHA-256) is an error unless ``allow_changed_data``.
    """
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found; give the folder of an earlier run")
    folder = RunFolder.existing(run_dir)  # this process owns the folder before it reads it
    try:
        return _resume(run_dir, folder, steps, quiet, callback, allow_changed_data)
    finally:
        folder.release()


def _resume(run_dir: str, folder: RunFolder, steps: int | None, quiet: bool,
            callback: Callable[[int, dict], None] | None, allow_changed: bool) -> dict:  # fmt: skip
    # Everything is checked before the folder changes: a bad input leaves the run as it was.
    run_config, config, options = load_lm_config(
        run_dir, other_task="resume it without --task lm"
    )
    ckpt = os.path.join(run_dir, "checkpoint.pt")
    state = load_checkpoint(ckpt, keys=CHECKPOINT_KEYS)
    if state["format"] != CHECKPOINT_FORMAT:
        raise RunError(
            f"{ckpt} has an unknown format {state['format']}; resume it with the cplxnet "
            "version that wrote it"
        )
    done = os.path.exists(os.path.join(run_dir, "results.json"))
    if steps is not None and steps != options.steps:
        if steps < state["step"]:
            raise RunError(
                f"{run_dir} already ran {state['step']} steps; --steps {steps} is less: give "
                f"--steps N with N > {state['step']}"
            )
        options = dataclasses.replace(options, steps=steps)
        run_config["train"] = dataclasses.asdict(options)
    if done and options.stalled(list(state["history"])):
        raise RunError(
            f"run {run_dir} is already complete (stopped early at step {state['step']}: no "
            f"better dev loss in {options.patience} evaluations); train a new run with a larger "
            "--patience to go further"
        )
    if done and state["step"] >= options.steps:
        raise RunError(
            f"run {run_dir} is already complete ({state['step']} steps; results.json exists); "
            f"pass --steps N with N > {state['step']} to train it for more steps"
        )
    vocab = TokenVocab.load(os.path.join(run_dir, "vocab.json"))
    spec = {k: v for k, v in run_config["data"].items() if not allow_changed or k != "sha256"}
    task = LMTask.from_spec(spec, vocab)
    model = build_lm_model(config, run_dir)
    load_weights(model, state["model"], ckpt)  # the weights fit this run's model
    try:  # and so does the optimiser state (a dry load into a throwaway optimiser)
        params = [p for p in model.parameters() if p.requires_grad]
        torch.optim.AdamW(params, lr=options.lr).load_state_dict(state["optimizer"])
    except (ValueError, KeyError, TypeError, RuntimeError) as err:
        raise RunError(
            f"{ckpt} holds an optimiser state of another model ({type(err).__name__}); restore "
            "the run's own file or train the run again"
        ) from None
    if done:
        os.remove(os.path.join(run_dir, "results.json"))
    write_json(os.path.join(run_dir, "config.json"), run_config)
    _logger(quiet)(f"resuming {run_dir} after step {state['step']} of {options.steps}")
    return _fit(model, task, folder, options, quiet, callback, state=state)


#: The entries of checkpoint.pt and their types (checked by :func:`resume_lm`).
CHECKPOINT_KEYS = {
    "format": int, "step": int, "model": dict, "optimizer": dict, "rng": dict,
    "history": list, "best": (dict, type(None)), "seconds": (int, float),
    "cpu_seconds": (int, float),
}  # fmt: skip


def load_lm_config(run_dir: str, *, other_task: str) -> tuple[dict, Any, LMOptions]:
    """``(run_config, model config, options)`` of a language-model run's config.json.

    A file that is not a cplxnet run's, the config of a classifier (``other_task`` says what to
    do instead) or a damaged section is a one-line :class:`RunError` naming config.json.
    """
    from .. import models as zoo

    run_config = read_run_config(run_dir)
    where = os.path.join(run_dir, "config.json")
    if run_config.get("task") != "lm":
        raise RunError(f"{run_dir} is not a language-model run; {other_task}")
    for section in ("model", "train", "data"):
        if not isinstance(run_config.get(section), dict):
            raise RunError(
                f"{where} has no {section!r} section; the run folder is damaged: restore the "
                "file or train the run again"
            )
    try:
        config = zoo.config_from_dict(run_config["model"])
        options = LMOptions.from_dict(run_config["train"])
        spec = run_config["data"]
        if not (isinstance(spec.get("source"), str) and isinstance(spec.get("tokens"), str)
                and isinstance(spec.get("context"), int)):  # fmt: skip
            raise ValueError("the data section lacks source, tokens or context")
    except (ValueError, TypeError, KeyError) as err:
        detail = err.args[0] if isinstance(err, KeyError) or not str(err) else str(err)
        raise RunError(
            f"{where} is damaged ({detail}); restore the file or train the run again"
        ) from None
    return run_config, config, options


def build_lm_model(config: Any, run_dir: str) -> nn.Module:
    """The model of a run's config; a config no model can be built from is a :class:`RunError`
    naming the run's config.json."""
    from .. import models as zoo

    try:
        return zoo.build_model(config)
    except (ValueError, TypeError, KeyError) as err:
        detail = err.args[0] if isinstance(err, KeyError) or not str(err) else str(err)
        raise RunError(
            f"{os.path.join(run_dir, 'config.json')} is damaged: its model cannot be built "
            f"({detail}); restore the file or train the run again"
        ) from None


def _logger(quiet: bool) -> Callable[[str], None]:
    return (lambda message: None) if quiet else (lambda message: print(message, flush=True))


def _fit(
    model: nn.Module,
    task: LMTask,
    folder: RunFolder,
    options: LMOptions,
    quiet: bool,
    callback: Callable[[int, dict], None] | None,
    state: dict | None,
) -> dict:
    run_dir = folder.final  # for messages; files go to folder.path (see cplxnet.runs.RunFolder)

    def path(_: str, name: str) -> str:
        return os.path.join(folder.path, name)

    log = _logger(quiet)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=options.lr, weight_decay=options.weight_decay)
    history: list[dict] = []
    best: dict | None = None
    step, seconds, cpu_seconds = 0, 0.0, 0.0
    if state is not None:
        load_weights(model, state["model"], path(run_dir, "checkpoint.pt"))
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        history, best = list(state["history"]), state["best"]
        step, seconds, cpu_seconds = state["step"], state["seconds"], state["cpu_seconds"]
        atomic_write(  # metrics.jsonl may have lines the checkpoint never saw
            path(run_dir, "metrics.jsonl"),
            lambda fh: fh.writelines(json.dumps(m) + "\n" for m in history),
        )

    model.train()
    bar = progress(options.steps - step, "train", quiet)
    started, cpu_started = time.perf_counter(), time.process_time()
    running, running_n = 0.0, 0
    try:
        while step < options.steps and not options.stalled(history):
            lr = options.lr_at(step)
            set_lr([optimizer], lr)
            ids, targets, mask = task.batch(step, options.seed, options.batch_size)
            logits = model(ids, mask)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
            loss.backward()
            if options.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, options.clip_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            running += float(loss.detach())
            running_n += 1
            bar.update(1)
            bar.set_postfix(loss=f"{running / running_n:.4f}")
            if not math.isfinite(running):
                raise RunError(
                    f"the training loss became {running} at step {step}; lower --lr or set "
                    "--clip-norm"
                )
            if step % options.eval_every and step != options.steps:
                continue
            dev = task.dev(model, options.batch_tokens)
            improved = best is None or dev["loss"] < best["dev"]["loss"]
            elapsed = time.perf_counter() - started
            metrics = {"step": step, "train_loss": running / running_n,
                       **{f"dev_{k}": v for k, v in dev.items()}, "best": improved, "lr": lr,
                       "seconds": round(seconds + elapsed, 3)}  # fmt: skip
            history.append(metrics)
            running, running_n = 0.0, 0
            if improved:
                best = {"step": step, "dev": dev}
                save_checkpoint({"format": CHECKPOINT_FORMAT, "step": step,
                                 "model": model.state_dict(), "dev": dev},
                                path(run_dir, "best.pt"))  # fmt: skip
            save_checkpoint(
                {"format": CHECKPOINT_FORMAT, "step": step, "model": model.state_dict(),
                 "optimizer": optimizer.state_dict(), "rng": rng_state(), "history": history,
                 "best": best, "seconds": seconds + elapsed,
                 "cpu_seconds": cpu_seconds + time.process_time() - cpu_started},
                path(run_dir, "checkpoint.pt"),
            )  # fmt: skip
            folder.promote()  # a new run replacing an old one takes its place now
            if folder.note:
                log(folder.note)
                folder.note = ""
            append_line(path(run_dir, "metrics.jsonl"), json.dumps(metrics))
            if not quiet:
                scores = "  ".join(f"dev {k} {v:.4f}" for k, v in dev.items())
                bar.write(f"step {step}/{options.steps}  train loss {metrics['train_loss']:.4f}  "
                          f"{scores}{'  *best' if improved else ''}")  # fmt: skip
            if callback is not None:
                callback(step, metrics)
            if options.stalled(history):
                log(f"early stop at step {step}: no better dev loss in {options.patience} "
                    "evaluations")  # fmt: skip
                break
    finally:
        bar.close()
    seconds += time.perf_counter() - started
    cpu_seconds += time.process_time() - cpu_started
    if best is None:
        raise RunError("no step was trained (steps too small)")

    t0 = time.perf_counter()
    scorer = copy.deepcopy(model)  # keeps the live model's last state; draws no random numbers
    best_path = path(run_dir, "best.pt")
    load_weights(scorer, load_checkpoint(best_path, keys={"model": dict})["model"], best_path)
    test = task.test(scorer, options, log)
    results = {
        "task": "lm",
        "data": task.source,
        "tokens": task.tokens,
        "context": task.context,
        "metric": task.metric,
        "test": test,
        "dev": best["dev"],
        "best_step": best["step"],
        "steps": step,
        "train_seconds": round(seconds, 1),
        "train_cpu_seconds": round(cpu_seconds, 1),
        "test_seconds": round(time.perf_counter() - t0, 1),
        "real_parameters": count_parameters(model, trainable_only=False).total_real,
        "seed": options.seed,
    }
    if task.data is not None:
        results["splits"] = task.data.sizes()
        results["unknown_test_tokens"] = task.data.unknown_test
    write_json(path(run_dir, "results.json"), results)
    log(_describe(results) + f"; run folder: {run_dir}")
    return results


def _describe(results: dict) -> str:
    metric = results["metric"]
    parts = []
    for key, entry in results["test"].items():
        value = entry.get(metric)
        parts.append(f"{key}: " + ("n/a" if value is None else f"{value:.4f}"))
    return f"best dev at step {results['best_step']}; test {metric} " + ", ".join(parts)
