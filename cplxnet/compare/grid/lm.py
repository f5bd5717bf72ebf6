"""The language-model study: a grid of encodings x number fields x seeds of causal decoders
(:mod:`cplxnet.tasks.lm`), each trained at context ``L`` and scored at ``L, 2L, 4L, 8L`` (a text
stream, in bits per character or perplexity) or on prompt-length bins (a synthetic copy/reverse
task, exact-match accuracy).

The cells run through the comparison grid's store, scheduler and workers
(:mod:`cplxnet.compare.grid`) as cells of mode ``"lm"`` (:data:`KIND`): resumable (a re-run
skips finished cells; an interrupted cell continues from its last checkpoint), parallel
(``jobs``), a failing cell recorded as an error while the grid goes on. The budget (preset,
tokens, context and the :class:`cplxnet.tasks.lm.LMOptions` fields but the seed) is stored in
``grid.json`` under ``"lm"``.

Encodings are given as for classification (:mod:`cplxnet.compare.specs`); an item may end in
``@real``, ``@complex`` or ``@both`` to choose its number fields regardless of ``--number``
(``complex-order@both`` runs complex-order in the complex and the real field while the other
encodings keep their natural one).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...encodings.specs import (
    EncodingSpec,
    check_distinct,
    check_field_values,
    check_option_values,
    field_defaults,
    numbers_for,
    parse_encodings,
    parse_numbers,
)
from ...engine.runs import clear_run_folder, is_run_folder
from ...tasks.lm.options import LM_PRESET
from .cells import (
    MAX_CELLS,
    MAX_CONFIGURATIONS,
    Cell,
    CellKind,
    CompareError,
    GridOptions,
    check_count,
    data_slug,
    register_kind,
)

__all__ = [
    "KIND",
    "LM_FAMILY",
    "lm_grid_options",
    "parse_lm_encodings",
    "expand_lm_grid",
    "lm_cell_config",
    "train_lm_cell",
    "rescore_lm_cell",
    "lm_rows_to_csv",
    "LM_COLUMNS",
]

LM_FAMILY = "decoder"
MODE = "lm"
DEFAULT_PRESET = LM_PRESET
_FIELDS = r"@(real|complex|both|natural)"
FIELD_SUFFIX = re.compile(_FIELDS + "$")
INNER_FIELD = re.compile(_FIELDS + r"\b")  # a field suffix anywhere (before an item's end)
LM_COLUMNS = (
    "data",
    "tokens",
    "context",
    "family",
    "encoding",
    "number",
    "seed",
    "parameters",
    "length",
    "metric",
    "value",
    "na_reason",
    "dev_value",
    "best_step",
    "steps",
    "train_seconds",
    "train_cpu_seconds",
    "test_seconds",
    "status",
    "error",
    "encoding_spec",
    "cell_id",
    "options",
)
_TRAIN_FIELDS = (
    "steps",
    "batch_size",
    "lr",
    "weight_decay",
    "clip_norm",
    "eval_every",
    "eval_multiples",
    "schedule",
    "warmup_steps",
    "min_lr_ratio",
    "patience",
    "monitor",
    "batch_tokens",
)


def lm_grid_options(
    *,
    preset: str = DEFAULT_PRESET,
    tokens: str = "char",
    context: int = 64,
    train: dict[str, Any] | None = None,
    sets: dict[str, dict[str, Any]] | None = None,
    real_width: str = "flops",
) -> GridOptions:
    """The budget of a language-model grid. ``train``: :class:`cplxnet.tasks.lm.LMOptions` fields
    (not the seed); ``sets``: decoder fields over the preset (``{"*": {...}}`` or
    ``{"decoder": {...}}``); ``real_width``: the real cells' widths (``flops``, the default:
    the equal-FLOP twin of :func:`cplxnet.models.real_twin`, as ``cplxnet train --task lm
    --real``)."""
    import cplxnet.models as zoo

    from ...tasks.lm import TOKENIZATIONS, LMOptions

    if zoo.PRESETS.get(preset, {}).get("family") != LM_FAMILY:
        usable = [n for n, p in zoo.PRESETS.items() if p["family"] == LM_FAMILY]
        raise CompareError(f"--preset {preset} is not a language model; use {', '.join(usable)}")
    if tokens not in TOKENIZATIONS:
        raise CompareError(f"--tokens must be one of {', '.join(TOKENIZATIONS)}, got {tokens!r}")
    train = {k: v for k, v in (train or {}).items() if v is not None and k != "seed"}
    unknown = sorted(set(train) - set(_TRAIN_FIELDS))
    if unknown:
        raise CompareError(f"unknown language-model training option(s) {', '.join(unknown)}")
    defaults = dict(zoo.LM_PRESET_TRAINING.get(preset, {}))
    defaults.pop("context", None)
    train = {**defaults, **train}
    try:
        LMOptions(**train)
    except (TypeError, ValueError) as err:
        raise CompareError(f"training options: {err}") from None
    if "eval_multiples" in train:
        train["eval_multiples"] = list(train["eval_multiples"])
    return GridOptions(
        sets=dict(sets or {}),
        real_width=real_width,
        lm={"preset": preset, "tokens": tokens, "context": int(context), "train": train},
    )


def parse_lm_encodings(text: str, numbers: tuple[str, ...]) -> list[tuple[EncodingSpec, list[str]]]:
    """``(spec, number fields)`` for each encoding of ``text``; an item ending in ``@field``
    (``real``, ``complex``, ``both``, ``natural``) has those fields, the others ``numbers``."""
    pieces = [p.strip() for p in str(text).split(",") if p.strip()]
    items: list[str] = []  # each encoding with the key=value items that continue it
    fields: list[tuple[str, ...] | None] = []
    for piece in pieces:
        m = FIELD_SUFFIX.search(piece)
        if m:
            piece = piece[: m.start()]
        inner = INNER_FIELD.search(piece)
        if inner:
            raise CompareError(
                f"--encodings {piece}: the field suffix @{inner.group(1)} ends an encoding's item, "
                f"after its options (e.g. complex-order:phase=false@both)"
            )
        if items and "=" in piece and ":" not in piece:  # key=value continues the item before
            items[-1] += "," + piece
            fields[-1] = parse_numbers(m.group(1)) if m else fields[-1]
        else:
            items.append(piece)
            fields.append(parse_numbers(m.group(1)) if m else None)
    if not items:
        parse_encodings(text)  # its error: no encodings given
    # each item parsed alone: a named group such as table4 expands with the item's fields, and
    # an encoding given twice keeps both items (expand_lm_grid drops a repeated configuration)
    out = [(s, numbers_for(s, f or numbers)) for item, f in zip(items, fields)
           for s in parse_encodings(item)]  # fmt: skip
    check_distinct((s, n) for s, ns in out for n in ns)
    return out


def expand_lm_grid(
    datas: Sequence[str],
    encodings: Sequence[tuple[EncodingSpec, list[str]]],
    seeds: Sequence[int],
    options: GridOptions,
) -> tuple[list[Cell], list[str]]:
    """The cells, seed-major (every configuration of the first seed, then the next seed), and
    notes. Every encoding of the registry acts on sites the decoder has; a configuration that
    cannot be built (a bad option) raises :class:`CompareError`."""
    import cplxnet.models as zoo

    from ...tasks.lm.task import SYNTHETIC_PREFIX, make_task, monitor_problem

    check_count("--data: the number of datasets x encodings", len(datas) * len(encodings),
                MAX_CONFIGURATIONS, "MAX_CONFIGURATIONS")  # fmt: skip
    monitor = (options.lm.get("train") or {}).get("monitor", "loss")
    for data in dict.fromkeys(datas):  # read and checked as cplxnet train --task lm does
        problem = monitor_problem(monitor, data)
        if problem:
            raise CompareError(problem)
        if data.startswith(SYNTHETIC_PREFIX) or data in ("mr", "trec") or os.path.isfile(data):
            make_task(data, options.lm.get("tokens", "char"), int(options.lm.get("context", 64)))
        else:
            raise CompareError(
                f"--data {data}: no such file; give a UTF-8 text file, mr, trec, "
                "synthetic:copy or synthetic:reverse"
            )
    fields = {**options.sets.get("*", {}), **options.sets.get(LM_FAMILY, {})}
    try:
        check_field_values(field_defaults(zoo.CONFIG_CLASSES[LM_FAMILY]), fields, "--set")
    except ValueError as err:
        raise CompareError(str(err)) from None
    configs: list[tuple[EncodingSpec, str]] = []
    notes: list[str] = []
    for spec, numbers in encodings:
        for number in numbers:
            if (spec.canonical, number) in {(s.canonical, n) for s, n in configs}:
                continue
            try:
                check_option_values(spec)  # rotary:base=abc: one line naming the option
                config = lm_cell_config(spec, number, options)
                model = zoo.build_model(dataclasses.replace(config, vocab_size=8))
                notes += _range_notes(model, config, spec, datas, options, notes)
                if spec.evaluation:  # as built at evaluation (a scaling: at twice the length)
                    scaled = {**config.encoding_options, **spec.evaluation}
                    if "scaling" in spec.evaluation:
                        scaled["factor"] = 2.0
                    zoo.build_model(dataclasses.replace(config, vocab_size=8,
                                                        encoding_options=scaled))  # fmt: skip
                if spec.model:
                    raise TypeError(f"model fields {sorted(spec.model)} are not decoder fields")
            except (TypeError, ValueError, KeyError) as err:
                raise CompareError(f"decoder with {spec.label} ({number}): {err}") from None
            configs.append((spec, number))
    trained = {(s.canonical, n) for s, n in configs if not s.evaluation}
    for spec, number in configs:
        if spec.evaluation and (spec.trained.canonical, number) not in trained:
            raise CompareError(
                f"{spec.label} ({number}) re-scores the runs of {spec.trained.label} ({number}); "
                f"add {spec.trained.label} to --encodings"
            )
    check_count("the number of cells", len(seeds) * len(datas) * len(configs), MAX_CELLS,
                "MAX_CELLS")  # fmt: skip
    # each re-scored cell right after the trained cell whose kept run it reads
    ordered = [
        config
        for spec, number in configs
        if not spec.evaluation
        for config in [(spec, number), *[(s, n) for s, n in configs if s.evaluation and n == number
                                         and s.trained.canonical == spec.canonical]]
    ]  # fmt: skip
    cells = [
        Cell(data, None, LM_FAMILY, spec, number, seed, MODE)
        for seed in seeds
        for data in datas
        for spec, number in ordered
    ]
    return cells, notes


def _range_notes(
    model: Any,
    config: Any,
    spec: EncodingSpec,
    datas: Sequence[str],
    options: GridOptions,
    made: list[str],
) -> list[str]:
    """A note for each dataset whose longest evaluated input is longer than the range a
    randomized encoding of ``model`` draws its training positions from, as built for the
    data's training length (Ruoss et al. draw from a range covering the longest test input)."""
    import cplxnet.models as zoo

    from ...encodings.randomized import RandomizedEncoding
    from ...tasks.lm.options import LMOptions
    from ...tasks.lm.task import SYNTHETIC_PREFIX

    if not any(isinstance(m, RandomizedEncoding) for m in model.modules()):
        return []
    L = int(options.lm.get("context", 64))
    multiples = (options.lm.get("train") or {}).get("eval_multiples", LMOptions.eval_multiples)
    out = []
    for data in dict.fromkeys(datas):
        if data.startswith(SYNTHETIC_PREFIX):  # prompt <sep> answer; the test's prompts to 4L
            trained, longest = 2 * L + 1, 8 * L + 1
        else:
            trained, longest = L, L * max(multiples)
        built = zoo.build_model(dataclasses.replace(config, vocab_size=8, max_len=trained))
        drawn = min(m.max_positions for m in built.modules() if isinstance(m, RandomizedEncoding))
        key = "randomized.max_positions" if "+" in spec.name else "max_positions"  # its member
        note = (
            f"{spec.label} on {data}: training draws positions below {drawn}, the test reads "
            f"{longest} tokens: add :{key}={longest} to draw from a range covering it "
            "(Ruoss et al.)"
        )
        if drawn < longest and note not in made:
            out.append(note)
    return out


