"""Pooling over a sequence with a padding mask (True = padding), and max-over-time by modulus."""

from __future__ import annotations

import math

import torch

from .._utils import pack, unpack

__all__ = ["masked_mean", "masked_max_magnitude", "max_magnitude"]


def _keep_weights(
    x: torch.Tensor, padding_mask: torch.Tensor | None, dim: int
) -> torch.Tensor | None:
    """Broadcast ``~padding_mask`` ``(B, L)`` to ``x`` with ``L`` at ``dim`` (bool) or None."""
    if padding_mask is None:
        return None
    keep = ~padding_mask  # (B, L)
    shape = [1] * x.dim()
    shape[0], shape[dim] = keep.shape[0], keep.shape[1]
    return keep.reshape(shape)


def masked_mean(
    x: torch.Tensor, padding_mask: torch.Tensor | None = None, dim: int = 1
) -> torch.Tensor:
    r"""Mean of ``x`` over ``dim`` counting only non-padded positions.

    ``x`` is ``(B, L, ...)`` with the sequence at ``dim`` (default 1; use ``dim=-1`` for a
    ``(B, C, L)`` conv output) and ``padding_mask`` is a bool ``(B, L)`` with True marking padding.
    A sequence that is entirely padding pools to zeros. Values at padded positions never affect the
    output or receive gradient. The weighted sum runs as one real batched matmul on the packed view
    (:func:`cplxnet._utils.pack`), so complex and real inputs share the code.
    """
    dim = dim % x.dim()
    if padding_mask is None:
        return x.mean(dim=dim)
    keep = (~padding_mask).to(x.real.dtype)  # (B, L)
    count = keep.sum(dim=1, keepdim=True).clamp_min(1.0)  # (B, 1)
    w = (keep / count).unsqueeze(1)  # (B, 1, L)
    xm = x.movedim(dim, 1)  # (B, L, *rest)
    rest = xm.shape[2:]
    # (B, L, F) real (F = 2 * features if complex); explicit sizes so that B = 0 works
    flat = pack(xm.reshape(xm.shape[0], xm.shape[1], math.prod(rest)))
    # padded entries are zeroed first so that inf/nan stored in padding cannot leak (0 * inf = nan)
    flat = flat.masked_fill(padding_mask.unsqueeze(-1), 0.0)
    out = torch.bmm(w, flat).squeeze(1)  # (B, F)
    return unpack(out, x).reshape(xm.shape[0], *rest)


def masked_max_magnitude(
    x: torch.Tensor, padding_mask: torch.Tensor | None = None, dim: int = 1
) -> torch.Tensor:
    r"""Per feature, the entry of ``x`` with the largest modulus over ``dim`` among non-padded
    positions (the complex entry itself, phase included; for a real ``x`` the entry with the largest
    absolute value, sign included).

    The gradient flows only to the selected entry (through ``gather``). A sequence that is entirely
    padding pools to zeros. Shapes as :func:`masked_mean`.
    """
    dim = dim % x.dim()
    score = _sq_modulus_or_square(x).detach()  # ordering by |x|^2 avoids a sqrt
    keep = _keep_weights(x, padding_mask, dim)
    if keep is not None:
        score = score.masked_fill(~keep, -1.0)
    idx = score.argmax(dim=dim, keepdim=True)
    out = x.gather(dim, idx).squeeze(dim)
    if keep is not None:
        empty = ~keep.any(dim=dim)  # (B, 1, ...) broadcastable to out
        out = out.masked_fill(empty, 0)
    return out


def max_magnitude(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Max-over-time by modulus, e.g. for a Kim-CNN ``(B, C, L)`` conv output (``dim=-1``):
    :func:`masked_max_magnitude` without a mask."""
    return masked_max_magnitude(x, None, dim)


def _sq_modulus_or_square(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(x).square().sum(-1) if x.is_complex() else x.square()
