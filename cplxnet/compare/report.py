"""The comparison report: a table laid out like Table 2 of Wang et al. (ICLR 2020) with mean +- std
over seeds/folds, a paired significance test of complex-order against the best real-field column,
the plots, and the length-extrapolation table.

Table: one row per model family, one column per (dataset, encoding, number field); a cell is
``mean ± std`` of the test accuracy over the runs (seeds x folds; sample standard deviation), the
best mean of each row and dataset in bold. The last column of each dataset compares the target
encoding (``complex-order`` in a complex model) with the best *real* baseline of that row (the
column with the highest mean among all real-field columns of the row, whatever the encoding, so
``complex-order (real)`` of a ``--number both`` grid competes too) by a two-sided Wilcoxon
signed-rank test over runs matched by (fold, seed) (:func:`scipy.stats.wilcoxon`; zero differences
are dropped, ``method="auto"`` is exact for small samples). With ``n`` non-zero differences the
smallest attainable two-sided p-value is ``2 / 2**n``: ``n <= 5`` can never reach ``p < 0.05``,
and the table says so (``n=3, min p = 0.25``). The pooled table (:func:`pooled_table`) therefore
also tests the target against each other column over the runs of every row matched by (dataset,
model, fold, seed): with 4 models x 2 datasets x 3 seeds that is 24 pairs per comparison.

Every header and legend names a column by encoding and number field (``none (real)``). The plots
draw each column with one colour and marker for the whole report (:mod:`cplxnet.compare.plots`).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..encodings import get_encoding_class
from .plots import add_legend, column_label, column_styles, pyplot

__all__ = [
    "load_results",
    "summarize",
    "paired_test",
    "PairedTest",
    "min_attainable_p",
    "results_table",
    "significance_table",
    "pooled_table",
    "extrapolation_table",
    "report_columns",
    "results_figure",
    "extrapolation_figure",
    "plot_results",
    "plot_extrapolation",
    "render_report",
    "PAPER_TABLE2",
]

# Wang et al. 2020, Table 2 (test accuracy): family -> dataset -> encoding -> accuracy. Each
# encoding in its natural number field (its class's ``field``).
_PAPER_COLUMNS = ("none", "trainable", "sinusoidal", "complex-vanilla", "complex-order")
_PAPER = {  # family: (MR columns), (TREC columns)
    "fasttext": ((0.765, 0.774, 0.776, 0.773, 0.787), (0.874, 0.874, 0.880, 0.872, 0.892)),
    "lstm": ((0.775, 0.778, 0.776, 0.765, 0.790), (0.858, 0.858, 0.865, 0.784, 0.869)),
    "cnn": ((0.809, 0.816, 0.815, 0.811, 0.825), (0.898, 0.890, 0.918, 0.900, 0.939)),
    "transformer": ((0.669, 0.737, 0.731, 0.715, 0.746), (0.802, 0.820, 0.834, 0.856, 0.896)),
}
PAPER_TABLE2 = {
    fam: {data: dict(zip(_PAPER_COLUMNS, accs)) for data, accs in zip(("mr", "trec"), both)}
    for fam, both in _PAPER.items()
}

_NUMERIC = {
    "fold": int,
    "seed": int,
    "parameters": int,
    "dev_accuracy": float,
    "test_accuracy": float,
    "seconds": float,
    "epochs_run": int,
    "best_epoch": int,
    "test_macro_f1": float,
    "test_size": int,
    "train_size": int,
    "train_len": int,
    "bin_n": int,
    "bin_accuracy": float,
}


# ------------------------------------------------------------------------------------------------
# loading


def _convert(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k in _NUMERIC:
            out[k] = None if v in ("", None) else _NUMERIC[k](float(v))
        else:
            out[k] = v
    return out


def _read_csv(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8", newline="") as fh:
        raw = [_convert(r) for r in csv.DictReader(fh)]
    if not raw or "bin" not in raw[0]:
        return raw
    runs: dict[str, dict[str, Any]] = {}
    for r in raw:  # extrapolation CSV: one line per run and bin -> one row per run with "bins"
        key = r.get("cell_id") or json.dumps(
            [r.get(k) for k in ("data", "fold", "family", "encoding", "number", "seed")]
        )
        run = runs.setdefault(
            key, {k: v for k, v in r.items() if k not in ("bin", "bin_n", "bin_accuracy")}
        )
        run.setdefault("bins", [])
        if r.get("bin"):
            run["bins"].append({"bin": r["bin"], "n": r["bin_n"], "accuracy": r["bin_accuracy"]})
    return list(runs.values())


def load_results(path: str) -> list[dict[str, Any]]:
    """Rows from a results folder (its ``results.json``, else its ``cells/``), a ``results.json``
    or a ``results.csv``. Raises FileNotFoundError / ValueError with the path in the message."""
    if os.path.isdir(path):
        candidate = os.path.join(path, "results.json")
        if os.path.exists(candidate):
            return load_results(candidate)
        from .grid import ResultStore

        rows = list(ResultStore(path).load().values())
        if not rows:
            raise FileNotFoundError(f"{path} has no results.json, results.csv or cells/*.json")
        return rows
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found; give a results folder, .json or .csv")
    if path.endswith(".csv"):
        return _read_csv(path)
    with open(path, encoding="utf-8") as fh:
        try:
            obj = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON ({err})") from None
    rows = obj.get("rows") if isinstance(obj, dict) else obj
    if not isinstance(rows, list):
        raise ValueError(f"{path} holds no list of result rows")
    return rows


# ------------------------------------------------------------------------------------------------
# statistics


def _ok(row: dict[str, Any]) -> bool:
    return row.get("status", "ok") in ("ok", "", None)


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    n = len(values)
    m = sum(values) / n
    return m, (math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0)


@dataclass
class Summary:
    """Runs of one (data, family, encoding, number) cell of the table."""

    values: dict[tuple, float]  # (fold, seed) -> metric

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return _mean_std(list(self.values.values()))[0]

    @property
    def std(self) -> float:
        return _mean_std(list(self.values.values()))[1]


def _fold_key(row: dict[str, Any]) -> Any:
    fold = row.get("fold")
    return None if fold in ("", None) else int(fold)


def summarize(
    rows: Sequence[dict[str, Any]], metric: str = "test_accuracy"
) -> tuple[dict[tuple, Summary], list[str], list[str], list[tuple[str, str]]]:
    """Group successful grid rows: ``{(data, family, encoding, number): Summary}`` and the data,
    family and column orders (first appearance)."""
    groups: dict[tuple, Summary] = {}
    datas: list[str] = []
    families: list[str] = []
    columns: list[tuple[str, str]] = []
    for row in rows:
        if not _ok(row) or row.get("mode", "grid") not in ("grid", "", None):
            continue
        value = row.get(metric)
        if value is None or value == "":
            continue
        data, family = row["data"], row["family"]
        col = (row["encoding"], row["number"])
        for seq, item in ((datas, data), (families, family), (columns, col)):
            if item not in seq:
                seq.append(item)
        key = (data, family, *col)
        groups.setdefault(key, Summary({}))
        groups[key].values[(_fold_key(row), int(row["seed"]))] = float(value)
    return groups, datas, families, columns


def min_attainable_p(n: int) -> float:
    """Smallest two-sided p-value of an exact Wilcoxon signed-rank test with ``n`` non-zero
    differences: all of one sign, ``2 / 2**n`` (1 for ``n = 0``)."""
    return 1.0 if n <= 0 else min(1.0, 2.0 / 2**n)


@dataclass
class PairedTest:
    """A paired comparison of two columns over matched runs."""

    n: int  # matched pairs
    nonzero: int  # pairs with a non-zero difference
    delta: float  # mean of (a - b)
    wins: int
    ties: int
    losses: int
    p: float | None  # None when there is no pair
    min_p: float

    @property
    def can_reach(self) -> bool:
        """Whether ``p < 0.05`` is attainable with this many non-zero differences."""
        return self.min_p < 0.05


def paired_test(a: dict[tuple, float], b: dict[tuple, float]) -> PairedTest:
    """Two-sided Wilcoxon signed-rank test of ``a - b`` over the keys both have."""
    keys = sorted(set(a) & set(b), key=repr)
    diffs = [round(a[k] - b[k], 9) for k in keys]  # rounding: accuracies are ratios of counts
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    nonzero = wins + losses
    delta = sum(diffs) / len(diffs) if diffs else float("nan")
    if not diffs:
        p = None
    elif nonzero == 0:
        p = 1.0
    else:
        from scipy.stats import wilcoxon

        p = float(wilcoxon(diffs, zero_method="wilcox", alternative="two-sided").pvalue)
    return PairedTest(
        len(diffs), nonzero, delta, wins, len(diffs) - nonzero, losses, p, min_attainable_p(nonzero)
    )


def _target_column(columns: list[tuple[str, str]], target: str) -> tuple[str, str] | None:
    for number in ("complex", "real"):
        if (target, number) in columns:
            return (target, number)
    return None


def _best_baseline(
    groups: dict[tuple, Summary],
    data: str,
    family: str,
    columns: list[tuple[str, str]],
    exclude: tuple[str, str] | None = None,
) -> tuple[str, str] | None:
    """The real-field column (any encoding, ``exclude`` aside) with the best mean in the row."""
    best = None
    for col in columns:
        if col[1] != "real" or col == exclude:
            continue
        s = groups.get((data, family, *col))
        if s is not None and (best is None or s.mean > groups[(data, family, *best)].mean):
            best = col
    return best


def _comparison(groups, data, family, columns, target):
    tcol = _target_column(columns, target)
    if tcol is None or (data, family, *tcol) not in groups:
        return None
    base = _best_baseline(groups, data, family, columns, exclude=tcol)
    if base is None:
        return None
    test = paired_test(groups[(data, family, *tcol)].values, groups[(data, family, *base)].values)
    return tcol, base, test


# ------------------------------------------------------------------------------------------------
# tables


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _both_fields(columns: Sequence[tuple[str, str]]) -> bool:
    """Whether some encoding appears in two number fields (then its name alone is ambiguous)."""
    encodings = [c[0] for c in columns]
    return len(set(encodings)) < len(set(columns))


def _sig_text(cmp, digits: int, both: bool) -> str:
    if cmp is None:
        return "–"
    _, base, t = cmp
    name = column_label(base) if both else base[0]
    if t.p is None:
        return f"vs {name}: no matched runs"
    text = f"{t.delta:+.{digits}f} vs {name}; p = {_fmt_p(t.p)}"
    if not t.can_reach:
        return text + f" (n={t.n}, min p = {_fmt_p(t.min_p)})"
    return text + f" (n={t.n})"


def _data_name(data: str) -> str:
    return {"mr": "MR", "trec": "TREC"}.get(data, os.path.basename(data))


def results_table(
    rows: Sequence[dict[str, Any]],
    *,
    target: str = "complex-order",
    metric: str = "test_accuracy",
    digits: int = 3,
) -> str:
    """The Table 2-style markdown table (see the module docstring)."""
    groups, datas, families, columns = summarize(rows, metric)
    if not groups:
        return "(no successful grid runs)\n"
    both = _both_fields(columns)
    tcol = _target_column(columns, target)
    tname = column_label(tcol) if both and tcol else target
    header = ["model"]
    for data in datas:
        header += [f"{_data_name(data)} {column_label(c)}" for c in columns]
        if tcol is not None:
            header.append(f"{_data_name(data)}: {tname} vs best real")
    counts = [s.n for s in groups.values()]
    modal = max(set(counts), key=lambda c: (counts.count(c), c))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for family in families:
        cells = [family]
        for data in datas:
            present = [groups.get((data, family, *c)) for c in columns]
            means = [s.mean for s in present if s is not None]
            top = max(means) if means else None
            for s in present:
                if s is None:
                    cells.append("–")
                    continue
                text = _fmt(s.mean, digits)
                if s.n > 1:
                    text += f" ± {_fmt(s.std, digits)}"
                if s.n != modal:
                    text += f" (n={s.n})"
                if top is not None and s.mean == top:
                    text = f"**{text}**"
                cells.append(text)
            if tcol is not None:
                cmp = _comparison(groups, data, family, columns, target)
                cells.append(_sig_text(cmp, digits, both))
        lines.append("| " + " | ".join(cells) + " |")
    pretty = metric.replace("_", " ")
    note = (
        f"\n{pretty}: mean ± sample std over {modal} run(s) per cell (seeds x folds; other "
        "counts marked n=...); bold: best mean of the row for that dataset."
    )
    if tcol is not None:
        note += (
            f" Last column per dataset: mean paired difference of {tname} and the best real-field "
            "column of the row (any encoding), two-sided Wilcoxon signed-rank p over runs matched "
            "by (fold, seed); with n <= 5 non-zero differences p < 0.05 is unreachable (min p "
            "shown)."
        )
    else:
        note += f" No {target} column, so no comparison with the best real column."
    note += "\n"
    return "\n".join(lines) + "\n" + note


def significance_table(
    rows: Sequence[dict[str, Any]],
    *,
    target: str = "complex-order",
    metric: str = "test_accuracy",
    digits: int = 3,
) -> str:
    """One line per (dataset, family): the target, the best real baseline, the paired test."""
    groups, datas, families, columns = summarize(rows, metric)
    head = (
        "| data | model | target | target mean | best real baseline | baseline mean | mean diff | "
        "wins/ties/losses | n | Wilcoxon p | min attainable p |"
    )
    lines = [head, "|" + "---|" * 11]
    for data in datas:
        for family in families:
            cmp = _comparison(groups, data, family, columns, target)
            if cmp is None:
                continue
            tcol, base, t = cmp
            tm = groups[(data, family, *tcol)].mean
            bm = groups[(data, family, *base)].mean
            lines.append(
                f"| {_data_name(data)} | {family} | {tcol[0]} ({tcol[1]}) | {_fmt(tm, digits)} | "
                f"{base[0]} ({base[1]}) | {_fmt(bm, digits)} | "
                + (f"{t.delta:+.{digits}f}" if t.n else "–")
                + f" | {t.wins}/{t.ties}/{t.losses} | {t.n} | "
                + ("–" if t.p is None else _fmt_p(t.p))
                + f" | {_fmt_p(t.min_p)} |"
            )
    if len(lines) == 2:
        return ""
    return "\n".join(lines) + "\n"


def pooled_table(
    rows: Sequence[dict[str, Any]],
    *,
    target: str = "complex-order",
    metric: str = "test_accuracy",
    digits: int = 3,
) -> str:
    """The target against every other column, pooled over all rows (datasets x models).

    Runs are matched by (dataset, model, fold, seed); one two-sided Wilcoxon signed-rank test per
    other column. Unlike the per-row test against the *best* real baseline (a baseline chosen by
    its mean, which favours it), each column here is fixed in advance.
    """
    groups, datas, families, columns = summarize(rows, metric)
    tcol = _target_column(columns, target)
    if tcol is None:
        return ""
    lines = [
        "| target | against | rows | mean diff | wins/ties/losses | n | Wilcoxon p |",
        "|" + "---|" * 7,
    ]
    for col in columns:
        if col == tcol:
            continue
        a: dict[tuple, float] = {}
        b: dict[tuple, float] = {}
        used = 0
        for data in datas:
            for family in families:
                ta, tb = groups.get((data, family, *tcol)), groups.get((data, family, *col))
                if ta is None or tb is None:
                    continue
                used += 1
                a.update({(data, family, *k): v for k, v in ta.values.items()})
                b.update({(data, family, *k): v for k, v in tb.values.items()})
        t = paired_test(a, b)
        if not t.n:
            continue
        lines.append(
            f"| {tcol[0]} ({tcol[1]}) | {col[0]} ({col[1]}) | {used} | {t.delta:+.{digits}f} | "
            f"{t.wins}/{t.ties}/{t.losses} | {t.n} | "
            + ("–" if t.p is None else _fmt_p(t.p))
            + " |"
        )
    if len(lines) == 2:
        return ""
    return "\n".join(lines) + "\n"


def paper_table(rows: Sequence[dict[str, Any]], digits: int = 3) -> str:
    """The paper's Table 2 numbers for the (dataset, family, encoding) cells of ``rows``: one
    column per encoding, named with the number field the paper used (complex for ``complex-*``,
    real otherwise), however many number fields ``rows`` has for it."""
    groups, datas, families, columns = summarize(rows)
    datas = [d for d in datas if d in ("mr", "trec")]
    encodings = list(dict.fromkeys(c[0] for c in columns if c[0] in _PAPER_COLUMNS))
    if not datas or not encodings:
        return ""
    cols = [(e, get_encoding_class(e).field) for e in encodings]
    header = ["model"] + [f"{_data_name(d)} {column_label(c)}" for d in datas for c in cols]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for family in families:
        if family not in PAPER_TABLE2:
            continue
        cells = [family] + [
            _fmt(PAPER_TABLE2[family][d][e], digits) for d in datas for e in encodings
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _extrapolation_groups(rows: Sequence[dict[str, Any]]):
    groups: dict[tuple, dict[str, list[float]]] = {}
    bins_of: dict[tuple, list[str]] = {}
    counts: dict[tuple, dict[str, int]] = {}
    order: list[tuple] = []
    for row in rows:
        if not _ok(row) or not row.get("bins"):
            continue
        key = (row["data"], row["family"], row["encoding"], row["number"])
        if key not in order:
            order.append(key)
        g = groups.setdefault(key, {})
        labels = bins_of.setdefault((row["data"],), [])
        for b in row["bins"]:
            if b["bin"] not in labels:
                labels.append(b["bin"])
            counts.setdefault(key, {})[b["bin"]] = b["n"]
            if b.get("accuracy") not in (None, ""):
                g.setdefault(b["bin"], []).append(float(b["accuracy"]))
    return groups, bins_of, counts, order


def extrapolation_table(rows: Sequence[dict[str, Any]], digits: int = 3) -> str:
    """Accuracy per length bin (mean ± std over seeds) for each dataset, family and encoding;
    the first bin is in-distribution. Best of each (dataset, family, bin) in bold."""
    groups, bins_of, counts, order = _extrapolation_groups(rows)
    if not groups:
        return ""
    out = []
    for (data,) in bins_of:
        labels = bins_of[(data,)]
        keys = [k for k in order if k[0] == data]
        train_lens = sorted({r.get("train_len") for r in rows if r.get("data") == data} - {None})
        title = f"**{_data_name(data)}**" + (
            f" (trained on lengths <= {train_lens[0]})" if train_lens else ""
        )
        head = ["model", "encoding"] + [
            f"{lab}{' (train)' if i == 0 else ''}" for i, lab in enumerate(labels)
        ]
        lines = [title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        best = {}
        for k in keys:
            for lab in labels:
                vals = groups[k].get(lab)
                if vals:
                    fam_key = (k[1], lab)
                    best[fam_key] = max(best.get(fam_key, -1.0), _mean_std(vals)[0])
        for k in keys:
            cells = [k[1], f"{k[2]} ({k[3]})"]
            for lab in labels:
                vals = groups[k].get(lab)
                if not vals:
                    cells.append("–")
                    continue
                m, s = _mean_std(vals)
                text = _fmt(m, digits) + (f" ± {_fmt(s, digits)}" if len(vals) > 1 else "")
                if m == best[(k[1], lab)]:
                    text = f"**{text}**"
                cells.append(text)
            lines.append("| " + " | ".join(cells) + " |")
        ns = counts[keys[0]] if keys else {}
        lines.append("")
        lines.append("texts per bin: " + ", ".join(f"{lab}: {ns.get(lab, 0)}" for lab in labels))
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# plots


def report_columns(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """Every ``(encoding, number)`` column of the successful rows (grid and extrapolation), in
    order of first appearance: the list :func:`~cplxnet.compare.plots.column_styles` takes so that
    all figures of one report share their colours."""
    return list(dict.fromkeys((str(r["encoding"]), str(r["number"])) for r in rows if _ok(r)))


def _styles_for(styles, columns: list[tuple[str, str]]):
    """``styles`` (default: the styles of ``columns``) and the columns to draw, in its order."""
    styles = styles or column_styles(columns)
    missing = [column_label(c) for c in columns if c not in styles]
    if missing:
        raise ValueError(
            f"no style for {', '.join(missing)}; build the styles from every column of the report"
        )
    return styles, [c for c in styles if c in columns]


def _save(fig, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def results_figure(
    rows: Sequence[dict[str, Any]],
    metric: str = "test_accuracy",
    *,
    styles: dict[tuple[str, str], Any] | None = None,
):
    """The chart of :func:`plot_results` as a matplotlib figure (``None`` without grid rows).
    ``styles`` (:func:`~cplxnet.compare.plots.column_styles`) defaults to the styles of the
    columns of ``rows``."""
    groups, datas, families, columns = summarize(rows, metric)
    if not groups:
        return None
    styles, drawn = _styles_for(styles, columns)
    plt = pyplot()
    fig, axes = plt.subplots(
        1,
        len(datas),
        figsize=(max(4.0, 0.35 * len(families) * max(1, len(drawn)) + 1.0) * len(datas), 3.6),
        squeeze=False,
        sharey=True,
    )
    step = 0.8 / max(1, len(drawn))
    lows = [s.mean - s.std for s in groups.values()]
    highs = [s.mean + s.std for s in groups.values()]
    bottom = max(0.0, math.floor((min(lows) - 0.02) * 20) / 20)
    top = min(1.0, math.ceil((max(highs) + 0.02) * 20) / 20)
    for ax, data in zip(axes[0], datas):
        for j, col in enumerate(drawn):
            xs, ms, ss = [], [], []
            for i, family in enumerate(families):
                s = groups.get((data, family, *col))
                if s is None:
                    continue
                xs.append(i - 0.4 + step * (j + 0.5))
                ms.append(s.mean)
                ss.append(s.std)
            if xs:
                ax.errorbar(
                    xs, ms, yerr=ss, capsize=2, linestyle="none", **styles[col].line_kwargs()
                )
        for i in range(1, len(families)):
            ax.axvline(i - 0.5, color="0.85", linewidth=0.8)
        ax.set_xticks(range(len(families)))
        ax.set_xticklabels(families)
        ax.set_xlim(-0.5, len(families) - 0.5)
        ax.set_ylim(bottom, top)
        ax.set_title(_data_name(data))
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(metric.replace("_", " ") + " (mean ± std)")
    add_legend(fig, styles, drawn, kind="point")
    return fig


def plot_results(
    rows: Sequence[dict[str, Any]],
    path: str,
    metric: str = "test_accuracy",
    *,
    styles: dict[tuple[str, str], Any] | None = None,
) -> str | None:
    """Per dataset a panel with the families on the x axis and, side by side in each family, one
    point per (encoding, number) column at its mean with the standard deviation as error bar
    (points, not bars: the axis is zoomed to the data, which bars would exaggerate), one colour
    and marker per column (``styles``, see :func:`results_figure`) and a legend naming every
    column drawn. Returns the path (``None`` without grid rows)."""
    fig = results_figure(rows, metric, styles=styles)
    return None if fig is None else _save(fig, path)


def extrapolation_figure(
    rows: Sequence[dict[str, Any]], *, styles: dict[tuple[str, str], Any] | None = None
):
    """The line plot of :func:`plot_extrapolation` as a matplotlib figure (``None`` without
    extrapolation rows). ``styles`` defaults to the styles of the columns of ``rows``."""
    groups, bins_of, counts, order = _extrapolation_groups(rows)
    if not groups:
        return None
    columns = list(dict.fromkeys((k[2], k[3]) for k in order))
    styles, drawn = _styles_for(styles, columns)
    stats = {k: {lab: _mean_std(v) for lab, v in g.items() if v} for k, g in groups.items()}
    lows = [m - s for per_bin in stats.values() for m, s in per_bin.values()]
    highs = [m + s for per_bin in stats.values() for m, s in per_bin.values()]
    bottom = max(0.0, math.floor((min(lows) - 0.02) * 10) / 10)
    top = min(1.0, math.ceil((max(highs) + 0.02) * 10) / 10)
    plt = pyplot()
    panels = list(dict.fromkeys((k[0], k[1]) for k in order))
    cols = min(4, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(
        nrows, cols, figsize=(3.6 * cols, 3.0 * nrows), squeeze=False, sharey=True
    )
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (data, family) in zip(axes.flat, panels):
        labels = bins_of[(data,)]
        for j, col in enumerate(drawn):
            k = (data, family, *col)
            if k not in stats:
                continue
            dodge = 0.05 * (j - (len(drawn) - 1) / 2)  # error bars of one bin side by side
            xs = [i + dodge for i, lab in enumerate(labels) if lab in stats[k]]
            ms = [stats[k][lab][0] for lab in labels if lab in stats[k]]
            ss = [stats[k][lab][1] for lab in labels if lab in stats[k]]
            ax.errorbar(xs, ms, yerr=ss, capsize=2, **styles[col].line_kwargs())
        n = counts[next(k for k in order if k[:2] == (data, family))]
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(
            [
                f"{lab}\n({'train, ' if i == 0 else ''}n={n.get(lab, 0)})"
                for i, lab in enumerate(labels)
            ],
            fontsize=8,
        )
        ax.set_ylim(bottom, top)
        ax.set_title(f"{_data_name(data)} {family}", fontsize=9)
        ax.set_xlabel("text length (tokens); n = test texts", fontsize=8)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("accuracy (mean ± std over seeds)")
    add_legend(fig, styles, drawn, kind="line")
    return fig


def plot_extrapolation(
    rows: Sequence[dict[str, Any]],
    path: str,
    *,
    styles: dict[tuple[str, str], Any] | None = None,
) -> str | None:
    """Accuracy (mean ± std over seeds) against length bin, one panel per (dataset, family), one
    line per (encoding, number) column in the same colour and marker in every panel (``styles``,
    see :func:`extrapolation_figure`), one legend naming every line. Returns the path (``None``
    without extrapolation rows)."""
    fig = extrapolation_figure(rows, styles=styles)
    return None if fig is None else _save(fig, path)


# ------------------------------------------------------------------------------------------------
# the report


def _errors(rows: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if not _ok(r):
            out.append(
                f"- {r.get('data')} {r.get('family')} {r.get('encoding')} ({r.get('number')}) "
                f"seed {r.get('seed')}: {str(r.get('error', ''))[:300]}"
            )
    return out


def render_report(
    results: str | Sequence[dict[str, Any]],
    out_dir: str | None = None,
    *,
    target: str = "complex-order",
    metric: str = "test_accuracy",
    digits: int = 3,
    plots: bool = True,
    options: dict[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """Write ``report.md`` (and ``accuracy.png`` / ``extrapolation.png``) into ``out_dir``
    (default: the results folder, or the folder of the results file). Returns the markdown and
    the files written."""
    if isinstance(results, str):
        rows = load_results(results)
        if out_dir is None:
            out_dir = results if os.path.isdir(results) else os.path.dirname(results) or "."
        if options is None:
            grid = os.path.join(out_dir, "grid.json")
            if os.path.exists(grid):
                with open(grid, encoding="utf-8") as fh:
                    options = json.load(fh).get("options")
    else:
        rows = list(results)
    out_dir = out_dir or "."
    styles = column_styles(report_columns(rows))  # shared by every figure of the report
    grid_rows = [r for r in rows if not r.get("bins") and r.get("mode", "grid") != "extrapolate"]
    x_rows = [r for r in rows if r.get("bins") or r.get("mode") == "extrapolate"]
    parts = ["# Encodings compared: complex against real\n"]
    written: list[str] = []
    if grid_rows:
        parts.append("## Accuracy (Table 2 layout)\n")
        parts.append(results_table(grid_rows, target=target, metric=metric, digits=digits))
        sig = significance_table(grid_rows, target=target, metric=metric, digits=digits)
        if sig:
            parts.append(f"### {target} against the best real encoding, per row\n")
            parts.append(sig)
        pooled = pooled_table(grid_rows, target=target, metric=metric, digits=digits)
        if pooled:
            parts.append(
                f"### {target} against each encoding, pooled over datasets and models\n\n"
                "Runs matched by (dataset, model, fold, seed); two-sided Wilcoxon signed-rank "
                "test per column; rows = table rows (dataset x model) with both columns.\n"
            )
            parts.append(pooled)
        paper = paper_table(grid_rows, digits)
        if paper:
            parts.append(
                "### For reference: Wang et al. (ICLR 2020), Table 2\n\nTheir setting differs "
                "(pretrained 300-d word2vec for FastText/LSTM/CNN, epochs chosen on the "
                "evaluation split).\n"
            )
            parts.append(paper)
        if plots:
            png = plot_results(
                grid_rows, os.path.join(out_dir, "accuracy.png"), metric, styles=styles
            )
            if png:
                written.append(png)
                parts.append("![accuracy per encoding](accuracy.png)\n")
    if x_rows:
        parts.append("## Length extrapolation (accuracy per length bin)\n")
        parts.append(extrapolation_table(x_rows, digits))
        if plots:
            png = plot_extrapolation(
                x_rows, os.path.join(out_dir, "extrapolation.png"), styles=styles
            )
            if png:
                written.append(png)
                parts.append("![accuracy per length bin](extrapolation.png)\n")
    errors = _errors(rows)
    if errors:
        parts.append(f"## Runs that failed ({len(errors)})\n")
        parts.append("\n".join(errors) + "\n")
    if options:
        parts.append("## Budget\n")
        parts.append("```json\n" + json.dumps(options, indent=1, sort_keys=True) + "\n```\n")
    text = "\n".join(parts)
    os.makedirs(out_dir, exist_ok=True)
    md = os.path.join(out_dir, "report.md")
    with open(md, "w", encoding="utf-8") as fh:
        fh.write(text)
    written.insert(0, md)
    return text, written
