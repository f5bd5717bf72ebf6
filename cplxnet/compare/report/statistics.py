"""The statistics of a comparison report: runs grouped into cells of the table, their mean and
sample standard deviation, and the paired two-sided Wilcoxon signed-rank test of one column against
another over runs matched by (fold, seed).

With ``n`` non-zero differences the smallest attainable two-sided p-value of the exact test is
``2 / 2**n`` (:func:`min_attainable_p`): ``n <= 5`` can never reach ``p < 0.05``.

The p-value is :func:`scipy.stats.wilcoxon`'s with its defaults (:data:`WILCOXON_METHOD`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "is_ok",
    "mean_std",
    "Summary",
    "summarize",
    "min_attainable_p",
    "WILCOXON_METHOD",
    "PairedTest",
    "paired_test",
    "target_column",
    "best_baseline",
    "comparison",
    "extrapolation_groups",
]


#: How :func:`paired_test` computes p (scipy's ``zero_method="wilcox"``, ``method="auto"``), as
#: the reports state it.
WILCOXON_METHOD = (
    "`scipy.stats.wilcoxon`: zero differences dropped; exact up to 50 pairs without ties or "
    "zeros; with ties or zeros all sign permutations up to 13 pairs; the normal approximation "
    "otherwise"
)


def is_ok(row: dict[str, Any]) -> bool:
    """Whether a result row is a successful run (no status counts as success)."""
    return row.get("status", "ok") in ("ok", "", None)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
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
        return mean_std(list(self.values.values()))[0]

    @property
    def std(self) -> float:
        return mean_std(list(self.values.values()))[1]


def _fold_key(row: dict[str, Any]) -> Any:
    fold = row.get("fold")
    return None if fold in ("", None) else int(fold)


def summarize(
    rows: Sequence[dict[str, Any]], metric: str = "test_accuracy"
) -> tuple[dict[tuple, Summary], list[str], list[str], list[tuple[str, str]]]:
    """Group successful grid rows: ``{(data, family, encoding, number): Summary}`` and the data,
    family and column orders (first appearance). Rows of one group trained with different
    budgets (as :meth:`~cplxnet.compare.grid.store.ResultStore.check_options` compares them: an
    option at its default equals one left out, and presets are the cells' own), or two rows of
    one group, fold and seed, are a ValueError (results of several grids put together): a mean
    over them would mix settings, and one would hide the other."""
    groups: dict[tuple, Summary] = {}
    first: dict[tuple, tuple[Any, dict[str, Any]]] = {}  # the budget and first row of a group
    holders: dict[tuple, dict[str, Any]] = {}  # the row of each (group, fold, seed)
    datas: list[str] = []
    families: list[str] = []
    columns: list[tuple[str, str]] = []
    for row in rows:
        if not is_ok(row) or row.get("mode", "grid") not in ("grid", "", None):
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
        run = (_fold_key(row), int(row["seed"]))
        seen, other = first.setdefault(key, (_options(row), row))
        what = f"{data} {family} {col[0]} ({col[1]})"
        if not _same_budget(seen, _options(row)):
            raise ValueError(
                f"the results mix runs of {what} trained with different options "
                f"({other.get('cell_id')} and {row.get('cell_id')}); report each grid's results "
                "separately"
            )
        values = groups.setdefault(key, Summary({})).values
        holder = holders.setdefault((*key, *run), row)
        if holder is not row:
            raise ValueError(
                f"the results hold two runs of {what} seed {run[1]}"
                + (f" fold {run[0]}" if run[0] is not None else "")
                + f" ({holder.get('cell_id')} and {row.get('cell_id')}); report each grid's "
                "results separately"
            )
        values[run] = float(value)
    return groups, datas, families, columns


def _options(row: dict[str, Any]) -> Any:
    """A row's budget: its ``options`` (a dict, or its JSON text in a results.csv; none is
    ``{}``)."""
    options = row.get("options")
    if isinstance(options, str) and options:
        try:
            return json.loads(options)
        except ValueError:
            return options
    return {} if options in (None, "") else options


def _same_budget(a: Any, b: Any) -> bool:
    """Whether two budgets of :func:`_options` are one, as ``compare`` compares a grid's stored
    budget with a re-run's (:func:`~cplxnet.compare.grid.store.budget_diffs`)."""
    from ..grid.store import budget_diffs

    if not (isinstance(a, dict) and isinstance(b, dict)):
        return a == b
    try:
        return not budget_diffs(a, b)
    except (AttributeError, TypeError, ValueError):  # a damaged budget: compared as written
        return a == b


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


def target_column(columns: list[tuple[str, str]], target: str) -> tuple[str, str] | None:
    """The column of the ``target`` encoding: its complex field if present, else its real one."""
    for number in ("complex", "real"):
        if (target, number) in columns:
            return (target, number)
    return None


def best_baseline(
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


def comparison(
    groups: dict[tuple, Summary],
    data: str,
    family: str,
    columns: list[tuple[str, str]],
    target: str,
) -> tuple[tuple[str, str], tuple[str, str], PairedTest] | None:
    """The target column of one table row, its best real baseline (:func:`best_baseline`) and
    the paired test of the two (``None`` when the row lacks either)."""
    tcol = target_column(columns, target)
    if tcol is None or (data, family, *tcol) not in groups:
        return None
    base = best_baseline(groups, data, family, columns, exclude=tcol)
    if base is None:
        return None
    test = paired_test(groups[(data, family, *tcol)].values, groups[(data, family, *base)].values)
    return tcol, base, test


def extrapolation_groups(rows: Sequence[dict[str, Any]]) -> tuple[dict, dict, dict, list]:
    """The successful extrapolation rows grouped: ``{(data, family, encoding, number): {bin:
    [accuracy per run]}}``, the bin labels of each dataset ``{(data,): [bin, ...]}``, the texts
    per bin ``{key: {bin: n}}`` and the keys in order of first appearance."""
    groups: dict[tuple, dict[str, list[float]]] = {}
    bins_of: dict[tuple, list[str]] = {}
    counts: dict[tuple, dict[str, int]] = {}
    order: list[tuple] = []
    for row in rows:
        if not is_ok(row) or not row.get("bins"):
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