def lm_cell_config(spec: EncodingSpec, number: str, options: GridOptions) -> Any:
    """The decoder config of a configuration: the preset, the ``--set`` overrides, the
    encoding; a real cell is :func:`cplxnet.models.real_twin` of it with ``real_width``."""
    import cplxnet.models as zoo

    from .cells import REAL_WIDTHS

    fields = dict(options.sets.get("*", {}))
    fields.update(options.sets.get(LM_FAMILY, {}))
    fields.update(encoding=spec.name, encoding_options=dict(spec.options))
    config = zoo.preset_config(options.lm.get("preset", DEFAULT_PRESET), **fields)
    if number == "real":
        config = zoo.real_twin(config, match=REAL_WIDTHS[options.real_width])
    return config


def _cell_id(cell: Cell) -> str:
    data = cell.data.replace(":", "-") if ":" in cell.data else data_slug(cell.data)
    return f"lm-{data}-{cell.family}-{cell.encoding.slug}-{cell.number}-s{cell.seed}"


def _same_run(
    run_dir: str, source: str, config: Any, train: dict[str, Any], options: GridOptions
) -> bool:
    """Whether the run folder was trained with this cell's data, config and options."""
    from .store import stored_run_config

    stored = stored_run_config(run_dir, config)
    if stored is None:
        return False
    stored_train = dict(stored.get("train", {}))
    data = stored.get("data", {})
    return (
        data.get("source") == source
        and all(stored_train.get(k) == v for k, v in train.items())
        and data.get("context") == options.lm.get("context")
        and data.get("tokens") in (options.lm.get("tokens"), "synthetic")
    )


