"""Complex dropout module."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF

__all__ = ["Dropout"]


class Dropout(nn.Module):
    r"""Drops whole complex entries with probability ``p`` (one Bernoulli mask shared by the real
    and imaginary parts, survivors scaled by :math:`1/(1-p)`, so phases are kept); identity in
    eval mode. See :func:`cplxnet.functional.dropout`. Real inputs get ordinary dropout.

    Shape: any -> same.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability p must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``z`` any shape ``(*)``, complex or real -> ``(*)``: in training mode each entry (real
        and imaginary part together) is zeroed with probability ``p`` and the rest scaled by
        ``1 / (1 - p)``; the identity in eval mode."""
        if not isinstance(z, torch.Tensor) or not (z.is_complex() or z.is_floating_point()):
            got = z.dtype if isinstance(z, torch.Tensor) else type(z).__name__
            raise TypeError(
                f"{type(self).__name__}: input must be a complex or floating tensor, got {got}"
            )
        return CF.dropout(z, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
