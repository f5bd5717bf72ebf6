"""Complex dropout modules (per entry, per channel)."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class Dropout(nn.Module):
    r"""Drops whole complex entries with probability ``p`` (one Bernoulli mask shared by the real
    and imaginary parts, survivors scaled by :math:`1/(1-p)`, so phases are kept); identity in
    eval mode. Arguments ``(p=0.5, inplace=False)`` as ``torch.nn.Dropout``. See
    :func:`cplxnet.functional.dropout`. Real inputs get ordinary dropout.

    Shape: any -> same.

    Examples::

        >>> drop = Dropout(p=0.5)
        >>> z = torch.ones(8, dtype=torch.cfloat)
        >>> out = drop(z)  # each entry zeroed (real and imaginary part together) or scaled by 2
        >>> bool(((out == 0) | (out == 2)).all())
        True
        >>> drop.eval()(z).equal(z)
        True
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability p must be in [0, 1], got {p}")
        self.p = float(p)
        self.inplace = inplace

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex or real -> ``(*)``: in training mode each entry
        (real and imaginary part together) is zeroed with probability ``p`` and the rest scaled by
        ``1 / (1 - p)``; the identity in eval mode."""
        if not isinstance(input, torch.Tensor) or not (
            input.is_complex() or input.is_floating_point()
        ):
            got = input.dtype if isinstance(input, torch.Tensor) else type(input).__name__
            raise TypeError(
                f"{type(self).__name__}: input must be a complex or floating tensor, got {got}"
            )
        return CF.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout:
    _fn = staticmethod(CF.dropout2d)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C, *S)`` or ``(C, *S)``, complex or real -> same shape, whole channels
        zeroed in training mode (the identity in eval mode)."""
        if not isinstance(input, torch.Tensor) or not (
            input.is_complex() or input.is_floating_point()
        ):
            got = input.dtype if isinstance(input, torch.Tensor) else type(input).__name__
            raise TypeError(
                f"{type(self).__name__}: input must be a complex or floating tensor, got {got}"
            )
        return self._fn(input, self.p, self.training, self.inplace)


class Dropout1d(_ChannelDropout, nn.Dropout1d):
    r"""Zeroes whole channels of a complex ``(B, C, L)`` or ``(C, L)`` input (a 1-D signal:
    radar, speech, a conv feature map) with probability ``p``: one mask draw per ``(b, c)``,
    shared by the real and imaginary parts, kept channels scaled by :math:`1/(1-p)`. Arguments
    ``(p=0.5, inplace=False)`` as ``torch.nn.Dropout1d`` (a subclass of it). See
    :func:`cplxnet.functional.dropout1d`.

    Examples::

        >>> drop = Dropout1d(p=0.5)
        >>> out = drop(torch.ones(2, 4, 16, dtype=torch.cfloat))
        >>> bool(((out == 0) | (out == 2)).all() and (out == out[..., :1]).all())  # per channel
        True
    """

    _fn = staticmethod(CF.dropout1d)


class Dropout2d(_ChannelDropout, nn.Dropout2d):
    r"""Zeroes whole channels of a complex ``(B, C, H, W)`` input with probability ``p`` (one
    mask draw per ``(b, c)``, shared by the real and imaginary parts; kept channels scaled by
    :math:`1/(1-p)`); arguments ``(p=0.5, inplace=False)`` as ``torch.nn.Dropout2d`` (a
    subclass of it), a 3-D input read as ``(B, C, L)`` and other ranks accepted with a warning,
    as torch does. See :func:`cplxnet.functional.dropout2d`.

    Examples::

        >>> drop = Dropout2d(0.25)
        >>> drop(torch.randn(2, 8, 4, 4, dtype=torch.cfloat)).shape
        torch.Size([2, 8, 4, 4])
    """

    _fn = staticmethod(CF.dropout2d)


class Dropout3d(_ChannelDropout, nn.Dropout3d):
    r"""Channel dropout of complex volumes ``(B, C, D, H, W)`` or ``(C, D, H, W)``; see
    :class:`Dropout2d` (arguments as ``torch.nn.Dropout3d``).

    Examples::

        >>> drop = Dropout3d(p=0.5)
        >>> out = drop(torch.ones(2, 4, 3, 3, 3, dtype=torch.cfloat))  # whole channels zeroed
        >>> out.shape, bool(((out == 0) | (out == 2)).all())
        (torch.Size([2, 4, 3, 3, 3]), True)
    """

    _fn = staticmethod(CF.dropout3d)
