"""The report of a language-model grid (:mod:`cplxnet.compare.grid.lm`): a table with the
configurations (encoding and number field) as rows and the evaluation lengths as columns (mean
+- sample std over seeds, the best of each column in bold, n/a with its reason), the training
time per run, signed-rank tests of a target encoding against each other configuration at each
length, and a plot of the score against the evaluation length, one line per configuration (the
layout of Press et al., "Train Short, Test Long", ICLR 2022, Figure 1).

A section on training follows (:mod:`cplxnet.compare.report.lm_curves`): per configuration the
steps, training tokens and CPU seconds per run, the runs stopped early, the plateau gain over the
last fifth of training, and the learning curves (``curves.png``).

``report.md``, ``lm.png`` and ``curves.png`` are written into the results folder; ``cplxnet
report DIR`` re-renders them from the stored results.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...tasks.lm.options import MONITORED
from .lm_curves import plot_curves, training_table
from .plots import add_legend, column_styles, pyplot, save_figure
from .render import (
    check_report_folder,
    failed_runs,
    load_results,
    mixed_threads,
    report_place,
    results_folder,
    thread_counts,
    write_report,
)
from .statistics import WILCOXON_METHOD, is_ok, mean_std, min_attainable_p, paired_test
from .tables import fmt_p, markdown_table

__all__ = [
    "LMGroup",
    "is_lm_results",
    "load_lm_rows",
    "lm_groups",
    "lm_table",
    "lm_paired_table",
    "plot_lm",
    "lm_figure",
    "render_lm_report",
]

LOWER_IS_BETTER = {"bpc": True, "ppl": True, "perplexity": True, "accuracy": False}


@dataclass
class LMGroup:
    """The runs of one configuration: ``values[length][seed]`` (``None`` where n/a)."""

    encoding: str
    number: str
    values: dict[str, dict[int, float | None]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    nonfinite: dict[str, list[int]] = field(default_factory=dict)  # length -> seeds left out
    rescored: bool = False  # an evaluation variant: it trained nothing
    train_seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    parameters: int | None = None

    def stats(self, length: str) -> tuple[float, float, int] | None:
        """Mean, std and count of the seeds that scored ``length`` (``None``: none did)."""
        vals = [v for v in self.values.get(length, {}).values() if v is not None]
        if not vals:
            return None
        m, s = mean_std(vals)
        return m, s, len(vals)


def is_lm_results(path: str) -> bool:
    """Whether ``path`` (a folder, results.json or results.csv) holds language-model rows."""
    try:
        rows = load_results(path)
    except (FileNotFoundError, ValueError):
        return False
    return bool(rows) and all(r.get("mode") == "lm" or "length" in r for r in rows)


def _length_key(length: str) -> tuple[float, str]:
    head = str(length).split("-")[0]
    try:
        return float(head), str(length)
    except ValueError:
        return math.inf, str(length)


def load_lm_rows(path_or_rows: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs with their ``test`` dicts, from a folder, results.json, results.csv (one line per
    run and length, regrouped) or rows."""
    rows = load_results(path_or_rows) if isinstance(path_or_rows, str) else list(path_or_rows)
    if not rows or "test" in rows[0] or "length" not in rows[0]:
        return rows
    runs: dict[str, dict[str, Any]] = {}
    for r in rows:  # CSV lines
        run = runs.setdefault(str(r["cell_id"]), {**r, "test": {}})
        if r.get("length") in (None, ""):
            continue
        metric = r.get("metric") or "bpc"
        value = r.get("value")
        value = None if value in (None, "") else float(value)
        entry: dict[str, Any] = {metric: value}
        if r.get("na_reason"):
            entry["n/a"] = r["na_reason"]
        run["test"][str(r["length"])] = entry
    return list(runs.values())


