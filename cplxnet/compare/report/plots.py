"""Plot conventions shared by every figure of a comparison report, so that no picture misleads.

A *column* is an ``(encoding, number field)`` pair such as ``("complex-order", "complex")`` or
``("none", "real")``: one column of the report's tables, one series of points or one line of
its plots.

1. **One style per column, fixed for the whole report.** :func:`column_styles` maps the full,
   ordered list of a report's columns (every column of every table and figure of that report) to
   a :class:`ColumnStyle` (colour, marker, label). Every panel of every figure of that report draws
   a column with that style, whichever columns the panel happens to hold, so a colour names the
   same column everywhere. Matplotlib's colour cycle, by contrast, colours each panel's lines in
   the order they are drawn: a panel with one more line shifts every colour after it.
2. **A legend that names everything drawn and is never clipped.** :func:`add_legend` puts one
   legend entry per column drawn anywhere in the figure (not only in its first panel) below the
   panels, wraps it into as many rows as the figure's width needs and grows the figure by the
   legend's height, so the legend lies inside the saved image and overlaps no panel.

A new plot follows the same rules by construction, e.g. bits per character against evaluation
length, one line per encoding::

    from cplxnet.compare.report.plots import add_legend, column_styles, pyplot, save_figure

    styles = column_styles(columns)  # all (encoding, number) columns of the report, in order
    fig, ax = pyplot().subplots(figsize=(5, 3.5))
    for col in drawn:  # the columns this figure shows
        ax.errorbar(lengths, bpc[col], yerr=std[col], capsize=2, **styles[col].line_kwargs())
    add_legend(fig, styles, drawn)  # after drawing every panel, before saving
    save_figure(fig, path)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ColumnStyle", "column_styles", "column_label", "add_legend", "pyplot", "save_figure"]

Column = tuple[str, str]

# Nine markers against ten (or twenty) colours: the (colour, marker) pair of column i repeats only
# after lcm(10, 9) = 90 (lcm(20, 9) = 180) columns.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<")


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (figures are only saved)."""
    try:
        import matplotlib
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise ImportError("the comparison plots need matplotlib: pip install matplotlib") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str) -> str:
    """Save ``fig`` to ``path`` (its folder created) at 110 dpi and close it; returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def column_label(column: Column) -> str:
    """The name of a column in tables and legends: ``"complex-order (complex)"``."""
    return f"{column[0]} ({column[1]})"


@dataclass(frozen=True)
class ColumnStyle:
    """How one ``(encoding, number field)`` column is drawn in every figure of a report."""

    column: Column
    label: str
    color: str  # "#rrggbb"
    marker: str

    def line_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Axes.plot`` / ``Axes.errorbar`` / ``Axes.scatter``."""
        return {"color": self.color, "marker": self.marker, "label": self.label}


def column_styles(columns: Iterable[Column]) -> dict[Column, ColumnStyle]:
    """One colour and one marker per column, fixed from the full ordered list of columns.

    Pass every ``(encoding, number)`` column of the report (tables and all figures), in the order
    of its tables, and draw every figure of that report with the returned map: the style of a
    column then depends only on its position in that list, never on which columns one panel holds.
    Duplicates are ignored (first position counts).

    Colours: ``tab10`` by position for up to 10 columns, ``tab20`` beyond (repeating after 20
    columns; the (colour, marker) pair stays unique up to 180 columns). When an encoding appears in
    both number fields (a ``--number both`` grid) the two columns share a hue, dark for the
    complex field and light for the real field (the pairs of ``tab20``), with different markers.
    Markers go by position.
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cols = list(dict.fromkeys((str(c[0]), str(c[1])) for c in columns))
    encodings = list(dict.fromkeys(c[0] for c in cols))
    paired = len(encodings) <= 10 and any(
        (e, "real") in cols and (e, "complex") in cols for e in encodings
    )
    if paired:
        palette = colormaps["tab20"].colors
        colors = [
            palette[2 * encodings.index(enc) + (0 if number == "complex" else 1)]
            for enc, number in cols
        ]
    else:
        palette = colormaps["tab10" if len(cols) <= 10 else "tab20"].colors
        colors = [palette[i % len(palette)] for i in range(len(cols))]
    return {
        col: ColumnStyle(
            column=col,
            label=column_label(col),
            color=to_hex(color),
            marker=MARKERS[i % len(MARKERS)],
        )
        for i, (col, color) in enumerate(zip(cols, colors))
    }


def _handles(styles: dict[Column, ColumnStyle], columns: Sequence[Column], kind: str):
    from matplotlib.lines import Line2D

    line = "none" if kind == "point" else "-"
    return [
        Line2D(
            [], [], color=styles[c].color, marker=styles[c].marker, ls=line, label=styles[c].label
        )
        for c in columns
    ]


def add_legend(
    fig,
    styles: dict[Column, ColumnStyle],
    columns: Iterable[Column],
    *,
    kind: str = "line",
    fontsize: float = 8.0,
):
    """One figure legend below all panels, listing every column in ``columns`` (the columns drawn
    anywhere in ``fig``) in the order of ``styles``, never clipped. Returns the legend.

    The legend takes as many columns as fit in the figure's width (fewest rows, then rows of equal
    length); the figure grows by the legend's height (the panels keep their size) and the panels
    are laid out above it with ``tight_layout``. A single entry wider than the figure widens the
    figure. ``kind`` is ``"line"`` (a line through the column's marker) or ``"point"`` (the
    marker alone). Call it once, after every panel is drawn and before saving.
    """
    if kind not in ("line", "point"):
        raise ValueError(f"kind must be 'line' or 'point', not {kind!r}")
    wanted = set(columns)
    missing = wanted - set(styles)
    if missing:
        raise KeyError(f"no style for column(s) {sorted(missing)}; build styles from all columns")
    cols = [c for c in styles if c in wanted]
    handles = _handles(styles, cols, kind)
    renderer = fig.canvas.get_renderer()
    avail = 0.98 * fig.bbox.width

    def place(ncol: int):
        return fig.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=max(1, ncol),
            fontsize=fontsize,
            frameon=False,
        )

    ncol = max(1, len(handles))
    legend = place(ncol)
    while ncol > 1 and legend.get_window_extent(renderer).width > avail:
        legend.remove()
        ncol -= 1
        legend = place(ncol)
    if handles:
        balanced = math.ceil(len(handles) / math.ceil(len(handles) / ncol))
        if balanced != ncol:
            legend.remove()
            legend = place(balanced)
    box = legend.get_window_extent(renderer)
    width_in, height_in = fig.get_size_inches()
    if box.width > avail:
        width_in = box.width / 0.98 / fig.dpi
    legend_in = box.height / fig.dpi + 0.1
    fig.set_size_inches(width_in, height_in + legend_in)
    fig.tight_layout(rect=(0, legend_in / (height_in + legend_in), 1, 1))
    return legend
