"""Complex-valued layers with torch.nn conventions (factory kwargs, reset_parameters, extra_repr)."""

from .linear import *  # noqa: F403
from .attention import *  # noqa: F403
