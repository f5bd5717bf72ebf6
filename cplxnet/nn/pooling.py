"""Sequence pooling modules honouring a padding mask (True = padding)."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from .._utils import check_mask

__all__ = ["MeanPool", "MaxMagnitudePool"]


def _check(x: object, mask: torch.Tensor | None, dim: int, owner: str) -> None:
    if not isinstance(x, torch.Tensor) or not (x.is_complex() or x.is_floating_point()):
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{owner}: input must be a complex or floating tensor, got {got}")
    if x.dim() < 2:
        raise ValueError(
            f"{owner}: expected an input (B, L, ...) with at least 2 dims, got {tuple(x.shape)}"
        )
    d = dim % x.dim()
    if d == 0:
        raise ValueError(f"{owner}: dim={dim} is the batch dim; pool over a sequence dim instead")
    check_mask(mask, (x.shape[0], x.shape[d]), owner, "padding_mask (True = padding)")


class MeanPool(nn.Module):
    r"""Mean over the sequence dim ``dim`` (default 1, ``(B, L, D) -> (B, D)``) counting only
    non-padded positions; ``padding_mask`` ``(B, L)`` bool, True = padding (see
    :func:`cplxnet.functional.masked_mean`). Complex or real input."""

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``(B, L, ...)`` complex or real, ``padding_mask`` ``(B, L)`` bool, **True =
        padding** (``None``: no padding) -> ``x`` with the ``dim`` axis averaged over the
        non-padded positions, e.g. ``(B, L, D) -> (B, D)``."""
        _check(x, padding_mask, self.dim, type(self).__name__)
        return CF.masked_mean(x, padding_mask, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class MaxMagnitudePool(nn.Module):
    r"""Per feature, the entry with the largest modulus over the sequence dim ``dim`` among
    non-padded positions (default ``dim=1``; ``dim=-1`` is max-over-time for a ``(B, C, L)`` conv
    output as in Kim's CNN). The gradient flows to the selected entries only (see
    :func:`cplxnet.functional.masked_max_magnitude`). Complex or real input."""

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``(B, L, ...)`` complex or real, ``padding_mask`` ``(B, L)`` bool, **True =
        padding** (``None``: no padding) -> along ``dim``, the entry of largest modulus among the
        non-padded positions, e.g. ``(B, L, D) -> (B, D)``."""
        _check(x, padding_mask, self.dim, type(self).__name__)
        return CF.masked_max_magnitude(x, padding_mask, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
