"""``cplxnet.train``: the import path of the classification task's public names
(:mod:`cplxnet.tasks.classify`), e.g. ``from cplxnet.train import train, load_checkpoint``."""

from __future__ import annotations

from .tasks.classify.task import *  # noqa: F403
from .tasks.classify.task import __all__  # noqa: F401
