"""What a language-model grid's runs did while training: the learning curves (dev score at the
training length against the step, mean over seeds, one line per configuration), whether each run
had plateaued when it stopped, and the budget each run used (steps, training tokens, CPU
seconds), from the ``history`` of each cell (the run's metrics.jsonl: one line per evaluation).

Plateau (the criterion of Press et al. 2022 and Kazemnejad et al. 2023 that a model has learned):
over the last fifth of the steps a run trained, the gain of its best dev score so far for
``S`` steps: relative, ``(best(0.8 S) - best(S)) / best(0.8 S)``, for the dev bpc or perplexity
at L of a text stream (lower is better); absolute, ``best(S) - best(0.8 S)`` in points of
exact match, for a synthetic task's dev exact match (higher is better, a fraction: a run still
at 0 has a gain too). A run that stopped early by ``patience`` counts the steps it trained. A
report whose runs do not all have the dev exact match (runs trained before it was recorded)
reads the dev loss of every run. A gain of :data:`PLATEAU` (1%, or 1 point) or more is
marked: that configuration was still learning.

A re-scored cell (an evaluation variant such as ``rotary-yarn``) trained nothing: it has the
curve of the run it re-scores and is left out of both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...tasks.lm.options import MONITORED
from .plots import add_legend, column_styles, pyplot, save_figure
from .statistics import is_ok, mean_std
from .tables import markdown_table

__all__ = [
    "PLATEAU",
    "HIGHER_IS_BETTER",
    "dev_key",
    "plateau_gain",
    "curve_groups",
    "plot_curves",
    "training_table",
]

#: The relative gain over the last fifth of training from which a run is still learning.
PLATEAU = 0.01
LAST_PART = 0.2


def dev_key(rows: Sequence[dict[str, Any]]) -> str:
    """The history key of the dev score at L: ``dev_bpc`` (characters), ``dev_perplexity``
    (words), ``dev_accuracy`` (a synthetic task's exact match, when every run with a history
    has it), else ``dev_loss``."""
    keys = {k for r in rows for m in (r.get("history") or []) for k in m}
    key = next((k for k in ("dev_bpc", "dev_perplexity") if k in keys), None)
    if key is not None:
        return key
    runs = [r for r in rows if r.get("history")]
    if runs and all(any("dev_accuracy" in m for m in r["history"]) for r in runs):
        return "dev_accuracy"
    return "dev_loss"


#: History keys whose larger values are better (every other dev score is lower-is-better).
HIGHER_IS_BETTER = frozenset({"dev_accuracy"})
_SCORE_NAMES = {"dev_bpc": "bits per character", "dev_perplexity": "perplexity",
                "dev_accuracy": "exact match"}  # fmt: skip


def _best_until(history: Sequence[dict[str, Any]], key: str, step: float) -> float | None:
    values = [float(m[key]) for m in history if m.get(key) is not None and m["step"] <= step]
    if not values:
        return None
    return max(values) if key in HIGHER_IS_BETTER else min(values)


def plateau_gain(history: Sequence[dict[str, Any]], key: str = "dev_bpc") -> float | None:
    """The gain of the best dev score over the last fifth of the steps trained (relative, or in
    points for :data:`HIGHER_IS_BETTER` keys; see the module docstring); ``None`` without an
    evaluation in the first four fifths."""
    if not history:
        return None
    steps = max(int(m["step"]) for m in history)
    before = _best_until(history, key, (1 - LAST_PART) * steps)
    after = _best_until(history, key, steps)
    if before is None or after is None:
        return None
    if key in HIGHER_IS_BETTER:
        return after - before
    return None if before == 0 else (before - after) / abs(before)


def _trained(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if is_ok(r) and r.get("history") and not r.get("rescored")]


def curve_groups(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[int, list[float]]]:
    """``{(encoding, number): {step: [dev score of each run evaluated at that step]}}``."""
    key = dev_key(rows)
    out: dict[tuple[str, str], dict[int, list[float]]] = {}
    for row in _trained(rows):
        curve = out.setdefault((str(row["encoding"]), str(row["number"])), {})
        for m in row["history"]:
            if m.get(key) is not None:
                curve.setdefault(int(m["step"]), []).append(float(m[key]))
    return out


def plot_curves(
    rows: Sequence[dict[str, Any]], path: str, labels: dict[tuple[str, str], str]
) -> str | None:
    """The dev score at L against the step, the mean over the runs evaluated at each step, one
    line per configuration (the styles of :func:`cplxnet.compare.report.plots.column_styles`, so a
    configuration has the colours of the length plot); ``None`` without histories."""
    import dataclasses

    groups = curve_groups(rows)
    if not groups:
        return None
    key = dev_key(rows)
    plt = pyplot()
    styles = column_styles(groups)
    styles = {k: dataclasses.replace(v, label=labels.get(k, k[0])) for k, v in styles.items()}
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, curve in groups.items():
        steps = sorted(curve)
        means = [sum(curve[s]) / len(curve[s]) for s in steps]
        kwargs = styles[k].line_kwargs()
        kwargs["markersize"] = 3
        ax.plot(steps, means, **kwargs)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"dev {_SCORE_NAMES.get(key, 'loss')} at L (mean over runs)")
    ax.grid(alpha=0.3)
    add_legend(fig, styles, list(groups))
    return save_figure(fig, path)


def _fmt_range(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    lo, hi = min(values), max(values)
    mean = sum(values) / len(values)
    text = fmt.format(mean)
    return text if lo == hi else f"{text} ({fmt.format(lo)}-{fmt.format(hi)})"


def _train_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """The training options of a language-model grid, with the :class:`LMOptions` defaults for
    those the grid left out (its ``grid.json`` records only the options given); empty without
    the grid's options."""
    lm = (options or {}).get("lm")
    if not lm:
        return {}
    from ...tasks.lm import LMOptions

    names = ("steps", "batch_size", "eval_every", "patience", "monitor")
    return {**{n: getattr(LMOptions, n) for n in names}, **(lm.get("train") or {})}