def train_lm_cell(
    cell: Cell,
    options: GridOptions,
    run_dir: str,
    callback: Callable[[int, dict], None] | None = None,
) -> dict[str, Any]:
    """Train (or finish) one language-model cell and return the fields of its row."""
    from ...tasks.lm import LMOptions, resume_lm, train_lm

    if cell.encoding.evaluation:
        return rescore_lm_cell(cell, run_dir)
    lm = options.lm
    config = lm_cell_config(cell.encoding, cell.number, options)
    train = {**lm.get("train", {}), "seed": cell.seed}
    if "eval_multiples" in train:
        train["eval_multiples"] = list(train["eval_multiples"])
    results, resumed, previous, read_back = None, False, 0.0, False
    if not is_run_folder(run_dir):  # an empty leftover is removed, anything else refused
        clear_run_folder(run_dir)
    if os.path.isdir(run_dir) and _same_run(run_dir, cell.data, config, train, options):
        done = os.path.join(run_dir, "results.json")
        if os.path.exists(done):  # finished but not yet recorded (interrupted in between)
            with open(done, encoding="utf-8") as fh:
                results = json.load(fh)
            previous = float(results.get("train_seconds", 0)) + float(
                results.get("test_seconds", 0)
            )
            resumed = read_back = True
        elif os.path.exists(os.path.join(run_dir, "checkpoint.pt")):
            results = resume_lm(run_dir, quiet=True, callback=callback)
            resumed = True
    if results is None:
        clear_run_folder(run_dir)
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        results = train_lm(
            config,
            cell.data,
            run_dir,
            LMOptions.from_dict(train),
            tokens=lm.get("tokens", "char"),
            context=int(lm.get("context", 64)),
            quiet=True,
            callback=callback,
        )
    return {**_row(results, run_dir), "resumed": resumed, "previous_seconds": previous,
            "read_back": read_back}  # fmt: skip


