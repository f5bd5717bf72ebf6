"""The report wing of ``cplxnet compare``: a results folder read back and rendered as
``report.md`` with its tables and figures (:mod:`~cplxnet.compare.report.render`), made of
:mod:`~cplxnet.compare.report.statistics` (mean ± std, the Wilcoxon signed-rank test),
:mod:`~cplxnet.compare.report.tables`, :mod:`~cplxnet.compare.report.figures` and
:mod:`~cplxnet.compare.report.plots` (one colour and marker per column for the whole report);
a language-model grid's report is :mod:`~cplxnet.compare.report.lm_report` (with its learning
curves, :mod:`~cplxnet.compare.report.lm_curves`)."""

from __future__ import annotations

from .render import *  # noqa: F403
from .render import __all__  # noqa: F401