def _early_note(early_steps: list[int], train: dict[str, Any], key: str) -> str:
    """What the plateau gain of the runs stopped early means: a run stopped within five patience
    windows gained nothing over its last fifth, by construction, when patience watched the
    score the gain reads (the dev loss orders runs as the dev bpc and perplexity do)."""
    window = int(train["patience"]) * int(train["eval_every"])
    within = sum(s <= 5 * window for s in early_steps)
    n = len(early_steps)
    if n > 1:
        lead = f"{within} of the {n} runs stopped early ended within {5 * window:,} steps"
    else:
        where = "within" if within else "after"
        lead = f"The one run stopped early ended {where} {5 * window:,} steps"
    watched = MONITORED.get(train.get("monitor") or "loss", "dev loss")
    same = (key == "dev_accuracy") == (train.get("monitor") == "accuracy")
    if not same:
        return (f"{lead}. Patience watched the {watched}, while the gain reads the "
                f"{_SCORE_NAMES.get(key, 'dev loss')}: a run stopped early can still show a "
                "gain.")  # fmt: skip
    if not within:
        return f"{lead}."
    them = "their gain is" if n > 1 else "its gain is"
    return (f"{lead}, where the patience window ({window:,} steps without a better "
            f"{watched}) covers the last fifth: {them} zero by construction, whether "
            f"{'they' if n > 1 else 'it'} stopped at a ceiling or on a noisy stretch (the curves "
            "tell which).")  # fmt: skip