def _row(results: dict[str, Any], run_dir: str) -> dict[str, Any]:
    """The row fields of a finished run (its results.json and metrics.jsonl)."""
    from .store import read_history

    metric = results["metric"]
    return {
        "parameters": results["real_parameters"],
        "tokens": results["tokens"],
        "context": results["context"],
        "metric": metric,
        "test": results["test"],
        "dev": results["dev"],
        "dev_value": results["dev"].get(metric, results["dev"].get("loss")),
        "best_step": results["best_step"],
        "steps": results["steps"],
        "train_seconds": results["train_seconds"],
        "train_cpu_seconds": results.get("train_cpu_seconds"),
        "test_seconds": results.get("test_seconds"),
        "train_size": (results.get("splits") or {}).get("train"),
        "history": read_history(run_dir),
    }


def _rescored_source(cell: Cell) -> Cell:
    """The trained cell whose kept run an evaluation variant re-scores."""
    return dataclasses.replace(cell, encoding=cell.encoding.trained)


def rescore_lm_cell(cell: Cell, run_dir: str) -> dict[str, Any]:
    """The row of an evaluation variant (:data:`cplxnet.compare.specs.EVAL_VARIANTS`): the kept
    run folder of the cell it re-scores (same data, field and seed, the encoding as trained:
    ``EncodingSpec.trained``), beside ``run_dir``, scored again on its test part with the
    encoding options ``cell.encoding.evaluation``: a rotary ``scaling`` set at each evaluation
    length ``n`` with factor ``n / L`` (:func:`cplxnet.tasks.lm.scaled_models`; at ``n = L`` the
    run's own model), any other option at every length (:func:`cplxnet.tasks.lm.rebuilt_model`). Its
    training fields are that run's; ``rescored`` says what was done. A run that is missing or
    not finished is a :class:`CompareError` with the fix."""
    from ...tasks.lm import evaluate_lm_run, load_lm_run

    source = _rescored_source(cell)
    src = os.path.join(os.path.dirname(run_dir), source.cell_id)
    done = os.path.join(src, "results.json")
    if not os.path.isfile(done):
        why = "has not finished" if os.path.isdir(src) else "is missing"
        raise CompareError(
            f"{cell.encoding.label} re-scores runs/{source.cell_id}, which {why}: train that cell "
            "with --keep-runs (delete its cells/ file), then --retry-errors"
        )
    with open(done, encoding="utf-8") as fh:
        results = json.load(fh)
    started = time.perf_counter()
    evaluation = dict(cell.encoding.evaluation)
    scaled = "scaling" in evaluation
    test = evaluate_lm_run(load_lm_run(src), evaluation=evaluation)
    return {
        **_row(results, src),
        "test": test,
        "test_seconds": round(time.perf_counter() - started, 1),
        "rescored": {
            "cell_id": source.cell_id,
            "encoding_options": dict(cell.encoding.evaluation),
            "factor": "n / L at each evaluation length n (L: the longest training input); "
            "the trained encoding at n <= L"
            if scaled
            else "none: the options at every length",
        },
    }


