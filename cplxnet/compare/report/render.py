"""The comparison report of a results folder: ``report.md`` with the accuracy tables
(:mod:`cplxnet.compare.report.tables`), the statistics behind them
(:mod:`cplxnet.compare.report.statistics`) and the figures (:mod:`cplxnet.compare.report.figures`),
written next to the results.

:func:`load_results` reads the rows of a results folder, ``results.json`` or ``results.csv``;
:func:`render_report` writes the report. The public names of the three modules above are
importable from here too.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from .figures import (
    extrapolation_figure,
    plot_extrapolation,
    plot_results,
    report_columns,
    results_figure,
)
from .plots import column_styles
from .statistics import (
    WILCOXON_METHOD,
    PairedTest,
    Summary,
    is_ok,
    min_attainable_p,
    paired_test,
    summarize,
)
from .tables import (
    PAPER_TABLE2,
    extrapolation_table,
    paper_table,
    pooled_table,
    results_table,
    significance_table,
)

__all__ = [
    "REPORT_FILES",
    "REPORT_MARKER",
    "check_report_folder",
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
        reader = csv.DictReader(fh)
        try:
            raw = [_convert(r) for r in reader]
        except UnicodeDecodeError:
            raise
        except ValueError as err:  # a number column that holds no number
            raise ValueError(f"{path} line {reader.line_num}: {err}") from None
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
    """Rows from a results folder (its ``cells/``, in the order of its ``results.json``; the
    ``results.json`` alone when it has no cell files), a ``results.json`` or a ``results.csv``.
    Raises FileNotFoundError / ValueError (and CompareError for an unreadable cell file) with the
    path in the message."""
    if os.path.isdir(path):
        from ..grid.store import ResultStore, slim_row

        cells = ResultStore(path).load(strict=True)
        candidate = os.path.join(path, "results.json")
        listed = load_results(candidate) if os.path.exists(candidate) else []
        if not cells:
            if not listed and os.path.exists(os.path.join(path, "grid.json")):
                raise FileNotFoundError(
                    f"{path} is a comparison with no finished cell yet; run its compare command "
                    "again (it resumes) until a cell finishes, then report it"
                )
            if not listed:
                raise FileNotFoundError(
                    f"{path} has no results.json or cells/*.json; give a results folder of "
                    "cplxnet compare, or a results.json or results.csv"
                )
            return listed
        # the cell files are the results; results.json (written at the end of a grid) gives
        # their order and may be older than a cell
        order = {str(r.get("cell_id")): i for i, r in enumerate(listed)}
        rows = sorted(cells.values(), key=lambda r: (order.get(r["cell_id"], len(order)),
                                                     r["cell_id"]))  # fmt: skip
        return [slim_row(r) for r in rows]
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found; give a results folder, .json or .csv")
    try:
        rows = _read_csv(path) if path.endswith(".csv") else _read_json(path)
    except UnicodeDecodeError as err:
        byte = f"byte {err.object[err.start]:#04x}: {err.reason}"
        raise ValueError(f"{path} is not UTF-8 text ({byte}); give the results file cplxnet "
                         "compare wrote, or save it as UTF-8") from None  # fmt: skip
    if not rows:
        raise ValueError(f"{path} holds no result rows; nothing to report")
    return rows


def _read_json(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        try:
            obj = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON ({err})") from None
    rows = obj.get("rows") if isinstance(obj, dict) else obj
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path} holds no list of result rows")
    return rows


# ------------------------------------------------------------------------------------------------
# the report


def results_folder(results: str | Sequence[dict[str, Any]]) -> str | None:
    """The folder of the results: the folder given, or the folder of the results file; ``None``
    for rows given in memory."""
    if not isinstance(results, str):
        return None
    return results if os.path.isdir(results) else os.path.dirname(results) or "."


def report_place(
    results: str | Sequence[dict[str, Any]], out_dir: str | None, options: dict[str, Any] | None
) -> tuple[str, dict[str, Any] | None]:
    """The folder a report goes to (``out_dir``, else the results folder or the folder of the
    results file, else ``.``) and the budget it shows (``options``, else the ``options`` of the
    ``grid.json`` beside the results when ``results`` is a path, wherever the report goes)."""
    source = results_folder(results)
    if source is not None:
        out_dir = source if out_dir is None else out_dir
        if options is None:
            grid = os.path.join(source, "grid.json")
            if os.path.exists(grid):
                options = _grid_options(grid)
    return out_dir or ".", options


def _grid_options(grid: str) -> dict[str, Any] | None:
    """The ``options`` of a ``grid.json``; a damaged one is refused in one line."""
    fix = "restore it, or move it away to report without the budget"
    with open(grid, encoding="utf-8") as fh:
        try:
            stored = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{grid} is not valid JSON ({err}); {fix}") from None
    if not isinstance(stored, dict) or not isinstance(stored.get("options", {}), dict):
        raise ValueError(f"{grid} is not the grid.json of cplxnet compare; {fix}")
    return stored.get("options")


def thread_counts(rows: Sequence[dict[str, Any]]) -> set[int | None]:
    """The torch threads the runs trained with, from each cell's ``machine`` record (``None``:
    a run without one)."""
    return {(r.get("machine") or {}).get("threads") for r in rows}


def mixed_threads(rows: Sequence[dict[str, Any]]) -> str | None:
    """A note when the finished runs trained with different torch thread counts (a grid resumed
    with another ``--jobs`` or ``--threads``); ``None`` otherwise."""
    counts = sorted(thread_counts([r for r in rows if is_ok(r)]) - {None})
    if len(counts) < 2:
        return None
    listed = ", ".join(map(str, counts[:-1])) + f" and {counts[-1]}"
    return (
        f"the runs trained with {listed} torch threads (a grid resumed with other --jobs or "
        "--threads): a sum over threads rounds differently for each count, so runs of one "
        "cell are reproducible only at their own count"
    )


def failed_runs(rows: Sequence[dict[str, Any]], describe: Callable[[dict], str]) -> list[str]:
    """The report section on the runs that ended in an error (empty when none did), each named by
    ``describe(row)`` with the start of its error."""
    errors = [f"- {describe(r)}: {str(r.get('error', ''))[:300]}" for r in rows if not is_ok(r)]
    if not errors:
        return []
    return [f"## Runs that failed ({len(errors)})\n", "\n".join(errors) + "\n"]


#: the files a report writes into its folder
REPORT_FILES = ("report.md", "accuracy.png", "extrapolation.png", "lm.png", "curves.png")
#: the list of the files ``cplxnet report`` wrote into a folder that is not a comparison's
REPORT_MARKER = ".cplxnet-report"


def _is_comparison(folder: str) -> bool:
    from ..grid.store import is_comparison

    return is_comparison(folder)


def _listed(folder: str) -> set[str]:
    """The files :data:`REPORT_MARKER` of ``folder`` lists (none if it has no readable one)."""
    try:
        with open(os.path.join(folder, REPORT_MARKER), encoding="utf-8") as fh:
            return {str(name) for name in json.load(fh)}
    except (OSError, ValueError, TypeError):
        return set()


def check_report_folder(
    out_dir: str, home: str | None = None, files: Sequence[str] = REPORT_FILES
) -> None:
    """Refuse to replace a file of ``files`` (:data:`REPORT_FILES`, or the names the report will
    write) in ``out_dir`` that this cplxnet did not write: they are replaced in the comparison
    folder of the results (its ``grid.json``; another comparison's folder is refused when
    ``home``, the results' folder, is given) or when the folder's :data:`REPORT_MARKER` lists
    them. Outside a comparison folder the marker then lists every file of ``files`` before any
    is written, so a report that fails midway leaves files a rerun may replace. A run folder of
    ``cplxnet train`` and an output folder of ``cplxnet inspect`` are refused: their owner
    replaces only its own files."""
    from ...engine.runs import INSPECT_MARKER, is_run_folder

    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"{out_dir} is a file, not a folder; give --out a folder")
    if not os.path.isdir(out_dir):
        return
    if _is_comparison(out_dir):
        if home is not None and os.path.realpath(home) != os.path.realpath(out_dir):
            raise ValueError(
                f"{out_dir} is the folder of another comparison, whose report it holds; give "
                "--out a new folder"
            )
        return
    if is_run_folder(out_dir):
        raise ValueError(f"{out_dir} is a run folder of cplxnet train; give --out another folder")
    if os.path.exists(os.path.join(out_dir, INSPECT_MARKER)):
        raise ValueError(
            f"{out_dir} is an output folder of cplxnet inspect; give --out another folder"
        )
    own = _listed(out_dir)
    clash = [n for n in files if os.path.lexists(os.path.join(out_dir, n)) and n not in own]
    if clash:
        raise ValueError(
            f"{os.path.join(out_dir, clash[0])} is not listed as written by cplxnet report (not "
            "a cplxnet file, or written by an older version); move it away or give --out a new "
            "folder"
        )
    _write_marker(out_dir, own | set(files))


def _write_marker(out_dir: str, names: set[str]) -> None:
    from ...engine.runs import atomic_write

    atomic_write(os.path.join(out_dir, REPORT_MARKER), lambda fh: json.dump(sorted(names), fh))


def write_report(
    out_dir: str, parts: Sequence[str], written: Sequence[str]
) -> tuple[str, list[str]]:
    """Write the sections ``parts`` to ``out_dir/report.md``; returns the markdown and the files
    written (``report.md``, then ``written``). Outside a comparison folder the files written are
    listed in :data:`REPORT_MARKER`, so a later report may replace them."""
    from ...engine.runs import atomic_write

    text = "\n".join(parts)
    os.makedirs(out_dir, exist_ok=True)
    md = os.path.join(out_dir, "report.md")
    atomic_write(md, lambda fh: fh.write(text))
    files = [md, *written]
    if not _is_comparison(out_dir):  # the files of this report and those of earlier ones
        claimed = {n for n in _listed(out_dir) if os.path.lexists(os.path.join(out_dir, n))}
        _write_marker(out_dir, claimed | {os.path.basename(f) for f in files})
    return text, files


def _describe(row: dict[str, Any]) -> str:
    return (
        f"{row.get('data')} {row.get('family')} {row.get('encoding')} ({row.get('number')}) "
        f"seed {row.get('seed')}"
    )


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
    rows = load_results(results) if isinstance(results, str) else list(results)
    out_dir, options = report_place(results, out_dir, options)
    check_report_folder(out_dir, results_folder(results))
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
                f"test per column ({WILCOXON_METHOD}); rows = table rows (dataset x model) with "
                "both columns.\n"
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
    parts += failed_runs(rows, _describe)
    note = mixed_threads(rows)
    if options or note:
        parts.append("## Budget\n")
    if note:
        parts.append(f"Note: {note}.\n")
    if options:
        parts.append("```json\n" + json.dumps(options, indent=1, sort_keys=True) + "\n```\n")
    return write_report(out_dir, parts, written)
