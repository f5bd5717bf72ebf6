"""Complex dropout with one mask per complex entry or per channel."""

from __future__ import annotations

import warnings

import torch

from .._utils import as_complex

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d"]


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
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return z
    if not z.is_complex():
        return torch.nn.functional.dropout(z, p, True, inplace)
    return _masked(z, p, z.shape, inplace)


def _masked(z: torch.Tensor, p: float, mask_shape: tuple, inplace: bool) -> torch.Tensor:
    """``z`` times one Bernoulli(1 - p) / (1 - p) draw per entry of ``mask_shape`` (a prefix of
    ``z``'s shape padded with ones, broadcast over the rest and over the real/imaginary parts)."""
    if inplace and z.is_conj():  # no real view of a lazy conjugate: write the result back
        return z.copy_(_masked(z, p, mask_shape, False))
    real = torch.view_as_real(z.resolve_conj()) if z.is_complex() else z.unsqueeze(-1)
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


def _deprecated_rank(z: torch.Tensor, nd: int, owner: str) -> None:
    """Torch's warning for a rank its channel dropout accepts only for backward compatibility."""
    warnings.warn(
        f"{owner}: Received a {z.dim()}-D input to {owner}, which is deprecated and will result "
        f"in an error in a future release. To retain the behavior and silence this warning, "
        f"please use dropout instead. Note that {owner} exists to provide channel-wise dropout "
        f"on inputs with {nd} spatial dimensions, a channel dimension, and an optional batch "
        f"dimension (i.e. {nd + 1}D or {nd + 2}D inputs).",
        stacklevel=3,
    )


def _channel_dropout(
    z: torch.Tensor, p: float, training: bool, inplace: bool, lead: int
) -> torch.Tensor:
    """One mask draw per entry of ``z.shape[:lead]`` (the batch and channel dims, or the channel
    dim alone), broadcast over the rest: torch's ``feature_dropout`` mask."""
    if not training or p == 0.0:
        return z
    if z.dim() < lead:  # torch unsqueezes an unbatched input, then needs 2 dims
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _masked(z, p, z.shape[:lead] + (1,) * (z.dim() - lead), inplace)


def _check_p(p: float, owner: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{owner}: probability p must be in [0, 1], got {p}")


def dropout1d(
    z: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    r"""Channel dropout of ``(B, C, L)`` (or unbatched ``(C, L)``): each channel zeroed as a
    whole with probability ``p``, the kept ones scaled by :math:`1/(1-p)`, one draw per
    ``(b, c)`` shared by the real and imaginary parts (Tompson et al., "Efficient object
    localization using convolutional networks", CVPR 2015, for the channel mask; Trabelsi et al.,
    "Deep Complex Networks", ICLR 2018, for the shared complex mask). Arguments, accepted ranks
    and errors as ``torch.nn.functional.dropout1d``. Identity when ``training`` is False or
    ``p == 0``. Real tensors get the same channel mask."""
    _check_p(p, "dropout1d")
    if z.dim() not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {z.dim()}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs)."
        )
    return _channel_dropout(z, p, training, inplace, z.dim() - 1)


def dropout2d(
    z: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    r"""Channel dropout of ``(B, C, H, W)``; see :func:`dropout1d`. Arguments and accepted
    ranks as ``torch.nn.functional.dropout2d``, which reads every input as batched: a 3-D input
    is ``(B, C, L)`` (one draw per ``(b, c)``), and other ranks (one draw per entry of the first
    two dims) are accepted with torch's deprecation warning.
    """
    _check_p(p, "dropout2d")
    if z.dim() not in (3, 4):
        _deprecated_rank(z, 2, "dropout2d")
    if z.dim() == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _channel_dropout(z, p, training, inplace, 2)


def dropout3d(
    z: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    r"""Channel dropout of ``(B, C, D, H, W)`` (or unbatched ``(C, D, H, W)``); see
    :func:`dropout1d`. Arguments and accepted ranks as ``torch.nn.functional.dropout3d``: an
    input of another rank than 4 or 5 is read as unbatched (one draw per entry of its first
    dim), with torch's deprecation warning."""
    _check_p(p, "dropout3d")
    if z.dim() not in (4, 5):
        _deprecated_rank(z, 3, "dropout3d")
    return _channel_dropout(z, p, training, inplace, 2 if z.dim() == 5 else 1)


def entry_dropout(data: torch.Tensor, p: float, interleaved: bool) -> torch.Tensor:
    """Dropout of whole complex entries (real and imaginary part together), scaled by 1/(1-p).

    ``data`` is complex, or real interleaved (``pack`` layout) when ``interleaved``.
    """
    if p == 0.0:
        return data
    if p == 1.0:  # torch's: the input times zero
        return data * 0
    if interleaved:
        pairs = data.unflatten(-1, (-1, 2))  # (..., F, 2)
        keep = torch.empty(pairs.shape[:-1] + (1,), dtype=data.dtype, device=data.device)
        return (pairs * keep.bernoulli_(1.0 - p).div_(1.0 - p)).flatten(-2)
    keep = torch.empty(data.shape, dtype=data.real.dtype, device=data.device)
    return data * keep.bernoulli_(1.0 - p).div_(1.0 - p)
