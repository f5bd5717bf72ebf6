"""The report wing of ``cplxnet compare``: a results folder read back and rendered as
``report.md`` with its tables and figures (:mod:`~cplxnet.compare.report.render`), made of
:mod:`~cplxnet.compare.report.statistics` (mean ± std, the Wilcoxon signed-rank test),
:mod:`~cplxnet.compare.report.tables`, :mod:`~cplxnet.compare.report.figures` and
:mod:`~cplxnet.compare.report.plots` (one colour and marker per column for the whole report);
a language-model grid's report is :mod:`~cplxnet.compare.report.lm_report` (with its learning
curves, :mod:`~cplxnet.compare.report.lm_curves`)."""

from __future__ import annotations

from .render import (
    PAPER_TABLE2,
    PairedTest,
    Summary,
    extrapolation_figure,
    extrapolation_table,
    failed_runs,
    load_results,
    min_attainable_p,
    paired_test,
    paper_table,
    plot_extrapolation,
    plot_results,
    pooled_table,
    render_report,
    report_columns,
    report_place,
    results_figure,
    results_table,
    significance_table,
    summarize,
    write_report,
)

__all__ = [
    "load_results",
    "summarize",
    "Summary",
    "paired_test",
    "PairedTest",
    "min_attainable_p",
    "results_table",
    "significance_table",
    "pooled_table",
    "paper_table",
    "extrapolation_table",
    "report_columns",
    "results_figure",
    "extrapolation_figure",
    "plot_results",
    "plot_extrapolation",
    "render_report",
    "report_place",
    "failed_runs",
    "write_report",
    "PAPER_TABLE2",
]