def _fmt_value(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _outcome(row: dict[str, Any]) -> str:
    metric = row.get("metric", "bpc")
    return f"test {metric} " + ", ".join(
        f"{k}: {_fmt_value(v.get(metric))}" for k, v in (row.get("test") or {}).items()
    )


def _progress(cell: Cell, options: GridOptions, step: int, metrics: dict[str, Any]) -> str:
    dev = ", ".join(f"{k[4:]} {v:.4f}" for k, v in metrics.items() if k.startswith("dev_"))
    return f"  {cell.describe()}: step {step} dev {dev} ({metrics.get('seconds', 0):.0f}s)"


def lm_rows_to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """CSV text of language-model rows: one line per run and evaluation length (or bin); a
    failed run has one line with its error."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=LM_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        flat = {k: ("" if row.get(k) is None else row.get(k)) for k in LM_COLUMNS}
        test = row.get("test") or {}
        if not test:
            writer.writerow(flat)
            continue
        metric = row.get("metric", "bpc")
        for length, entry in test.items():
            value = entry.get(metric)
            writer.writerow(
                {
                    **flat,
                    "length": length,
                    "value": "" if value is None else value,
                    "na_reason": entry.get("n/a", ""),
                }
            )
    return buf.getvalue()


KIND = register_kind(
    MODE,
    CellKind(
        split=lambda cell: "stream",
        cell_id=_cell_id,
        train=train_lm_cell,
        outcome=_outcome,
        progress=_progress,
        to_csv=lm_rows_to_csv,
        needs=lambda cell: _rescored_source(cell).cell_id if cell.encoding.evaluation else None,
    ),
)