def _seed(row: dict[str, Any]) -> int:
    try:
        return int(row["seed"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"the result of {row.get('cell_id', row.get('encoding'))} has no integer seed "
            f"({row.get('seed')!r}); restore its cell file, or move it away"
        ) from None


def lm_groups(
    rows: Sequence[dict[str, Any]],
) -> tuple[dict[tuple[str, str], LMGroup], list[str], str]:
    """Groups by (encoding, number field) in order of appearance, the evaluation lengths (in
    increasing order) and the metric."""
    groups: dict[tuple[str, str], LMGroup] = {}
    lengths: set[str] = set()
    metric = "bpc"
    for row in rows:
        if not is_ok(row) or not row.get("test"):
            continue
        metric = row.get("metric") or metric
        key = (str(row["encoding"]), str(row["number"]))
        g = groups.setdefault(key, LMGroup(*key))
        seed = _seed(row)
        g.rescored = bool(row.get("rescored"))
        for length, entry in row["test"].items():
            lengths.add(str(length))
            value = entry.get(metric)
            value = None if value is None else float(value)
            if value is not None and not math.isfinite(value):  # a diverged run: left out, noted
                g.nonfinite.setdefault(str(length), []).append(seed)
                value = None
            g.values.setdefault(str(length), {})[seed] = value
            if value is None and entry.get("n/a"):
                g.reasons[str(length)] = str(entry["n/a"])
        if row.get("train_seconds") not in (None, "") and not g.rescored:
            g.train_seconds.append(float(row["train_seconds"]))
        if row.get("train_cpu_seconds") not in (None, "") and not g.rescored:
            g.cpu_seconds.append(float(row["train_cpu_seconds"]))
        if row.get("parameters") not in (None, ""):
            g.parameters = int(row["parameters"])
    return groups, sorted(lengths, key=_length_key), metric


def _seed_count(groups: dict[tuple[str, str], LMGroup]) -> int:
    """The most seeds a configuration has at one length (a seed that scored NaN counts)."""
    return max((len(v) for g in groups.values() for v in g.values.values()), default=0)


def _labels(keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Row labels: the encoding, with its number field when both fields appear."""
    both = len({n for _, n in keys}) > 1
    return {k: f"{k[0]} ({k[1]})" if both else k[0] for k in keys}


def _length_header(length: str, context: int | None) -> str:
    if context and length.isdigit() and int(length) % context == 0:
        m = int(length) // context
        return f"{length} ({'L' if m == 1 else f'{m}L'})"
    return length


def _fmt_seconds(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{sum(values) / len(values):.0f}"


def lm_table(
    rows: Sequence[dict[str, Any]], *, digits: int = 3, context: int | None = None
) -> tuple[str, list[str]]:
    """The markdown table and its footnotes (the reasons for n/a)."""
    groups, lengths, metric = lm_groups(rows)
    if not groups:
        return "", []
    lower = LOWER_IS_BETTER.get(metric, True)
    best: dict[str, float] = {}
    for length in lengths:
        means = [s[0] for g in groups.values() if (s := g.stats(length)) is not None]
        if means:
            best[length] = min(means) if lower else max(means)
    labels = _labels(list(groups))
    seeds = _seed_count(groups)
    header = (
        ["encoding"]
        + [_length_header(x, context) for x in lengths]
        + ["parameters", "train s/run (wall)", "train CPU s/run"]
    )
    table = []
    notes: list[str] = []
    for key, g in groups.items():
        cells = [labels[key]]
        note: int | None = None
        for length in lengths:
            s = g.stats(length)
            left_out = ""
            if g.nonfinite.get(length):
                seeds_out = ", ".join(str(x) for x in sorted(g.nonfinite[length]))
                text = f"not a finite number for seed {seeds_out}; left out"
                if text not in notes:
                    notes.append(text)
                left_out = f" [{notes.index(text) + 1}]"
            if s is None:  # one footnote per configuration: its first reason
                if left_out:
                    cells.append(f"n/a{left_out}")
                    continue
                if note is None:
                    note = len(notes) + 1
                    notes.append(g.reasons.get(length, "no seed has a score at this length"))
                cells.append(f"n/a [{note}]")
                continue
            mean, std, n = s
            text = f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if n > 1 else "")  # std: n > 1
            if round(mean, 9) == round(best[length], 9):
                text = f"**{text}**"
            if n < seeds:
                text += f" (n={n})"
            cells.append(text + left_out)
        cells += [
            "–" if g.parameters is None else f"{g.parameters:,}",
            _fmt_seconds(g.train_seconds),
            _fmt_seconds(g.cpu_seconds),
        ]
        table.append(cells)
    return markdown_table(header, table, "|---|" + "---:|" * (len(header) - 1)), notes


def _target_key(groups: dict[tuple[str, str], LMGroup], target: str) -> tuple[str, str] | None:
    keys = [k for k in groups if k[0] == target]
    if not keys:
        return None
    return next((k for k in keys if k[1] == "complex"), keys[0])


def lm_paired_table(
    rows: Sequence[dict[str, Any]],
    *,
    target: str = "complex-order",
    digits: int = 3,
    context: int | None = None,
) -> str:
    """The target configuration against each other one at each evaluation length: the seeds
    both scored there, paired by seed, and a two-sided Wilcoxon signed-rank test
    (:func:`cplxnet.compare.report.paired_test`). A run's scores at different lengths are not
    independent, so the lengths are not pooled. A cell reads ``mean diff (wins/ties/losses, p)``:
    ``mean diff`` is target minus other (negative is better for bpc and perplexity) and ``wins``
    count seeds where the target is better; ``–`` where no seed has both scores."""
    groups, lengths, metric = lm_groups(rows)
    tkey = _target_key(groups, target)
    if tkey is None:
        return ""
    lower = LOWER_IS_BETTER.get(metric, True)
    labels = _labels(list(groups))

    def scores(g: LMGroup, length: str) -> dict[int, float]:
        return {seed: v for seed, v in g.values.get(length, {}).items() if v is not None}

    header = ["target", "against"] + [_length_header(x, context) for x in lengths]
    table = []
    for key, g in groups.items():
        if key == tkey:
            continue
        cells = []
        for length in lengths:
            ta, other = scores(groups[tkey], length), scores(g, length)
            t = paired_test(other, ta) if lower else paired_test(ta, other)
            if not t.n:
                cells.append("–")
                continue
            diff = -t.delta if lower else t.delta
            cells.append(f"{diff:+.{digits}f} ({t.wins}/{t.ties}/{t.losses}, p {fmt_p(t.p)})")
        if any(c != "–" for c in cells):
            table.append([labels[tkey], labels[key], *cells])
    rule = "|---|---|" + "---:|" * len(lengths)
    return markdown_table(header, table, rule) if table else ""


def _paired_text(rows: Sequence[dict[str, Any]], target: str, metric: str, what: str) -> str:
    """The paragraph above :func:`lm_paired_table`."""
    seeds = _seed_count(lm_groups(rows)[0])
    sign = "negative" if LOWER_IS_BETTER.get(metric, True) else "positive"
    return (
        f"At each evaluation {what}, the seeds that both configurations scored, paired by seed "
        "(a run's scores at different lengths are not independent, so the lengths are not "
        f"pooled). Each cell: the mean difference {target} minus the other ({metric}; {sign}: "
        f"{target} is better), then {target}'s wins/ties/losses and the p-value of a two-sided "
        f"Wilcoxon signed-rank test ({WILCOXON_METHOD}). With n seeds the smallest attainable "
        "p is 2 / 2^n: "
        f"{fmt_p(min_attainable_p(seeds))} for the {seeds} seed{'s' if seeds != 1 else ''} here.\n"
    )


def lm_figure(rows: Sequence[dict[str, Any]], *, context: int | None = None) -> Any:
    """The figure of :func:`plot_lm` (``None`` without scores)."""
    groups, lengths, metric = lm_groups(rows)
    if not groups:
        return None
    plt = pyplot()
    numeric = all(x.isdigit() for x in lengths)
    labels = _labels(list(groups))
    styles = column_styles(groups)  # one colour and marker per (encoding, field), fixed
    styles = {k: dataclasses.replace(v, label=labels[k]) for k, v in styles.items()}
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn = []
    for key, g in groups.items():
        xs, ms, ss = [], [], []
        for i, length in enumerate(lengths):
            s = g.stats(length)
            if s is None:
                continue
            xs.append(int(length) if numeric else i)
            ms.append(s[0])
            ss.append(s[1])
        if xs:
            ax.errorbar(xs, ms, yerr=ss, capsize=2, markersize=5, **styles[key].line_kwargs())
            drawn.append(key)
    if numeric:
        ax.set_xscale("log", base=2)
        ax.set_xticks([int(x) for x in lengths])
        ax.set_xticklabels(lengths)
        ax.set_xlabel("evaluation length (tokens)")
        if context:
            ax.axvline(context, color="grey", linestyle=":", linewidth=1)
    else:
        ax.set_xticks(range(len(lengths)))
        ax.set_xticklabels(lengths)
        ax.set_xlabel("prompt length")
    ax.set_ylabel({"bpc": "bits per character", "ppl": "perplexity"}.get(metric, metric))
    ax.grid(alpha=0.3)
    add_legend(fig, styles, drawn)
    return fig


def plot_lm(rows: Sequence[dict[str, Any]], path: str, *, context: int | None = None) -> str | None:
    """The score against the evaluation length (log2 axis for lengths; prompt-length bins as
    categories), one line per configuration with the std over seeds as error bars, the training
    length dotted; each (encoding, number field) keeps one colour and marker
    (:func:`cplxnet.compare.report.plots.column_styles`) and the legend below the axes names every
    line and is never clipped (:func:`cplxnet.compare.report.plots.add_legend`). Returns the path
    (``None`` without scores)."""
    fig = lm_figure(rows, context=context)
    return None if fig is None else save_figure(fig, path)


def _threads(rows: Sequence[dict[str, Any]]) -> str:
    """The one torch thread count the runs trained with, as words ("" if unknown or mixed)."""
    threads = thread_counts(rows)
    if None in threads or len(threads) != 1:
        return ""
    (n,) = threads
    return " of its one thread" if n == 1 else f" over its {n} threads"


def _budget(options: dict[str, Any] | None, rows: Sequence[dict[str, Any]]) -> str:
    lm = (options or {}).get("lm") or {}
    train = lm.get("train", {})
    ok = [r for r in rows if is_ok(r) and r.get("train_seconds") not in (None, "")
          and not r.get("rescored")]  # a re-scored cell has its run's seconds  # fmt: skip
    parts = []
    if lm:
        synthetic = any(str(r.get("data", "")).startswith("synthetic:") for r in rows)
        what = (
            f"training prompts of 1 to L = {lm.get('context')} symbols"
            if synthetic
            else f"{lm.get('tokens')} tokens, context L = {lm.get('context')}"
        )
        parts.append(
            f"- preset `{lm.get('preset')}`, {what}; real cells: the "
            f"`{(options or {}).get('real_width')}` twin"
        )
    if train:
        if train.get("schedule", "constant") == "constant":
            recipe = "constant learning rate"
        else:
            floor = train.get("min_lr_ratio", 0.1)
            recipe = (f"{train.get('warmup_steps', 0)} steps of linear warm-up, then "
                      f"{train['schedule']} decay to {floor} x lr")  # fmt: skip
        monitor = train.get("monitor", "loss")
        monitored = MONITORED.get(monitor, f"dev {monitor}")
        if train.get("patience"):
            recipe += (f"; early stop after {train['patience']} evaluations without a better "
                       f"{monitored}")  # fmt: skip
        parts.append(
            "- " + ", ".join(f"{k} {v}" for k, v in sorted(train.items())) + f" (AdamW, {recipe}; "
            f"{monitored} at L chooses the checkpoint; the test part is scored once)"
        )
    if ok:
        wall = [float(r["train_seconds"]) for r in ok]
        cpu = [float(r["train_cpu_seconds"]) for r in ok if r.get("train_cpu_seconds")]
        text = f"- time per run: {sum(wall) / len(wall):.0f} s wall"
        if len(ok) > 1:
            text += f" (range {min(wall):.0f}-{max(wall):.0f} s)"
        if cpu:
            text += f", {sum(cpu) / len(cpu):.0f} s CPU" + _threads(ok)
        parts.append(text + (f", over {len(ok)} finished runs" if len(ok) > 1 else ", one run"))
    note = mixed_threads(rows)
    if note:
        parts.append(f"- note: {note}")
    if options:
        parts.append("\n```json\n" + json.dumps(options, indent=1, sort_keys=True) + "\n```")
    return "\n".join(parts) + "\n"


def _training_section(
    rows: Sequence[dict[str, Any]],
    options: dict[str, Any] | None,
    plots: bool,
    out_dir: str,
    written: list[str],
    h: str = "##",
    suffix: str = "",
) -> list[str]:
    """The section on training: plateau and budget per configuration
    (:func:`cplxnet.compare.report.lm_curves.training_table`) and the learning curves
    (``curves{suffix}.png``); empty when the rows have no histories (a results.csv)."""
    groups, _, _ = lm_groups(rows)
    labels = _labels(list(groups))
    table, notes = training_table(rows, labels, options)
    if not table:
        return []
    parts = [f"{h} Training: plateau and budget per run\n", table, " ".join(notes) + "\n"]
    rescored = sorted({str(r["encoding"]) for r in rows if is_ok(r) and r.get("rescored")})
    if rescored:
        parts.append(f"{', '.join(rescored)}: no training of its own; it re-scores the runs of "
                     "the configuration it names (the same curve).\n")  # fmt: skip
    if plots:
        name = f"curves{suffix}.png"
        png = plot_curves(rows, os.path.join(out_dir, name), labels)
        if png:
            written.append(png)
            parts.append(f"Learning curves: [{name}]({name}) (the dev score at L against "
                         "the step, mean over the runs evaluated at that step).\n\n"
                         f"![dev score at L against the training step]({name})\n")  # fmt: skip
    return parts


def _dataset_sections(
    rows: Sequence[dict[str, Any]],
    options: dict[str, Any] | None,
    target: str,
    digits: int,
    plots: bool,
    out_dir: str,
    written: list[str],
    context: int | None,
    h: str,
    suffix: str,
) -> list[str]:
    """The score table, the paired tests, ``lm{suffix}.png`` and the training section of the
    runs of one dataset, under headings of level ``h``."""
    parts: list[str] = []
    _, lengths, metric = lm_groups(rows)
    table, notes = lm_table(rows, digits=digits, context=context)
    if not table:
        return parts
    what = "prompt-length bin" if not all(x.isdigit() for x in lengths) else "length"
    better = "lower" if LOWER_IS_BETTER.get(metric, True) else "higher"
    parts.append(
        f"Test {metric} per evaluation {what}, mean ± sample std over seeds (one seed: the "
        f"mean alone; {better} is better; the best of each column in bold; n: the seeds "
        "with a score where fewer than the grid's)"
        + (f". Trained at L = {context}" if context else "")
        + (" (the longest training prompt)." if context and what != "length" else ".")
        + "\n"
    )
    parts.append(table)
    if notes:
        parts.append("\n".join(f"[{i + 1}] {n}" for i, n in enumerate(notes)) + "\n")
    paired = lm_paired_table(rows, target=target, digits=digits, context=context)
    if paired:
        parts.append(f"{h} {target} against each configuration, per evaluation {what}\n")
        parts.append(_paired_text(rows, target, metric, what))
        parts.append(paired)
    if plots:
        png = plot_lm(rows, os.path.join(out_dir, f"lm{suffix}.png"), context=context)
        if png:
            written.append(png)
            parts.append(f"![{metric} against evaluation length](lm{suffix}.png)\n")
    return parts + _training_section(rows, options, plots, out_dir, written, h, suffix)


def _suffixes(datasets: Sequence[str]) -> list[str]:
    """The suffix of each dataset's figure names: none for one dataset, else ``-NAME`` (other
    characters than letters, digits, ``.`` and ``_`` as ``_``); when two names would give one
    suffix, every dataset is numbered instead (``-1``, ``-2``, ...)."""
    if len(datasets) <= 1:
        return [""] * len(datasets)
    names = ["-" + "".join(c if c.isalnum() or c in "._" else "_" for c in d) for d in datasets]
    return names if len(set(names)) == len(names) else [f"-{i + 1}" for i in range(len(names))]


def _describe(row: dict[str, Any]) -> str:
    return f"{row.get('encoding')} ({row.get('number')}) seed {row.get('seed')}"


def render_lm_report(
    results: str | Sequence[dict[str, Any]],
    out_dir: str | None = None,
    *,
    target: str = "complex-order",
    digits: int = 3,
    plots: bool = True,
    options: dict[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """Write ``report.md`` (and ``lm.png``) into ``out_dir`` (default: the results folder, or
    the folder of the results file). Returns the markdown and the files written."""
    out_dir, options = report_place(results, out_dir, options)
    rows = load_lm_rows(results)
    scored = [r for r in rows if is_ok(r)] or rows  # a failed run is listed, not a dataset
    datasets = list(dict.fromkeys(str(r.get("data") or "") for r in scored)) or [""]
    suffixes = _suffixes(datasets)
    figures = [f"{name}{x}.png" for x in suffixes for name in ("lm", "curves")]
    check_report_folder(out_dir, results_folder(results), ("report.md", *figures))
    context = ((options or {}).get("lm") or {}).get("context")
    if context is None:
        context = next((int(r["context"]) for r in rows if r.get("context") not in (None, "")),
                       None)  # fmt: skip
    metrics = " / ".join(dict.fromkeys(str(r.get("metric") or "bpc") for r in scored))
    names = ", ".join(d or "no dataset named" for d in datasets)
    parts = [f"# Language models: {metrics} against evaluation length ({names})\n"]
    written: list[str] = []
    for data, suffix in zip(datasets, suffixes):  # each dataset its own tables and plots
        part = rows if len(datasets) == 1 else [r for r in rows if str(r.get("data") or "") == data]
        if len(datasets) > 1:
            parts.append(f"## {data or 'no dataset named'}\n")
        h = "##" if len(datasets) == 1 else "###"
        parts += _dataset_sections(part, options, target, digits, plots, out_dir, written,
                                   context, h, suffix)  # fmt: skip
    parts += failed_runs(rows, _describe)
    parts.append("## Budget\n")
    parts.append(_budget(options, rows))
    return write_report(out_dir, parts, written)
