"""The encoding specs of the comparison grid: :mod:`cplxnet.encodings.specs`, under the name the
grid's documentation and scripts use."""

from __future__ import annotations

from ..encodings.specs import *  # noqa: F403
from ..encodings.specs import __all__  # noqa: F401
