"""Complex layer and RMS normalisation (see :mod:`cplxnet.functional.norm` for the math); the
whitening batch, instance and group norms are in :mod:`cplxnet.nn.whitening`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from .. import functional as CF
from .._utils import (
    HasDtype,
    as_shape,
    check_choice,
    check_dtype,
    factory_kwargs,
    real_dtype,
)
from ..functional.cov2x2 import identity_2x2

__all__ = ["LayerNorm", "RMSNorm"]

_LN_MODES = ("split", "whiten")


def _check_trailing(x: torch.Tensor, shape: tuple, owner: str) -> None:
    if x.dim() < len(shape) or tuple(x.shape[-len(shape) :]) != shape:
        raise ValueError(
            f"{owner}: expected input whose trailing dims are normalized_shape={shape}, "
            f"got shape {tuple(x.shape)}"
        )


class LayerNorm(HasDtype, nn.Module):
    r"""Complex layer normalisation over the trailing ``normalized_shape`` dims.

    Args:
        normalized_shape: int or shape of the trailing dims.
        eps: added to the variances (both diagonal entries in ``"whiten"``).
        elementwise_affine: learn ``weight`` (and ``bias`` unless ``bias=False``).
        bias: learn the complex shift.
        device, dtype: factory kwargs. A real ``dtype`` gives a plain real LayerNorm (``"split"``
            only; real ``weight``/``bias`` of ``normalized_shape``) for real twins of models.
        mode: (keyword-only) ``"split"`` normalises the real and imaginary parts separately (zero
            mean, unit variance each), then ``y = w_0 x_r' + i w_1 x_i' + b``: real ``weight`` of
            shape ``(2, *normalized_shape)`` (one gain per part, init 1) and complex ``bias`` (init
            0); this is the layer norm of the Complex Order code (Wang et al., ICLR 2020).
            ``"whiten"`` is Trabelsi et al.'s (ICLR 2018) 2x2 covariance whitening of each
            position's features, then a learnable real 2x2 matrix per feature (``weight`` of shape
            ``(2, 2, *normalized_shape)``, init :math:`I/\sqrt2` as Trabelsi, so the output has
            :math:`E|y|^2 = 1`) and complex ``bias``.

    Shape: ``(*, *normalized_shape)`` -> same.

    Examples::

        >>> norm = LayerNorm(16)  # mode='split': real and imaginary parts normalised apart
        >>> out = norm(torch.randn(2, 5, 16, dtype=torch.cfloat))
        >>> out.shape, LayerNorm(16, mode='whiten').weight.shape
        (torch.Size([2, 5, 16]), torch.Size([2, 2, 16]))
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        mode: str = "split",
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.normalized_shape = as_shape(normalized_shape, owner)
        self.mode = check_choice(mode, _LN_MODES, owner)
        self._dtype = fk["dtype"]
        if mode == "whiten" and not self.dtype.is_complex:
            raise ValueError(f"{owner}: mode='whiten' needs a complex dtype, got {self.dtype}")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        rk = {"device": device, "dtype": real_dtype(self.dtype)}
        shape = self.normalized_shape
        if not elementwise_affine:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        else:
            if not self.dtype.is_complex:
                wshape = shape
            else:
                wshape = (2, *shape) if mode == "split" else (2, 2, *shape)
            self.weight = nn.Parameter(torch.empty(wshape, **rk))
            if bias:
                self.bias = nn.Parameter(torch.empty(shape, **fk))
            else:
                self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            with torch.no_grad():
                if self.mode == "whiten":
                    self.weight.copy_(
                        identity_2x2(self.normalized_shape, self.weight, 1 / math.sqrt(2))
                    )
                else:
                    self.weight.fill_(1.0)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*, *normalized_shape)`` complex -> the same shape, normalised over the
        trailing ``normalized_shape`` dims (see the class docstring for the two modes)."""
        owner = type(self).__name__
        check_dtype(input, self.dtype, owner)
        _check_trailing(input, self.normalized_shape, owner)
        return CF.layer_norm(
            input, self.normalized_shape, self.weight, self.bias, self.eps, mode=self.mode
        )

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, mode={self.mode!r}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}, "
            f"dtype={self.dtype}"
        )


class RMSNorm(HasDtype, nn.Module):
    r"""Complex RMS normalisation :math:`y = x / \sqrt{\mathrm{mean}|x|^2 + \epsilon} \cdot w`
    (Zhang & Sennrich, NeurIPS 2019) over the trailing ``normalized_shape`` dims.

    The gain ``weight`` is **real** ``(*normalized_shape)`` (init 1): it rescales moduli and keeps
    phases, so the layer commutes with a global phase rotation. ``eps=None`` uses
    ``torch.finfo(real dtype).eps`` as ``torch.nn.RMSNorm``. A real ``dtype`` gives the real
    RMSNorm.

    Shape: ``(*, *normalized_shape)`` -> same.

    Examples::

        >>> norm = RMSNorm(16)
        >>> norm(torch.randn(2, 5, 16, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.normalized_shape = as_shape(normalized_shape, owner)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self._dtype = fk["dtype"]
        if elementwise_affine:
            self.weight = nn.Parameter(
                torch.empty(self.normalized_shape, device=device, dtype=real_dtype(self.dtype))
            )
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(*, *normalized_shape)`` complex -> the same shape, divided by the root mean
        square modulus over the trailing dims and scaled by the real gain (the phase is kept)."""
        owner = type(self).__name__
        check_dtype(x, self.dtype, owner)
        _check_trailing(x, self.normalized_shape, owner)
        return CF.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, dtype={self.dtype}"
        )
