"""Variance-correct initialisation for complex parameters (placeholder: the core helper completes it)."""

from __future__ import annotations

import torch
from complextorch.nn import init as _ct_init

__all__ = ["xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def xavier_uniform_(tensor: torch.Tensor, gain: float = 1.0) -> torch.Tensor:
    """Complex Glorot uniform: E|w|^2 = 2 gain^2 / (fan_in + fan_out) (complextorch's, tested)."""
    return _ct_init.xavier_uniform_(tensor, gain)


xavier_normal_ = _ct_init.xavier_normal_
kaiming_uniform_ = _ct_init.kaiming_uniform_
kaiming_normal_ = _ct_init.kaiming_normal_
