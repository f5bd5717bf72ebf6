"""``cplxnet.lm``: the import path of the language-model task's public names
(:mod:`cplxnet.tasks.lm`), e.g. ``from cplxnet.lm import LMOptions, train_lm, generate``."""

from __future__ import annotations

from ..tasks.lm import *  # noqa: F403
from ..tasks.lm import __all__  # noqa: F401
