"""The report's figures cannot mislead: one colour and marker per (encoding, number) column in
every panel and figure of a report, a legend naming every series drawn, and a legend that
lies inside the figure (measured with the renderer) without covering a panel."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer

from cplxnet.compare import (
    column_styles,
    extrapolation_figure,
    render_report,
    report_columns,
    results_figure,
)
from cplxnet.compare.report.plots import add_legend, pyplot

matplotlib.use("Agg")


def _x_rows(panels: dict[str, list[tuple[str, str]]]) -> list[dict]:
    """Extrapolation rows: per family the columns it holds; accuracy made up per column."""
    rows = []
    for family, columns in panels.items():
        for j, (enc, number) in enumerate(columns):
            for seed in range(2):
                acc = 0.5 + 0.05 * j + 0.01 * seed
                rows.append(
                    {
                        "data": "synthetic", "fold": None, "family": family, "encoding": enc,
                        "number": number, "seed": seed, "status": "ok", "mode": "extrapolate",
                        "train_len": 4, "test_accuracy": acc, "cell_id": f"{family}{enc}{seed}",
                        "bins": [
                            {"bin": "2-4", "n": 10, "accuracy": acc},
                            {"bin": "5-8", "n": 10, "accuracy": acc - 0.1},
                        ],
                    }
                )  # fmt: skip
    return rows


def _grid_rows(datas, families, columns) -> list[dict]:
    rows = []
    for data in datas:
        for f, family in enumerate(families):
            for j, (enc, number) in enumerate(columns):
                for seed in range(3):
                    acc = 0.6 + 0.02 * j + 0.01 * f + 0.005 * seed
                    rows.append(
                        {
                            "data": data, "fold": None, "family": family, "encoding": enc,
                            "number": number, "seed": seed, "test_accuracy": acc,
                            "dev_accuracy": acc, "status": "ok", "mode": "grid",
                        }
                    )  # fmt: skip
    return rows


def _panel_colors(ax) -> dict[str, str]:
    """label -> colour of every series drawn in ``ax`` (points or lines with error bars)."""
    return {
        c.get_label(): to_hex(c.lines[0].get_color())
        for c in ax.containers
        if isinstance(c, ErrorbarContainer)
    }


def _legend_colors(fig) -> dict[str, str]:
    assert len(fig.legends) == 1, "one legend for the whole figure"
    legend = fig.legends[0]
    out = {}
    for text, handle in zip(legend.get_texts(), legend.legend_handles):
        out[text.get_text()] = to_hex(handle.get_color())
    return out


def _assert_legend_inside(fig) -> None:
    """The legend's box lies inside the figure and overlaps no panel (tick labels included)."""
    renderer = fig.canvas.get_renderer()
    box = fig.legends[0].get_window_extent(renderer)
    page = fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)
    assert page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)
    for ax in fig.axes:
        if ax.axison:
            assert not box.overlaps(ax.get_tightbbox(renderer)), ax.get_title()


def test_panel_with_one_more_encoding_keeps_every_colour():
    """The second panel draws rotary (real) between the columns of the first: every label keeps
    its colour and marker in both panels, and the legend names all five with those colours."""
    first = [("none", "real"), ("trainable", "real"), ("sinusoidal", "real")]
    first.append(("complex-order", "complex"))
    second = [*first[:3], ("rotary", "real"), first[3]]
    fig = extrapolation_figure(_x_rows({"lstm": first, "transformer": second}))
    try:
        ax1, ax2 = fig.axes
        c1, c2 = _panel_colors(ax1), _panel_colors(ax2)
        assert set(c1) == {f"{e} ({n})" for e, n in first}
        assert set(c2) == set(c1) | {"rotary (real)"}
        for label, color in c1.items():
            assert c2[label] == color, label
        assert len(set(c2.values())) == 5  # five lines, five colours
        markers = {
            c.get_label(): c.lines[0].get_marker() for ax in (ax1, ax2) for c in ax.containers
        }
        assert len(set(markers.values())) == 5
        legend = _legend_colors(fig)
        assert legend == c2  # every line drawn, in its colour
        _assert_legend_inside(fig)
    finally:
        pyplot().close(fig)


@pytest.mark.parametrize("families", [["cnn"], ["fasttext", "cnn", "lstm", "transformer"]])
def test_accuracy_legend_with_six_columns_is_inside_the_figure(families):
    """A --number both grid: six columns, whose one-row legend is wider than a small figure."""
    columns = [(e, n) for e in ("none", "rotary", "complex-order") for n in ("real", "complex")]
    fig = results_figure(_grid_rows(["mr", "trec"], families, columns))
    try:
        mr, trec = fig.axes
        assert _panel_colors(mr) == _panel_colors(trec)
        assert _legend_colors(fig) == _panel_colors(mr)
        assert len(_legend_colors(fig)) == 6
        _assert_legend_inside(fig)
    finally:
        pyplot().close(fig)


