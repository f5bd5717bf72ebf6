"""The language-model task: train a causal decoder on a text stream or a synthetic task.

:func:`train_lm` fits a ``decoder`` of the zoo (:class:`cplxnet.models.DecoderConfig`) and keeps
everything in a run folder, as the classification task (:mod:`cplxnet.tasks.classify.task`)
does::

    config.json     model config, training options, data (source, tokens, context), versions
    vocab.json      the token vocabulary (training part of the stream)
    metrics.jsonl   one line per evaluation (every ``eval_every`` steps): train loss, dev score
    checkpoint.pt   the state at the last evaluation (model, optimiser, RNG, history) for resume
    best.pt         the weights with the best monitored dev score (``LMOptions.monitor``)
    results.json    written last: the test scores of best.pt per evaluation length (or bin)

Training: AdamW, a constant or warm-up + cosine learning rate (:meth:`LMOptions.lr_at`; each
metrics.jsonl line records the ``lr`` of its last step), gradient clipping, optional early
stopping (``patience`` evaluations without a better monitored dev score); each step takes
``batch_size`` windows of ``context`` tokens at random offsets of the training stream (or, for
a synthetic task, fresh sequences). The offsets of step ``t`` come from a generator seeded by
``(seed, t)`` and the checkpoint holds every RNG state, so :func:`resume_lm` ends with exactly
the parameters and results of an uninterrupted run. ``train_seconds`` is the wall time of
training and dev scoring summed over sessions (a session's time after its last checkpoint is
lost with it); ``train_cpu_seconds`` the process CPU time of the same (the better measure on a
shared machine with one thread). The dev part chooses the checkpoint (dev loss at the training
context, or a synthetic task's dev exact match); the test part is scored once, at the end, with
best.pt, at ``context * m`` for each ``m`` of ``eval_multiples`` (text) or on the prompt-length bins
(synthetic, :mod:`cplxnet.tasks.lm.synthetic`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...data import DataError
from ...engine.checkpoints import read_checkpoint
from ...engine.loop import LoopState, fit, new_run_config, resume_notes, take_run_folder
from ...engine.optimization import set_lr
from ...engine.runs import (
    RunError,
    RunFolder,
    begin_resume,
    check_new_run_dir,
    check_run_started,
    read_run_config,
    record_changed_data,
    run_task,
    write_json,
)
from ...engine.runtime import Logger, dist_info, on_rank0_first, seed_everything
from ...utils import count_parameters
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


# ------------------------------------------------------------------------------------------------
# tasks: where batches come from and how dev and test are scored


class LMTask:
    """A text stream (``source`` a file, ``"mr"`` or ``"trec"``) or a synthetic task
    (``"synthetic:copy"``, ``"synthetic:reverse"``), with the training ``context``.

    ``batch(step, seed, batch_size)`` -> ``(ids, targets, padding_mask | None)``; ``dev(model)``
    -> dev scores (the one ``LMOptions.monitor`` names chooses the checkpoint);
    ``test(model, options)`` -> the test entries of results.json.
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
        g = torch.Generator().manual_seed((seed * 1_000_003 + step) % 2**64)  # any --seeds seed
        if self.synthetic is not None:
            return self.synthetic.batch(g, batch_size)
        train, L = self.data.train, self.context
        starts = torch.randint(0, len(train) - L, (batch_size,), generator=g)
        chunk = train[starts[:, None] + torch.arange(L + 1)]  # (B, L + 1)
        return chunk[:, :-1], chunk[:, 1:], None

    def dev(self, model: nn.Module, batch_tokens: int) -> dict[str, float]:
        if self.synthetic is not None:
            s, prompts = self.synthetic, self.synthetic.dev_prompts()
            return {"loss": s.loss(model, prompts),
                    "accuracy": s.accuracy(model, prompts, batch_tokens)}  # fmt: skip
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

    # -- the training loop's task (cplxnet.engine.Task): set ``options`` first ---------------

    kind = "lm"
    options: LMOptions

    def prepare(self, model: nn.Module, world: int, rank: int, log: Logger):
        """AdamW over the trainable parameters; under torchrun the model in DDP (each rank
        takes its share of every step's windows)."""
        o = self.options
        if o.batch_size < world:
            raise RunError(f"--batch-size {o.batch_size} is smaller than the {world} processes; "
                           f"give at least {world} windows per step")  # fmt: skip
        self.world, self.rank = world, rank
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=o.lr, weight_decay=o.weight_decay)
        model.train()
        forward = nn.parallel.DistributedDataParallel(model) if world > 1 else model
        return forward, [self.optimizer]

    def done(self, state: LoopState) -> bool:
        return state.step >= self.options.steps

    def round(self, state: LoopState) -> range:
        every, steps = self.options.eval_every, self.options.steps
        return range(state.step, min((state.step // every + 1) * every, steps))

    def round_label(self, state: LoopState) -> str:
        return f"steps to {self.round(state).stop}/{self.options.steps}"

    def step(self, forward: nn.Module, batch: int, step: int) -> torch.Tensor:
        """Optimiser step ``batch`` (its index: the windows come from ``(seed, step)``); under
        DDP the loss is this rank's summed cross-entropy over the step's counted targets times
        the world size, so the averaged gradient is the whole step's mean loss."""
        o = self.options
        self.lr = o.lr_at(step)
        set_lr([self.optimizer], self.lr)
        ids, targets, mask = self.batch(step, o.seed, o.batch_size)
        if self.world == 1:
            logits = forward(ids, mask)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
            loss.backward()
        else:
            counted = (targets != IGNORE).sum()
            part = slice(self.rank, None, self.world)
            ids, targets = ids[part], targets[part]
            logits = forward(ids, None if mask is None else mask[part])
            total = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                    reduction="sum")  # fmt: skip
            (total * (self.world / counted)).backward()
            loss = total / counted  # this rank's share of the step's mean loss
        if o.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, o.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach().double().reshape(1)

    def round_over(self, state: LoopState) -> bool:
        return False

    def postfix(self, totals: torch.Tensor, steps: int) -> dict[str, str]:
        return {"loss": f"{float(totals[0]) / steps:.4f}"}

    def train_metrics(self, totals: torch.Tensor, steps: int, state: LoopState) -> dict:
        loss = float(totals[0])
        if not math.isfinite(loss):
            raise RunError(f"the training loss became {loss} by step {state.step}; lower --lr or "
                           "set --clip-norm")  # fmt: skip
        return {"train_loss": loss / steps}

    def score_dev(self, model: nn.Module) -> dict:
        return self.dev(model, self.options.batch_tokens)

    def improved(self, dev: dict, best: dict | None) -> bool:
        if best is None:
            return True
        if self.options.monitor == "accuracy":
            return dev["accuracy"] > best["dev"]["accuracy"]
        return dev["loss"] < best["dev"]["loss"]

    def best_entry(self, state: LoopState, dev: dict) -> dict:
        return {"step": state.step, "dev": dev}

    def metrics(self, state, train, dev, improved, seconds, total_seconds) -> dict:
        return {"step": state.step, **train, **{f"dev_{k}": v for k, v in dev.items()},
                "best": improved, "lr": self.lr, "seconds": round(total_seconds, 3)}  # fmt: skip

    def checkpoint_entries(self, state: LoopState) -> dict:
        return {}

    def describe(self, state: LoopState, m: dict, improved: bool) -> str:
        scores = "  ".join(f"dev {k[4:]} {v:.4f}" for k, v in m.items() if k.startswith("dev_"))
        return (f"step {state.step}/{self.options.steps}  train loss {m['train_loss']:.4f}  "
                f"{scores}{'  *best' if improved else ''}")  # fmt: skip

    def callback_key(self, state: LoopState) -> int:
        return state.step

    def stop_message(self, state: LoopState) -> str:
        return (f"early stop at step {state.step}: no better {self.options.monitored} in "
                f"{self.options.patience} evaluations")  # fmt: skip

    def nothing_trained(self) -> str:
        return "no step was trained (steps too small)"

    def score_test(self, scorer: nn.Module, log: Logger) -> dict:
        return self.test(scorer, self.options, log)

    def results(self, model: nn.Module, state: LoopState, test: dict, timing: dict) -> dict:
        results = {
            "task": "lm",
            "data": self.source,
            "tokens": self.tokens,
            "context": self.context,
            "metric": self.metric,
            "test": test,
            "dev": state.best["dev"],
            "best_step": state.best["step"],
            "steps": state.step,
            "train_seconds": round(timing["train_seconds"], 1),
            "train_cpu_seconds": round(timing["train_cpu_seconds"], 1),
            "test_seconds": round(timing["test_seconds"], 1),
            "real_parameters": count_parameters(model, trainable_only=False).total_real,
            "seed": self.options.seed,
        }
        if self.data is not None:
            results["splits"] = self.data.sizes()
            results["unknown_test_tokens"] = self.data.unknown_test
        return results

    def final_line(self, results: dict, run_dir: str) -> str:
        return _describe(results) + f"; run folder: {run_dir}"


def monitor_problem(monitor: str, source: str) -> str | None:
    """Why the dev score ``monitor`` (:attr:`LMOptions.monitor`) cannot be monitored on
    ``source``, in one line; ``None`` when it can. Checked on the name, before any data is read."""
    if monitor == "accuracy" and not source.startswith(SYNTHETIC_PREFIX):
        return (f"--monitor accuracy needs a synthetic task (the exact match of its dev "
                f"prompts); {source} is a text stream, which monitors its dev loss: drop "
                "--monitor")  # fmt: skip
    return None


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
    world, rank = dist_info()
    # before reading any data; touches nothing (rank 0 checks, the others raise its error)
    on_rank0_first(lambda: check_new_run_dir(run_dir, force), lambda: None)
    problem = monitor_problem(options.monitor, source)
    if problem:
        raise RunError(problem)
    task = LMTask(source, tokens, context)
    config = _fit_config(config, task)
    seed_everything(options.seed)
    from ... import models as zoo

    model = zoo.build_model(config)
    run_config = new_run_config(config, options, task.spec(), head={"task": "lm"})
    folder = take_run_folder(run_dir, force)
    try:
        if rank == 0:
            write_json(os.path.join(folder.path, "config.json"), run_config)
            task.vocab.save(os.path.join(folder.path, "vocab.json"))
        Logger(quiet, rank)(task.summary())
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
    folder = take_run_folder(run_dir, None)  # owned before it is read or changed
    try:
        return _resume(run_dir, folder, steps, quiet, callback, allow_changed_data)
    finally:
        folder.release()


def _resume(run_dir: str, folder: RunFolder, steps: int | None, quiet: bool,
            callback: Callable[[int, dict], None] | None, allow_changed: bool) -> dict:  # fmt: skip
    # Everything is checked before the folder changes: a bad input leaves the run as it was.
    run_config, config, options = load_lm_config(run_dir, other_task="resume it without --task lm")
    ckpt = os.path.join(run_dir, "checkpoint.pt")
    check_run_started(run_dir, "evaluation")
    state = read_checkpoint(ckpt, "lm")
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
            f"better {options.monitored} in {options.patience} evaluations); train a new run "
            "with a larger --patience to go further"
        )
    if done and state["step"] >= options.steps:
        raise RunError(
            f"run {run_dir} is already complete ({state['step']} steps; results.json exists); "
            f"pass --steps N with N > {state['step']} to train it for more steps"
        )
    rank = dist_info()[1]
    for note in resume_notes(run_config):
        Logger(quiet, rank)(note)
    vocab = TokenVocab.load(os.path.join(run_dir, "vocab.json"))
    spec = {k: v for k, v in run_config["data"].items() if not allow_changed or k != "sha256"}
    task = LMTask.from_spec(spec, vocab)
    if allow_changed and "sha256" in run_config["data"]:
        record_changed_data(run_config["data"], "sha256", task.spec()["sha256"])
    model = build_lm_model(config, run_dir)

    def start() -> None:  # the checkpoint fits: only now change the run folder
        if rank == 0:
            begin_resume(run_dir, run_config, done)
        Logger(quiet, rank)(f"resuming {run_dir} after step {state['step']} of {options.steps}")

    return _fit(model, task, folder, options, quiet, callback, state=state, start=start)


def load_lm_config(run_dir: str, *, other_task: str) -> tuple[dict, Any, LMOptions]:
    """``(run_config, model config, options)`` of a language-model run's config.json.

    A file that is not a cplxnet run's, the config of a classifier (``other_task`` says what to
    do instead) or a damaged section is a one-line :class:`RunError` naming config.json.
    """
    from ... import models as zoo

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
        problem = monitor_problem(options.monitor, spec["source"])
        if problem:
            raise ValueError(problem)
    except (ValueError, TypeError, KeyError) as err:
        detail = err.args[0] if isinstance(err, KeyError) or not str(err) else str(err)
        raise RunError(
            f"{where} is damaged ({detail}); restore the file or train the run again"
        ) from None
    return run_config, config, options


def build_lm_model(config: Any, run_dir: str) -> nn.Module:
    """The model of a run's config; a config no model can be built from is a :class:`RunError`
    naming the run's config.json."""
    from ... import models as zoo

    try:
        return zoo.build_model(config)
    except (ValueError, TypeError, KeyError) as err:
        detail = err.args[0] if isinstance(err, KeyError) or not str(err) else str(err)
        raise RunError(
            f"{os.path.join(run_dir, 'config.json')} is damaged: its model cannot be built "
            f"({detail}); restore the file or train the run again"
        ) from None


def _fit(model: nn.Module, task: LMTask, folder: RunFolder, options: LMOptions, quiet: bool,
         callback: Callable[[int, dict], None] | None, state: dict | None,
         start: Callable[[], None] | None = None) -> dict:  # fmt: skip
    task.options = options
    return fit(task, model, folder, patience=options.patience, quiet=quiet, callback=callback,
               state=state, start=start)  # fmt: skip


def _describe(results: dict) -> str:
    metric = results["metric"]
    parts = []
    for key, entry in results["test"].items():
        value = entry.get(metric)
        parts.append(f"{key}: " + ("n/a" if value is None else f"{value:.4f}"))
    return f"best dev at step {results['best_step']}; test {metric} " + ", ".join(parts)
