"""Text classification: :func:`train` / :func:`resume` a classifier of the zoo in a run folder
(:mod:`~cplxnet.tasks.classify.task`, :class:`ClassifyTask` for the engine's loop) and load,
score or query a finished run (:mod:`~cplxnet.tasks.classify.inference`)."""

from __future__ import annotations

from .task import *  # noqa: F403
from .task import __all__  # noqa: F401
