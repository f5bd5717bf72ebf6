"""Complex normalisation layers (see :mod:`cplxnet.functional.norm` for the math)."""

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
    check_sizes,
    factory_kwargs,
    real_dtype,
)
from .dropin import TorchCounterpart

__all__ = ["LayerNorm", "BatchNorm1d", "RMSNorm"]

_LN_MODES = ("split", "whiten")


def _check_trailing(x: torch.Tensor, shape: tuple, owner: str) -> None:
    if x.dim() < len(shape) or tuple(x.shape[-len(shape) :]) != shape:
        raise ValueError(
            f"{owner}: expected input whose trailing dims are normalized_shape={shape}, "
            f"got shape {tuple(x.shape)}"
        )


def _eye_2x2(shape: tuple, like: torch.Tensor, scale: float) -> torch.Tensor:
    eye = torch.eye(2, dtype=like.dtype, device=like.device) * scale
    return eye.reshape(2, 2, *([1] * len(shape))).expand(2, 2, *shape)


class LayerNorm(HasDtype, nn.Module):
    r"""Complex layer normalisation over the trailing ``normalized_shape`` dims.

    Args:
        normalized_shape: int or shape of the trailing dims.
        mode: ``"split"`` normalises the real and imaginary parts separately (zero mean, unit
            variance each), then ``y = w_0 x_r' + i w_1 x_i' + b``: real ``weight`` of shape
            ``(2, *normalized_shape)`` (one gain per part, init 1) and complex ``bias`` (init 0);
            this is the layer norm of the Complex Order code (Wang et al., ICLR 2020).
            ``"whiten"`` is Trabelsi et al.'s (ICLR 2018) 2x2 covariance whitening of each
            position's features, then a learnable real 2x2 matrix per feature (``weight`` of
            shape ``(2, 2, *normalized_shape)``, init :math:`I/\sqrt2` as Trabelsi, so the output
            has :math:`E|y|^2 = 1`) and complex ``bias``.
        eps: added to the variances (both diagonal entries in ``"whiten"``).
        elementwise_affine: learn ``weight`` (and ``bias`` unless ``bias=False``).
        bias: learn the complex shift.
        device, dtype: factory kwargs. A real ``dtype`` gives a plain real LayerNorm (``"split"``
            only; real ``weight``/``bias`` of ``normalized_shape``) for real twins of models.

    Shape: ``(*, *normalized_shape)`` -> same.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        mode: str = "split",
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
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
                        _eye_2x2(self.normalized_shape, self.weight, 1 / math.sqrt(2))
                    )
                else:
                    self.weight.fill_(1.0)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(*, *normalized_shape)`` complex -> the same shape, normalised over the trailing
        ``normalized_shape`` dims (see the class docstring for the two modes)."""
        owner = type(self).__name__
        check_dtype(x, self.dtype, owner)
        _check_trailing(x, self.normalized_shape, owner)
        return CF.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps, self.mode)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, mode={self.mode!r}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}, "
            f"dtype={self.dtype}"
        )


class BatchNorm1d(TorchCounterpart, HasDtype, nn.Module, torch_class=nn.BatchNorm1d):
    r"""Complex whitening batch normalisation (Trabelsi et al., "Deep Complex Networks", ICLR
    2018, Sec. 3.5) of a ``(B, C)`` or ``(B, C, L)`` input, per channel.

    Training: each channel is centred and whitened with its batch mean and 2x2 real/imaginary
    covariance; running statistics are updated as ``torch.nn.BatchNorm1d`` does (``momentum``;
    ``None`` for a cumulative average; unbiased covariance). Evaluation uses the running
    statistics (or batch statistics when ``track_running_stats=False``).

    Buffers: ``running_mean`` complex ``(C,)`` (init 0), ``running_cov`` real ``(2, 2, C)``
    (init :math:`I/2`, i.e. unit complex variance :math:`E|z|^2 = 1`, the analogue of torch's
    ``running_var = 1``: an untrained module in eval mode maps ``x`` to ``x``),
    ``num_batches_tracked``.
    Parameters (``affine=True``): real ``weight`` ``(2, 2, C)`` init :math:`I/\sqrt2` (Trabelsi),
    complex ``bias`` ``(C,)`` init 0.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        check_sizes(owner, num_features=num_features)
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self._dtype = fk["dtype"]
        rk = {"device": device, "dtype": real_dtype(self.dtype)}
        if affine:
            self.weight = nn.Parameter(torch.empty(2, 2, num_features, **rk))
            self.bias = nn.Parameter(torch.empty(num_features, **fk))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **fk))
            self.register_buffer("running_cov", torch.empty(2, 2, num_features, **rk))
            self.register_buffer(
                "num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device)
            )
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_cov", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_cov.copy_(_eye_2x2((self.num_features,), self.running_cov, 0.5))
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            with torch.no_grad():
                self.weight.copy_(_eye_2x2((self.num_features,), self.weight, 1 / math.sqrt(2)))
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, C)`` or ``(B, C, L)`` complex -> the same shape, whitened per channel ``C``
        with batch statistics in training mode and the running ones in eval mode."""
        owner = type(self).__name__
        check_dtype(x, self.dtype, owner)
        if x.dim() not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(
                f"{owner}: expected input (B, {self.num_features}) or (B, {self.num_features}, L), "
                f"got shape {tuple(x.shape)}"
            )
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or not self.track_running_stats
        return CF.batch_norm(
            x,
            self.running_mean,
            self.running_cov,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}, dtype={self.dtype}"
        )


class RMSNorm(HasDtype, nn.Module):
    r"""Complex RMS normalisation :math:`y = x / \sqrt{\mathrm{mean}|x|^2 + \epsilon} \cdot w`
    (Zhang & Sennrich, NeurIPS 2019) over the trailing ``normalized_shape`` dims.

    The gain ``weight`` is **real** ``(*normalized_shape)`` (init 1): it rescales moduli and keeps
    phases, so the layer commutes with a global phase rotation. ``eps=None`` uses
    ``torch.finfo(real dtype).eps`` as ``torch.nn.RMSNorm``. A real ``dtype`` gives the real
    RMSNorm.

    Shape: ``(*, *normalized_shape)`` -> same.
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
