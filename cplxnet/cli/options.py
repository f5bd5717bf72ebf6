"""The options that several ``cplxnet`` commands share, each defined once, and the helpers every
command uses to report an error.

:data:`OPTIONS` holds every data and training option of ``cplxnet train`` and ``cplxnet compare``
(and ``--threads``): its flag, type, default, help and the commands that have it. A command adds
the ones it wants to one of its argument groups with :func:`add_options`; where the commands
differ (an option only one of them has, a different destination or help), the
:class:`Option` says so. Every default here is ``None`` ("not given"): the value then comes from
:class:`cplxnet.engine.options.TrainOptions` or :class:`cplxnet.data.DataSpec` (or a preset's
budget), and the help texts quote those defaults.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..data import DataSpec
from ..engine.optimization import SCHEDULES
from ..engine.options import TrainOptions
from ..models.presets import LM_PRESET_TRAINING
from ..tasks.lm.options import LM_PRESET, MONITORS
from ..tasks.lm.synthetic import SYNTHETIC_CONTEXT
from ..tasks.lm.task import LMOptions
from .argtypes import float_value, non_negative_int, positive_int, seed_int, unit_interval

__all__ = [
    "TRAIN_FIELDS",
    "train_fields",
    "CLIError",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "fail",
    "split_list",
    "RESUME_COMMON",
    "check_resume_options",
    "check_folder_arguments",
    "Option",
    "OPTIONS",
    "add_options",
    "LM_FLAGS",
    "SCHEDULE_FLAGS",
    "LM_PRESET",
    "lm_default",
]

# exit statuses; usage errors exit with argparse's 2
EXIT_ERROR, EXIT_INTERRUPTED = 1, 130


class CLIError(Exception):
    """An error to report as ``cplxnet: error: <message>``."""


def fail(message: str, status: int = EXIT_ERROR) -> int:
    """Print ``cplxnet: error: <message>`` as one line on stderr (on the first rank only under
    torchrun) and return ``status``.

    Under ``torchrun`` every rank also writes the line to the error file torchrun names in
    ``TORCHELASTIC_ERROR_FILE``. When a rank exits non-zero, torchrun itself then prints, after
    cplxnet's line, its own report: a Python traceback of the torchrun process ending in
    ``torch.distributed.elastic.multiprocessing.errors.ChildFailedError`` and a summary whose
    "Root Cause" names the first failed rank and its exit code, with ``traceback : cplxnet:
    error: ...`` (the line from the error file; without it torchrun prints "To enable
    traceback see: ..."); ranks that torchrun stopped are listed with ``exitcode : -15``
    (SIGTERM). That report comes from torchrun's own process and cannot be turned off from
    cplxnet; the training ranks print no traceback."""
    line = f"cplxnet: error: {' '.join(message.splitlines())}"
    if int(os.environ.get("RANK", "0")) == 0:
        print(line, file=sys.stderr)
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if error_file:
        with contextlib.suppress(OSError), open(error_file, "w", encoding="utf-8") as fh:
            json.dump({"message": line, "timestamp": int(time.time())}, fh)
    return status


#: The :class:`~cplxnet.engine.options.TrainOptions` fields ``train`` and ``compare`` both take
#: by the flag of the same name.
TRAIN_FIELDS = ("batch_size", "lr", "weight_decay", "clip_norm", "patience", "max_steps")


def train_fields(args: Any) -> dict[str, Any]:
    """The :data:`TRAIN_FIELDS` of a parsed command line and ``sparse`` (from ``--dense``);
    ``None`` where an option was not given."""
    fields = {name: getattr(args, name) for name in TRAIN_FIELDS}
    return {**fields, "sparse": False if args.dense else None}


def split_list(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated list."""
    return [t.strip() for t in text.split(",") if t.strip()]


def flags_apply(flags: list[str]) -> tuple[str, str]:
    """The subject and verb of a message about options given where they do not apply, and the
    pronoun that drops them: ``("--fold applies", "it")``, ``("--fold, --compile apply",
    "them")``."""
    if len(flags) == 1:
        return f"{flags[0]} applies", "it"
    return f"{', '.join(flags)} apply", "them"


#: The options ``--resume`` accepts for every task (argparse names); a task adds its length
#: option (classifiers ``--epochs``, language models ``--steps``).
RESUME_COMMON = frozenset({"resume", "quiet", "threads", "command", "allow_changed_data"})


def check_resume_options(args: Any, allowed: Iterable[str], applies: str) -> None:
    """Refuse options besides ``allowed`` (argparse names) with ``--resume``, which continues a
    run with its stored options; ``applies`` lists the flags that do apply, for the message."""
    given = sorted(k for k, v in vars(args).items() if v not in (None, False) and k not in allowed)
    if given:
        raise CLIError(
            "--resume continues a run with the options in its config.json; drop "
            f"{', '.join('--' + g.replace('_', '-') for g in given)} (only {applies} apply)"
        )


@dataclass(frozen=True)
class Option:
    """One command-line option, defined once for every command that has it.

    Attributes:
        flag: the option string (``--batch-size``).
        help: the help text.
        kwargs: the other ``add_argument`` keywords (type, action, metavar, choices, dest).
        commands: the commands that have the option.
        per_command: keywords (help, dest, metavar) that differ for one command.
    """

    flag: str
    help: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    commands: tuple[str, ...] = ("train", "compare")
    per_command: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def arguments(self, command: str) -> dict[str, Any]:
        """The ``add_argument`` keywords of the option in ``command``."""
        if command not in self.commands:
            raise ValueError(f"{self.flag} is not an option of cplxnet {command}")
        own = self.per_command.get(command, {})
        return {"default": None, "help": self.help, **self.kwargs, **own}


_TO = TrainOptions
_DS = DataSpec
_LO = LMOptions
_LM = {**{"context": 64}, **LM_PRESET_TRAINING.get(LM_PRESET, {})}
_MULTIPLES = [f"{m}L" if m != 1 else "L" for m in _LO.eval_multiples]
#: The language-model options of ``train --task lm`` and ``compare --task lm``.
LM_FLAGS = ("--tokens", "--context", "--steps", "--eval-every", "--monitor")
#: The learning-rate schedule options of ``train --task lm`` and ``compare --task lm``.
SCHEDULE_FLAGS = ("--schedule", "--warmup-steps", "--min-lr-ratio")


def _file_on_path(path: str) -> str | None:
    """``path`` or the nearest existing folder above it, if that is not a folder (a file)."""
    current = path
    while current and not os.path.isdir(current):
        if os.path.lexists(current):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return None


def check_folder_arguments(args: Any) -> None:
    """A :class:`CLIError` for a folder argument of any command that names a file, checked
    before anything else: ``RUN`` or ``--resume`` that is a file, a ``--run-dir`` or ``--out``
    that is empty, a file or would be made inside one (``afile/sub``)."""
    for dest in ("run", "resume"):
        path = getattr(args, dest, None)
        if isinstance(path, str) and os.path.exists(path) and not os.path.isdir(path):
            raise CLIError(
                f"{path} is a file, not a run folder; give the folder of a cplxnet run (the "
                "folder holding its config.json)"
            )
    for flag in ("--run-dir", "--out"):
        path = getattr(args, flag[2:].replace("-", "_"), None)
        if isinstance(path, str) and not path.strip():
            raise CLIError(f"{flag} is empty; give a folder, or leave out {flag} for its default")
        blocker = _file_on_path(path) if isinstance(path, str) else None
        if blocker is not None:
            where = f"{flag} {path}" + ("" if blocker == path else f": {blocker}")
            raise CLIError(f"{where} is a file, not a folder; choose another {flag}")


def lm_default(name: str, fmt: str = "") -> str:
    """The default of the language-model training field ``name`` as the help prints it: the
    default preset's (``"the preset's, 32 for lm-char"``) or :class:`LMOptions`'."""
    if name in _LM:
        return f"the preset's, {_LM[name]:{fmt}} for {LM_PRESET}"
    value = getattr(_LO, name)
    return "none" if value is None else f"{value:{fmt}}"


_OPTION_LIST: tuple[Option, ...] = (
    # -- data ------------------------------------------------------------------------------------
    # compare's --data (a list of data sets) is one of its grid options, not this one
    Option(
        "--data",
        f"bundled 'mr' or 'trec', or a TSV/CSV/JSONL file with a header (default: {_DS.data})",
        commands=("train",),
    ),
    Option("--test", "a separate test file", {"metavar": "FILE"}, commands=("train",)),
    Option("--dev", "a separate dev file", {"metavar": "FILE"}, commands=("train",)),
    # evaluate reads its --data file as train reads --data
    Option(
        "--format",
        "file format (default: from the extension)",
        {"choices": ("tsv", "csv", "jsonl")},
        commands=("train", "evaluate"),
    ),
    Option(
        "--label-field",
        f"label column / JSON key (default: {_DS.label_field})",
        commands=("train", "evaluate"),
        per_command={
            "evaluate": {"help": "label column / JSON key of --data (default: the run's)"}
        },
    ),
    Option(
        "--text-field",
        f"text column / JSON key (default: {_DS.text_field})",
        commands=("train", "evaluate"),
        per_command={"evaluate": {"help": "text column / JSON key of --data (default: the run's)"}},
    ),
    Option(
        "--split",
        "quick: one seeded 80/10/10 split (default); cv: 10-fold cross-validation (needs --fold)",
        {"choices": ("quick", "cv")},
        commands=("train",),
    ),
    Option(
        "--fold",
        "cross-validation test fold 0..9 (implies --split cv)",
        {"type": non_negative_int, "metavar": "K"},
        commands=("train",),
    ),
    Option(
        "--split-seed",
        f"seed of the data split (default {_DS.split_seed}; independent of the training seed)",
        {"type": seed_int},
    ),
    Option(
        "--max-len",
        "truncate texts to N tokens (also the model's position limit)",
        {"type": positive_int, "metavar": "N"},
        commands=("train", "compare", "evaluate", "predict"),
        per_command={
            cmd: {"help": "truncate texts to N tokens (at most the model's limit)"}
            for cmd in ("evaluate", "predict")
        },
    ),
    Option(
        "--min-freq",
        f"vocabulary: keep words seen at least this often in train (default {_DS.min_freq})",
        {"type": positive_int},
    ),
    Option(
        "--max-vocab",
        "vocabulary: keep the N most frequent entries (default: all)",
        {"type": positive_int, "metavar": "N"},
    ),
    Option("--clean", "Kim (2014)-style text cleaning before tokenizing", {"action": "store_true"}),
    Option("--keep-case", "do not lower-case the text", {"action": "store_true"}, ("train",)),
    Option(
        "--limit",
        "at most N examples per split (quick smoke runs)",
        {"type": positive_int, "metavar": "N"},
    ),
    Option(
        "--vectors",
        "initialise the word embeddings from a GloVe/word2vec text file",
        {"metavar": "FILE"},
    ),
    # -- training --------------------------------------------------------------------------------
    Option(
        "--epochs",
        f"maximum number of epochs (default {_TO.epochs})",
        {"type": positive_int},
    ),
    # compare trains every cell with each of its --seeds
    Option("--seed", f"training seed (default {_TO.seed})", {"type": seed_int}, ("train",)),
    Option(
        "--batch-size",
        f"global batch size (default {_TO.batch_size}; --task lm: windows per step, "
        f"{lm_default('batch_size')})",
        {"type": positive_int},
    ),
    Option(
        "--lr",
        f"learning rate (default {_TO.lr:g}; --task lm: {lm_default('lr', 'g')})",
        {"type": float_value},
    ),
    Option(
        "--weight-decay",
        f"AdamW weight decay on the dense parameters (default {_TO.weight_decay:g}; --task lm: "
        f"{lm_default('weight_decay', 'g')})",
        {"type": float_value},
    ),
    Option(
        "--clip-norm",
        "clip the dense gradients to this total norm (default: no clipping; --task lm: "
        f"{lm_default('clip_norm', 'g')})",
        {"type": float_value},
    ),
    Option(
        "--patience",
        "stop after N epochs without a better dev accuracy (a language model: N evaluations "
        "without a better --monitor score; the best dev checkpoint is always the one scored; "
        "default: no early stopping)",
        {"type": positive_int},
    ),
    Option(
        "--dense",
        "dense gradients for the embedding tables (no SparseAdam)",
        {"action": "store_true"},
    ),
    Option(
        "--max-steps",
        "stop after this many optimiser steps in total (smoke tests)",
        {"type": positive_int},
    ),
    Option("--compile", "torch.compile the model", {"action": "store_true"}, ("train",)),
    # train sets fields of its one model; compare of every family that has the field
    Option(
        "--set",
        "",
        {"action": "append"},
        per_command={
            "train": {
                "dest": "set",
                "metavar": "FIELD=VALUE",
                "help": "a model-config field (num_layers=2, kernel_sizes=3,4,5, or with the "
                "family transformer.num_layers=2, as in cplxnet compare); repeatable; applied "
                "last",
            },
            "compare": {
                "dest": "sets",
                "metavar": "KEY=VALUE",
                "help": "model field for every family that has it (d_model=128) or one family "
                "(cnn.num_filters=64); repeatable",
            },
        },
    ),
    # -- language models (--task lm) -----------------------------------------------------------
    Option(
        "--tokens",
        "tokens of a text stream: characters (default; scored in bits per character) or "
        "whitespace-separated words (scored in perplexity)",
        {"choices": ("char", "word")},
    ),
    Option(
        "--context",
        f"training length L (default {_LM['context']}; synthetic tasks: the longest training "
        f"prompt, default {SYNTHETIC_CONTEXT}); the test is scored at "
        f"{', '.join(_MULTIPLES[:-1])} and {_MULTIPLES[-1]}",
        {"type": positive_int, "metavar": "L"},
    ),
    Option(
        "--steps",
        f"optimiser steps (default: {lm_default('steps')})",
        {"type": positive_int},
        per_command={
            "train": {
                "help": f"optimiser steps (default: {lm_default('steps')}; --epochs N instead: "
                "N passes over the training tokens)"
            }
        },
    ),
    Option(
        "--eval-every",
        f"score dev and save a checkpoint every N steps (default {lm_default('eval_every')})",
        {"type": positive_int, "metavar": "N"},
    ),
    Option(
        "--monitor",
        "the dev score that chooses best.pt and counts for --patience: loss, or accuracy (a "
        "synthetic task's dev exact match; only a strictly higher one is better) (default "
        f"{lm_default('monitor')})",
        {"choices": MONITORS},
    ),
    Option(
        "--schedule",
        f"learning rate after the warm-up: constant or cosine (default {lm_default('schedule')}; "
        "cosine decays to --min-lr-ratio x --lr at the last step; nanoGPT's recipe)",
        {"choices": SCHEDULES},
    ),
    Option(
        "--warmup-steps",
        f"linear learning-rate warm-up over the first N steps (default "
        f"{lm_default('warmup_steps')})",
        {"type": non_negative_int, "metavar": "N"},
    ),
    Option(
        "--min-lr-ratio",
        "the cosine schedule's floor as a fraction of --lr, 0..1 (default "
        f"{lm_default('min_lr_ratio', 'g')})",
        {"type": unit_interval, "metavar": "R"},
    ),
    # -- process ---------------------------------------------------------------------------------
    Option(
        "--threads",
        "torch CPU threads (default: torch's choice; on a busy machine 1 is often fastest)",
        {"type": positive_int},
        commands=("train", "evaluate", "predict", "compare", "generate", "inspect"),
        per_command={"compare": {"help": "torch threads per cell (default max(1, cores // jobs))"}},
    ),
)

#: Every shared option by its flag.
OPTIONS: dict[str, Option] = {o.flag: o for o in _OPTION_LIST}


def add_options(group: Any, command: str, flags: Iterable[str]) -> None:
    """Add the options ``flags`` of :data:`OPTIONS`, as ``command`` has them, to ``group`` (an
    ``argparse`` parser or argument group)."""
    for flag in flags:
        group.add_argument(flag, **OPTIONS[flag].arguments(command))
