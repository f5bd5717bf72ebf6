"""Complex-to-real readout modules (see :mod:`cplxnet.functional.readout`)."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from .._utils import check_complex

__all__ = ["Magnitude", "RealPart", "ConcatRealImag", "READOUTS"]

#: Readout names of the model zoo: ``"magnitude"`` (:class:`Magnitude`), ``"concat"``
#: (:class:`ConcatRealImag`, twice the features), ``"real"`` (:class:`RealPart`).
READOUTS: tuple[str, ...] = ("magnitude", "concat", "real")


class Magnitude(nn.Module):
    r""":math:`|z|`: complex ``(*)`` -> real ``(*)``; gradient finite (0) at :math:`z = 0`.

    Examples::

        >>> readout = Magnitude()
        >>> readout(torch.tensor([3 + 4j, -1j]))
        tensor([5., 1.])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*)`` complex -> ``(*)`` real: ``|z|``."""
        check_complex(input, type(self).__name__)
        return CF.magnitude(input)


class RealPart(nn.Module):
    r""":math:`\mathrm{Re}\, z`: complex ``(*)`` -> real ``(*)``.

    Examples::

        >>> readout = RealPart()
        >>> readout(torch.tensor([3 + 4j, -1j]))
        tensor([3., -0.])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*)`` complex -> ``(*)`` real: ``Re z``."""
        check_complex(input, type(self).__name__)
        return CF.real_part(input)


class ConcatRealImag(nn.Module):
    r"""``[Re z, Im z]`` along ``dim`` (default -1): complex ``(*, D)`` -> real ``(*, 2D)``.

    Examples::

        >>> readout = ConcatRealImag()
        >>> readout(torch.tensor([[1 + 2j, 3 - 4j]]))
        tensor([[ 1.,  3.,  2., -4.]])
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` complex -> real ``[Re z, Im z]`` concatenated along ``dim`` (size doubled
        there), e.g. ``(B, D) -> (B, 2D)``."""
        check_complex(input, type(self).__name__)
        return CF.concat_real_imag(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