def test_long_legend_wraps_into_rows_within_the_figure_width():
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.0, 2.0))
    cols = [(f"encoding-{i}", "complex") for i in range(12)]
    styles = column_styles(cols)
    for i, col in enumerate(cols):
        ax.plot([0, 1], [i, i], **styles[col].line_kwargs())
    try:
        legend = add_legend(fig, styles, cols)
        assert [t.get_text() for t in legend.get_texts()] == [styles[c].label for c in cols]
        width, height = fig.get_size_inches()
        assert width == 4.0 and height > 2.0  # wrapped (not widened); grown by the legend
        fig.canvas.draw()
        rows = {round(t.get_window_extent().y0) for t in legend.get_texts()}
        assert len(rows) > 1
        _assert_legend_inside(fig)
    finally:
        plt.close(fig)


def test_an_entry_wider_than_the_figure_widens_it():
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(1.0, 2.0))
    col = ("an-encoding-with-a-name-much-longer-than-one-inch", "complex")
    styles = column_styles([col])
    ax.plot([0, 1], [0, 1], **styles[col].line_kwargs())
    try:
        add_legend(fig, styles, [col])
        assert fig.get_size_inches()[0] > 1.0
        _assert_legend_inside(fig)
    finally:
        plt.close(fig)


def test_report_figures_share_the_styles_of_all_columns():
    """A report with grid and extrapolation rows: a column has the same colour in both figures,
    fixed by the report's full column list, not by the columns of one figure."""
    grid = _grid_rows(["mr"], ["cnn"], [("none", "real"), ("complex-order", "complex")])
    xrows = _x_rows({"lstm": [("rotary", "real"), ("complex-order", "complex")]})
    styles = column_styles(report_columns(grid + xrows))
    assert list(styles) == [("none", "real"), ("complex-order", "complex"), ("rotary", "real")]
    points = results_figure(grid, styles=styles)
    lines = extrapolation_figure(xrows, styles=styles)
    try:
        b, ln = _panel_colors(points.axes[0]), _panel_colors(lines.axes[0])
        assert b["complex-order (complex)"] == ln["complex-order (complex)"]
        assert b["complex-order (complex)"] == styles[("complex-order", "complex")].color
        assert ln["rotary (real)"] == styles[("rotary", "real")].color
        # the legend of each figure lists what that figure draws, no more
        assert set(_legend_colors(lines)) == {"rotary (real)", "complex-order (complex)"}
    finally:
        pyplot().close(points)
        pyplot().close(lines)


def test_styles_missing_a_column_are_an_error_not_a_missing_series():
    grid = _grid_rows(["mr"], ["cnn"], [("none", "real"), ("complex-order", "complex")])
    with pytest.raises(ValueError, match=r"no style for complex-order \(complex\)"):
        results_figure(grid, styles=column_styles([("none", "real")]))
    xrows = _x_rows({"lstm": [("rotary", "real")]})
    with pytest.raises(ValueError, match=r"no style for rotary \(real\)"):
        extrapolation_figure(xrows, styles=column_styles([("none", "real")]))


def test_column_styles_are_fixed_by_position_and_unique():
    cols = [("none", "real"), ("trainable", "real"), ("complex-order", "complex")]
    styles = column_styles(cols)
    assert styles == column_styles(cols + [cols[0]])  # duplicates ignored
    assert [s.color for s in styles.values()] == [
        to_hex(c) for c in matplotlib.colormaps["tab10"].colors[:3]
    ]
    assert [s.marker for s in styles.values()] == ["o", "s", "^"]
    assert styles[cols[2]].label == "complex-order (complex)"
    many = column_styles([(f"e{i}", "real") for i in range(25)])
    assert len({(s.color, s.marker) for s in many.values()}) == 25


def test_column_styles_pair_the_two_fields_of_one_encoding():
    """--number both: an encoding's complex and real columns share a hue (dark / light)."""
    cols = [(e, n) for e in ("none", "complex-order") for n in ("real", "complex")]
    styles = column_styles(cols)
    tab20 = [to_hex(c) for c in matplotlib.colormaps["tab20"].colors]
    assert styles[("none", "complex")].color == tab20[0]
    assert styles[("none", "real")].color == tab20[1]
    assert styles[("complex-order", "complex")].color == tab20[2]
    assert styles[("complex-order", "real")].color == tab20[3]
    assert len({s.marker for s in styles.values()}) == 4


def test_rendered_report_draws_both_figures_with_one_style_map(tmp_path, monkeypatch):
    """render_report builds the styles once from every column of the report (both figures)."""
    from cplxnet.compare.report import render as report

    seen = {}
    for name in ("plot_results", "plot_extrapolation"):
        original = getattr(report, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            seen[_name] = kwargs.get("styles")
            return _original(*args, **kwargs)

        monkeypatch.setattr(report, name, spy)
    grid = _grid_rows(["mr"], ["cnn"], [("none", "real"), ("complex-order", "complex")])
    xrows = _x_rows({"lstm": [("rotary", "real"), ("complex-order", "complex")]})
    _, written = render_report(grid + xrows, str(tmp_path))
    assert [p.rsplit("/", 1)[-1] for p in written] == [
        "report.md",
        "accuracy.png",
        "extrapolation.png",
    ]
    assert seen["plot_results"] is seen["plot_extrapolation"]
    assert list(seen["plot_results"]) == [
        ("none", "real"),
        ("complex-order", "complex"),
        ("rotary", "real"),
    ]
