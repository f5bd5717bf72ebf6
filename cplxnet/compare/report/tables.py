"""The markdown tables of a comparison report: a table laid out like Table 2 of Wang et al. (ICLR
2020) with mean +- std over seeds/folds, a paired significance test of complex-order against the
best real-field column, the paper's own numbers and the length-extrapolation table; the statistics
behind them are in :mod:`cplxnet.compare.report.statistics`.

Table: one row per model family, one column per (dataset, encoding, number field); a cell is
``mean ± std`` of the test accuracy over the runs (seeds x folds; sample standard deviation), the
best mean of each row and dataset in bold. The last column of each dataset compares the target
encoding (``complex-order`` in a complex model) with the best *real* baseline of that row (the
column with the highest mean among all real-field columns of the row, whatever the encoding, so
``complex-order (real)`` of a ``--number both`` grid competes too) by a two-sided Wilcoxon
signed-rank test over runs matched by (fold, seed) (:data:`~.statistics.WILCOXON_METHOD`: zero
differences dropped; exact up to 50 pairs without ties or zeros; with ties or zeros all sign
permutations up to 13 pairs; the normal approximation otherwise). With ``n`` non-zero differences
the smallest attainable two-sided p-value is ``2 / 2**n``: ``n <= 5`` can never reach
``p < 0.05``, and the table says so (``n=3, min p = 0.25``). The pooled table
(:func:`pooled_table`) therefore also tests the target against each other column over the runs of
every row matched by (dataset, model, fold, seed): with 4 models x 2 datasets x 3 seeds that is
24 pairs per comparison.

Every header and legend names a column by encoding and number field (``none (real)``). The plots
draw each column with one colour and marker for the whole report
(:mod:`cplxnet.compare.report.plots`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ...encodings import get_encoding_class
from .plots import column_label
from .statistics import (
    PairedTest,
    comparison,
    extrapolation_groups,
    mean_std,
    paired_test,
    summarize,
    target_column,
)

__all__ = [
    "PAPER_TABLE2",
    "fmt_p",
    "data_name",
    "results_table",
    "significance_table",
    "pooled_table",
    "paper_table",
    "extrapolation_table",
]

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


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def fmt_p(p: float) -> str:
    """A p-value with two significant digits (scientific below 0.001)."""
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def table_line(cells: Sequence[Any]) -> str:
    """One line of a markdown table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], rule: str = "") -> str:
    """A markdown table: the header, the rule under it (default: every column left-aligned) and
    one line per row."""
    lines = [table_line(header), rule or "|" + "---|" * len(header)]
    return "\n".join(lines + [table_line(r) for r in rows]) + "\n"


# the columns of paired_cells
_PAIRED_HEADER = ("mean diff", "wins/ties/losses", "n", "Wilcoxon p")


def paired_cells(t: PairedTest, digits: int, delta: float | None = None) -> list[str]:
    """The cells ``mean diff | wins/ties/losses | n | Wilcoxon p`` of a paired test (``delta``:
    the mean difference to show, default ``t.delta``)."""
    delta = t.delta if delta is None else delta
    return [
        f"{delta:+.{digits}f}" if t.n else "–",
        f"{t.wins}/{t.ties}/{t.losses}",
        str(t.n),
        "–" if t.p is None else fmt_p(t.p),
    ]


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
    text = f"{t.delta:+.{digits}f} vs {name}; p = {fmt_p(t.p)}"
    if not t.can_reach:
        return text + f" (n={t.n}, min p = {fmt_p(t.min_p)})"
    return text + f" (n={t.n})"


def data_name(data: str) -> str:
    """A dataset as tables and figures name it: ``MR``, ``TREC``, a file by its base name."""
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
    tcol = target_column(columns, target)
    tname = column_label(tcol) if both and tcol else target
    header = ["model"]
    for data in datas:
        header += [f"{data_name(data)} {column_label(c)}" for c in columns]
        if tcol is not None:
            header.append(f"{data_name(data)}: {tname} vs best real")
    counts = [s.n for s in groups.values()]
    modal = max(set(counts), key=lambda c: (counts.count(c), c))
    table = []
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
                cmp = comparison(groups, data, family, columns, target)
                cells.append(_sig_text(cmp, digits, both))
        table.append(cells)
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
    return markdown_table(header, table) + note


