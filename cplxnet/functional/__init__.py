"""Functional forms of every cplxnet layer; the modules in :mod:`cplxnet.nn` delegate here."""

from .linear import *  # noqa: F403
from .attention import *  # noqa: F403
