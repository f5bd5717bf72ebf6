"""Complex dropout with one mask per complex entry or per channel."""

from __future__ import annotations

import torch

from .._utils import as_complex

__all__ = ["dropout", "dropout2d", "dropout3d"]


def dropout(
    z: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    r"""Drop whole complex entries: :math:`y = z \cdot m / (1 - p)` with :math:`m \sim
    \mathrm{Bernoulli}(1 - p)` drawn once per complex entry and shared by the real and imaginary
    parts (Trabelsi et al., "Deep Complex Networks", ICLR 2018), so surviving entries keep their
    phase. Identity when ``training`` is False or ``p == 0``; zeros when ``p == 1``. Arguments as
    ``torch.nn.functional.dropout`` (``inplace=True`` overwrites ``z`` and returns it).

    ``torch.nn.functional.dropout`` raises on complex tensors in torch 2.13, and splitting into two
    real dropouts would draw independent masks (changing the phase of half-dropped entries). Real
    tensors are accepted (ordinary dropout).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return z
    if not z.is_complex():
        return torch.nn.functional.dropout(z, p, True, inplace)
    return _masked(z, p, z.shape, inplace)


def _masked(z: torch.Tensor, p: float, mask_shape: tuple, inplace: bool) -> torch.Tensor:
    """``z`` times one Bernoulli(1 - p) / (1 - p) draw per entry of ``mask_shape`` (a prefix of
    ``z``'s shape padded with ones, broadcast over the rest and over the real/imaginary parts)."""
    real = torch.view_as_real(z) if z.is_complex() else z.unsqueeze(-1)
    if p == 1.0:
        return z.mul_(0) if inplace else z * 0
    # one draw per mask entry, broadcast over (re, im); bernoulli_ + scale in one buffer
    mask = torch.empty(tuple(mask_shape) + (1,), dtype=real.dtype, device=z.device)
    mask.bernoulli_(1.0 - p).div_(1.0 - p)
    if inplace:
        real.mul_(mask)
        return z
    out = real * mask
    return as_complex(out) if z.is_complex() else out.squeeze(-1)


def _channel_dropout(z, p, training, inplace, nd, owner):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{owner}: probability p must be in [0, 1], got {p}")
    if z.dim() not in (nd + 1, nd + 2):
        raise ValueError(
            f"{owner}: expected a ({nd + 2}-D) batched or ({nd + 1}-D) input, got shape "
            f"{tuple(z.shape)}"
        )
    if not training or p == 0.0:
        return z
    lead = 2 if nd == 2 else z.dim() - nd  # as torch's dropout2d, a 3-D input is (B, C, L)
    return _masked(z, p, z.shape[:lead] + (1,) * (z.dim() - lead), inplace)


def dropout2d(
    z: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    r"""Channel dropout: each channel of ``(B, C, H, W)`` is zeroed as a whole (the complex
    values) with probability ``p`` and the kept channels are scaled by :math:`1/(1-p)`; one mask
    draw per ``(b, c)`` shared by the real and imaginary parts (Tompson et al., "Efficient object
    localization using convolutional networks", CVPR 2015, for the channel mask; Trabelsi et al.,
    ICLR 2018, for the shared complex mask). Arguments as ``torch.nn.functional.dropout2d``,
    including torch's reading of a 3-D input as ``(B, C, L)`` (one draw per ``(b, c)``).
    Identity when ``training`` is False or ``p == 0``. Real tensors get the same channel mask.
    """
    return _channel_dropout(z, p, training, inplace, 2, "dropout2d")


def dropout3d(
    z: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    r"""Channel dropout of ``(B, C, D, H, W)`` (or unbatched ``(C, D, H, W)``); see
    :func:`dropout2d`."""
    return _channel_dropout(z, p, training, inplace, 3, "dropout3d")


def entry_dropout(data: torch.Tensor, p: float, interleaved: bool) -> torch.Tensor:
    """Dropout of whole complex entries (real and imaginary part together), scaled by 1/(1-p).

    ``data`` is complex, or real interleaved (``pack`` layout) when ``interleaved``.
    """
    if p == 0.0:
        return data
    if interleaved:
        pairs = data.unflatten(-1, (-1, 2))  # (..., F, 2)
        keep = torch.empty(pairs.shape[:-1] + (1,), dtype=data.dtype, device=data.device)
        return (pairs * keep.bernoulli_(1.0 - p).div_(1.0 - p)).flatten(-2)
    keep = torch.empty(data.shape, dtype=data.real.dtype, device=data.device)
    return data * keep.bernoulli_(1.0 - p).div_(1.0 - p)
