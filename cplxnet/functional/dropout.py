"""Complex dropout with one mask per complex entry."""

from __future__ import annotations

import torch

from .._utils import as_complex

__all__ = ["dropout"]


def dropout(z: torch.Tensor, p: float = 0.5, training: bool = True) -> torch.Tensor:
    r"""Drop whole complex entries: :math:`y = z \cdot m / (1 - p)` with :math:`m \sim
    \mathrm{Bernoulli}(1 - p)` drawn once per complex entry and shared by the real and imaginary
    parts (Trabelsi et al., "Deep Complex Networks", ICLR 2018), so surviving entries keep their
    phase. Identity when ``training`` is False or ``p == 0``; zeros when ``p == 1``.

    ``torch.nn.functional.dropout`` raises on complex tensors in torch 2.13, and splitting into two
    real dropouts would draw independent masks (changing the phase of half-dropped entries). Real
    tensors are accepted (ordinary dropout).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return z
    if not z.is_complex():
        return torch.nn.functional.dropout(z, p, training=True)
    if p == 1.0:
        return z * 0
    real = torch.view_as_real(z)  # (..., 2)
    # one draw per complex entry, broadcast over (re, im); bernoulli_ + scale in one buffer
    mask = torch.empty(z.shape + (1,), dtype=real.dtype, device=z.device)
    mask.bernoulli_(1.0 - p).div_(1.0 - p)
    return as_complex(real * mask)


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
