"""k-space data consistency for unrolled MRI reconstruction (see
:mod:`cplxnet.functional.kspace` for the math)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .. import functional as CF
from .._utils import HasDtype, check_dtype, factory_kwargs, real_dtype
from ..functional.kspace import check_options

__all__ = ["DataConsistency"]


class DataConsistency(HasDtype, nn.Module):
    r"""k-space data consistency :math:`y = \sum_c \overline{S_c}\, \mathcal{F}^{-1}(\hat{k}_c +
    w\, m \odot (k_0 - \hat{k}_c))`, :math:`\hat{k}_c = \mathcal{F}(S_c x)`, the step of an
    unrolled MRI network that brings the image back to the measured samples (Schlemper et al.,
    IEEE TMI 2018; Sriram et al., MICCAI 2020).

    Args:
        weight: :math:`w`, or its initial value if ``learnable``: 1 (default) replaces the
            sampled entries by the measurements (noiseless), :math:`\lambda/(1+\lambda)` is the
            noisy form with :math:`\lambda`, a learned :math:`w` the variational network's soft
            step.
        learnable: learn :math:`w` (one real parameter, as the variational network's
            ``dc_weight``).
        dim, norm, centered, coil_dim: the transformed dims, torch's FFT normalisation, k-space
            with the zero frequency in the middle, and the coil dim (see
            :func:`cplxnet.functional.data_consistency`).
        device, dtype: factory kwargs; ``dtype`` is the complex dtype of the inputs, the
            learned weight is stored in the matching real dtype.

    Shape: ``input`` (the image) ``(B, 1, *S)`` with ``sensitivity`` ``(B, C, *S)``, or
    ``input`` of k-space's size without -> ``input``'s size; ``mask`` broadcasting to k-space.

    Examples::

        >>> dc = DataConsistency(learnable=True)
        >>> x = torch.randn(2, 1, 16, 16, dtype=torch.cfloat)
        >>> maps = torch.randn(2, 4, 16, 16, dtype=torch.cfloat)
        >>> k0 = torch.randn(2, 4, 16, 16, dtype=torch.cfloat)
        >>> mask = (torch.rand(16) < 0.25).view(1, 1, 1, 16)  # sampled lines
        >>> dc(x, k0 * mask, mask, maps).shape
        torch.Size([2, 1, 16, 16])
    """

    def __init__(
        self,
        weight: float = 1.0,
        *,
        learnable: bool = False,
        dim: int | Sequence[int] = (-2, -1),
        norm: str = "ortho",
        centered: bool = False,
        coil_dim: int = 1,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        super().__init__()
        if isinstance(weight, torch.Tensor):
            raise TypeError(f"{owner}: weight must be a real number, got a tensor")
        self.dim = check_options(weight, dim, norm, centered, coil_dim, owner)
        self._dtype = fk["dtype"]
        self.init = float(weight)
        self.learnable = bool(learnable)
        self.norm, self.centered, self.coil_dim = norm, centered, coil_dim
        if self.learnable:
            part = real_dtype(fk["dtype"])
            self.weight = nn.Parameter(torch.empty((), device=device, dtype=part))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.constant_(self.weight, self.init)

    def forward(
        self,
        input: torch.Tensor,
        kspace: torch.Tensor,
        mask: torch.Tensor,
        sensitivity: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The image ``input`` ``(B, 1, *S)`` (of ``kspace``'s size ``(B, C, *S)`` without
        ``sensitivity``) brought to the samples ``kspace`` where ``mask`` is 1 (class docstring).
        """
        check_dtype(input, self.dtype, type(self).__name__)
        return CF.data_consistency(
            input,
            kspace,
            mask,
            self.init if self.weight is None else self.weight,
            sensitivity=sensitivity,
            dim=self.dim,
            norm=self.norm,
            centered=self.centered,
            coil_dim=self.coil_dim,
        )

    def extra_repr(self) -> str:
        return (
            f"weight={self.init}, learnable={self.learnable}, dim={self.dim}, norm={self.norm!r}, "
            f"centered={self.centered}, coil_dim={self.coil_dim}, dtype={self.dtype}"
        )