def training_table(
    rows: Sequence[dict[str, Any]],
    labels: dict[tuple[str, str], str],
    options: dict[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """The table of what each configuration's runs trained: steps (mean and range over seeds),
    how many stopped early by patience, training tokens (text: steps x batch x L; a synthetic
    task: sequences, steps x batch), CPU seconds of training, and the plateau gain (mean over
    seeds; marked when at least :data:`PLATEAU`). Returns the table and its notes (empty
    without histories)."""
    trained = _trained(rows)
    if not trained:
        return "", []
    key = dev_key(rows)
    train = _train_options(options)
    limit, batch = train.get("steps"), train.get("batch_size")
    synthetic = any(str(r.get("data", "")).startswith("synthetic:") for r in trained)
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in trained:
        by.setdefault((str(row["encoding"]), str(row["number"])), []).append(row)
    unit = "sequences" if synthetic else "tokens"
    score = f"dev {_SCORE_NAMES[key]}" if key in HIGHER_IS_BETTER else key.replace("_", " ")
    header = ["encoding", "steps/run", "stopped early", f"training {unit}/run",
              "train CPU s/run", f"{score} gain, last fifth"]  # fmt: skip
    table, still, early_steps = [], 0, []
    for k, runs in by.items():
        steps = [int(r.get("steps") or max(m["step"] for m in r["history"])) for r in runs]
        stopped_runs = [(s, r) for s, r in zip(steps, runs)
                        if limit is not None and s < int(limit)]  # fmt: skip
        early = [str(r.get("seed")) for _, r in stopped_runs]
        early_steps += [s for s, _ in stopped_runs]
        stopped = f"{len(early)}/{len(runs)}"
        if early:
            stopped += f" (seed{'s' if len(early) > 1 else ''} {', '.join(early)})"
        cells = [labels.get(k, k[0]), _fmt_range(steps), stopped]
        if batch:
            per = [s * int(batch) * (1 if synthetic else int(r.get("context") or 0))
                   for s, r in zip(steps, runs)]  # fmt: skip
            cells.append(_fmt_range(per))
        else:
            cells.append("–")
        cpu = [float(r["train_cpu_seconds"]) for r in runs if r.get("train_cpu_seconds")]
        cells.append(_fmt_range(cpu) if cpu else "–")
        gains = [g for r in runs if (g := plateau_gain(r["history"], key)) is not None]
        if gains:
            m, s = mean_std(gains)
            sign = " pts" if key in HIGHER_IS_BETTER else "%"  # two decimals: 0.95 is not 1.0
            text = f"{100 * m:.2f}{sign}" + (f" ± {100 * s:.2f}{sign}" if len(gains) > 1 else "")
            if m >= PLATEAU:
                text += " †"
                still += 1
            cells.append(text)
        else:
            cells.append("–")
        table.append(cells)
    rule = "|---|" + "---:|" * (len(header) - 1)
    if key in HIGHER_IS_BETTER:
        gain = ("Gain of the best dev exact match over the last fifth of the steps each run "
                "trained, best at S - best at 0.8 S for S steps in points (1 point: 1% of the dev "
                "prompts), mean ± std over seeds; † marks 1 point or more")  # fmt: skip
    else:
        gain = ("Relative gain of the best dev score at L over the last fifth of the steps each "
                "run trained, (best at 0.8 S - best at S) / best at 0.8 S for S steps, mean ± std "
                f"over seeds; † marks {PLATEAU:.0%} or more")  # fmt: skip
    configurations = f"{len(table)} configuration{'s' * (len(table) > 1)}"
    notes = [f"{gain} (still learning: {still} of {configurations})."]
    if train.get("patience"):
        notes.append(
            "Stopped early: runs that ended by patience before "
            f"{'the step limit' if limit is None else f'{int(limit):,} steps'}."
        )
    if train.get("patience") and early_steps:
        notes.append(_early_note(early_steps, train, key))
    if synthetic and key == "dev_accuracy":
        notes.append("A synthetic task's gain and curves read the exact match of the greedy "
                     "answers to the dev prompts (lengths 1-L), scored at every evaluation; the "
                     + ("best checkpoint is the first with the highest dev exact match"
                        + (", and patience counts evaluations without a higher one."
                           if train.get("patience") else ".")
                        if train.get("monitor") == "accuracy" else
                        "best checkpoint has the lowest dev loss on the answers."))  # fmt: skip
    elif synthetic:
        notes.append("These runs recorded no dev exact match: the gain and curves read the dev "
                     "loss on the answers.")  # fmt: skip
    return markdown_table(header, table, rule), notes
