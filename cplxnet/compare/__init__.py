"""Complex against real positional encodings, side by side (``cplxnet compare`` / ``report``).

* :mod:`~cplxnet.compare.grid`: the grid of datasets x folds x families x encodings x number
  fields x seeds, one result file per cell (resumable), parallel worker processes;
* :mod:`~cplxnet.compare.report`: the report of a results folder, made of
  :mod:`~cplxnet.compare.report.statistics` (mean ± std, the Wilcoxon signed-rank test of
  complex-order against the best real-field column), :mod:`~cplxnet.compare.report.tables` (the
  Table 2-style table, best in bold) and :mod:`~cplxnet.compare.report.figures`;
* :mod:`~cplxnet.compare.report.plots`: the plot conventions of a report (one colour and marker per
  (encoding, number) column for the whole report, a legend naming every line, never clipped);
* :mod:`~cplxnet.compare.grid.extrapolate` and :mod:`~cplxnet.tasks.classify.synthetic`: length
  extrapolation on real data split by length and on a synthetic order task;
* :mod:`~cplxnet.encodings.specs` (also as :mod:`~cplxnet.compare.specs`): encoding specs
  (``complex-order:phase=false``), the Complex Order ablations, number fields.
"""

from ..encodings.specs import (
    EVAL_VARIANTS,
    MODEL_VARIANTS,
    VARIANTS,
    EncodingSpec,
    parse_encoding,
    parse_encodings,
    parse_numbers,
)
from ..tasks.classify.synthetic import LengthBin, SyntheticOrderTask, length_bins
from .grid import (
    Cell,
    CompareError,
    GridOptions,
    ResultStore,
    cell_config,
    check_combination,
    expand_grid,
    parse_folds,
    parse_seeds,
    parse_sets,
    run_cell,
    run_grid,
)
from .report.plots import ColumnStyle, add_legend, column_styles
from .report.render import (
    PAPER_TABLE2,
    PairedTest,
    extrapolation_figure,
    extrapolation_table,
    load_results,
    min_attainable_p,
    paired_test,
    plot_extrapolation,
    plot_results,
    pooled_table,
    render_report,
    report_columns,
    results_figure,
    results_table,
    significance_table,
)

__all__ = [
    "Cell",
    "CompareError",
    "GridOptions",
    "ResultStore",
    "cell_config",
    "check_combination",
    "expand_grid",
    "parse_folds",
    "parse_seeds",
    "parse_sets",
    "run_cell",
    "run_grid",
    "PAPER_TABLE2",
    "PairedTest",
    "extrapolation_table",
    "load_results",
    "min_attainable_p",
    "paired_test",
    "plot_extrapolation",
    "plot_results",
    "extrapolation_figure",
    "results_figure",
    "report_columns",
    "ColumnStyle",
    "column_styles",
    "add_legend",
    "render_report",
    "results_table",
    "significance_table",
    "pooled_table",
    "VARIANTS",
    "MODEL_VARIANTS",
    "EVAL_VARIANTS",
    "EncodingSpec",
    "parse_encoding",
    "parse_encodings",
    "parse_numbers",
    "LengthBin",
    "SyntheticOrderTask",
    "length_bins",
]
