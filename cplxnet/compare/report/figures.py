"""The figures of a comparison report: accuracy per (encoding, number) column and model family,
and accuracy against text length, every column drawn with one style for the whole report
(:mod:`cplxnet.compare.report.plots`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .plots import add_legend, column_label, column_styles, pyplot, save_figure
from .statistics import extrapolation_groups, is_ok, mean_std, summarize
from .tables import data_name

__all__ = [
    "report_columns",
    "results_figure",
    "plot_results",
    "extrapolation_figure",
    "plot_extrapolation",
]


def report_columns(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """Every ``(encoding, number)`` column of the successful rows (grid and extrapolation), in
    order of first appearance: the list :func:`~cplxnet.compare.report.plots.column_styles` takes
    so that all figures of one report share their colours."""
    return list(dict.fromkeys((str(r["encoding"]), str(r["number"])) for r in rows if is_ok(r)))


def _styles_for(styles, columns: list[tuple[str, str]]):
    """``styles`` (default: the styles of ``columns``) and the columns to draw, in its order."""
    styles = styles or column_styles(columns)
    missing = [column_label(c) for c in columns if c not in styles]
    if missing:
        raise ValueError(
            f"no style for {', '.join(missing)}; build the styles from every column of the report"
        )
    return styles, [c for c in styles if c in columns]


def results_figure(
    rows: Sequence[dict[str, Any]],
    metric: str = "test_accuracy",
    *,
    styles: dict[tuple[str, str], Any] | None = None,
):
    """The chart of :func:`plot_results` as a matplotlib figure (``None`` without grid rows).
    ``styles`` (:func:`~cplxnet.compare.report.plots.column_styles`) defaults to the styles of the
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
        ax.set_title(data_name(data))
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
    return None if fig is None else save_figure(fig, path)


def extrapolation_figure(
    rows: Sequence[dict[str, Any]], *, styles: dict[tuple[str, str], Any] | None = None
):
    """The line plot of :func:`plot_extrapolation` as a matplotlib figure (``None`` without
    extrapolation rows). ``styles`` defaults to the styles of the columns of ``rows``."""
    groups, bins_of, counts, order = extrapolation_groups(rows)
    if not groups:
        return None
    columns = list(dict.fromkeys((k[2], k[3]) for k in order))
    styles, drawn = _styles_for(styles, columns)
    stats = {k: {lab: mean_std(v) for lab, v in g.items() if v} for k, g in groups.items()}
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
        ax.set_title(f"{data_name(data)} {family}", fontsize=9)
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
    return None if fig is None else save_figure(fig, path)