def significance_table(
    rows: Sequence[dict[str, Any]],
    *,
    target: str = "complex-order",
    metric: str = "test_accuracy",
    digits: int = 3,
) -> str:
    """One line per (dataset, family): the target, the best real baseline, the paired test."""
    groups, datas, families, columns = summarize(rows, metric)
    header = [
        "data",
        "model",
        "target",
        "target mean",
        "best real baseline",
        "baseline mean",
        *_PAIRED_HEADER,
        "min attainable p",
    ]
    table = []
    for data in datas:
        for family in families:
            cmp = comparison(groups, data, family, columns, target)
            if cmp is None:
                continue
            tcol, base, t = cmp
            tm = groups[(data, family, *tcol)].mean
            bm = groups[(data, family, *base)].mean
            table.append(
                [data_name(data), family, column_label(tcol), _fmt(tm, digits)]
                + [column_label(base), _fmt(bm, digits), *paired_cells(t, digits), fmt_p(t.min_p)]
            )
    return markdown_table(header, table) if table else ""


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
    tcol = target_column(columns, target)
    if tcol is None:
        return ""
    header = ["target", "against", "rows", *_PAIRED_HEADER]
    table = []
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
        table.append([column_label(tcol), column_label(col), used, *paired_cells(t, digits)])
    return markdown_table(header, table) if table else ""


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
    header = ["model"] + [f"{data_name(d)} {column_label(c)}" for d in datas for c in cols]
    table = [
        [family] + [_fmt(PAPER_TABLE2[family][d][e], digits) for d in datas for e in encodings]
        for family in families
        if family in PAPER_TABLE2
    ]
    return markdown_table(header, table)


def extrapolation_table(rows: Sequence[dict[str, Any]], digits: int = 3) -> str:
    """Accuracy per length bin (mean ± std over seeds) for each dataset, family and encoding;
    the first bin is in-distribution. Best of each (dataset, family, bin) in bold."""
    groups, bins_of, counts, order = extrapolation_groups(rows)
    if not groups:
        return ""
    out = []
    for (data,) in bins_of:
        labels = bins_of[(data,)]
        keys = [k for k in order if k[0] == data]
        train_lens = sorted({r.get("train_len") for r in rows if r.get("data") == data} - {None})
        title = f"**{data_name(data)}**" + (
            f" (trained on lengths <= {train_lens[0]})" if train_lens else ""
        )
        head = ["model", "encoding"] + [
            f"{lab}{' (train)' if i == 0 else ''}" for i, lab in enumerate(labels)
        ]
        best = {}
        for k in keys:
            for lab in labels:
                vals = groups[k].get(lab)
                if vals:
                    fam_key = (k[1], lab)
                    best[fam_key] = max(best.get(fam_key, -1.0), mean_std(vals)[0])
        table = []
        for k in keys:
            cells = [k[1], f"{k[2]} ({k[3]})"]
            for lab in labels:
                vals = groups[k].get(lab)
                if not vals:
                    cells.append("–")
                    continue
                m, s = mean_std(vals)
                text = _fmt(m, digits) + (f" ± {_fmt(s, digits)}" if len(vals) > 1 else "")
                if m == best[(k[1], lab)]:
                    text = f"**{text}**"
                cells.append(text)
            table.append(cells)
        ns = counts[keys[0]] if keys else {}
        per_bin = ", ".join(f"{lab}: {ns.get(lab, 0)}" for lab in labels)
        out.append(f"{title}\n\n{markdown_table(head, table)}\ntexts per bin: {per_bin}\n")
    return "\n".join(out)
