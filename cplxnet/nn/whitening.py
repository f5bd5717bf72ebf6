r"""Complex whitening normalisation over channels: ``BatchNorm1d/2d/3d``, ``InstanceNorm1d/2d/3d``
and ``GroupNorm`` (Trabelsi et al., "Deep Complex Networks", ICLR 2018, Sec. 3.5), one
implementation for every rank (:mod:`cplxnet.functional.whitening` has the math).

Each normalises to identity 2x2 covariance of (real, imaginary) per channel, group or instance,
then applies the per-channel affine map: real ``weight`` ``(2, 2, C)`` initialised to
:math:`I/\sqrt2` (Trabelsi) and complex ``bias`` ``(C,)`` initialised to 0. At initialisation the
output therefore has covariance :math:`I/2`: variance 0.5 per part, :math:`E|y|^2 = 1`, the
output scale of complextorch's and torchcvnn's complex batch norms. With ``affine=False`` the
output has identity covariance (variance 1 per part).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .. import functional as CF
from .._utils import HasDtype, check_dtype, check_sizes, factory_kwargs, real_dtype
from ..functional.cov2x2 import identity_2x2
from .dropin import TorchCounterpart

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "SyncBatchNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "GroupNorm",
]


def _affine_parameters(
    module: nn.Module, affine: bool, bias: bool, channels: int, fk: dict
) -> None:
    """Register ``weight`` real ``(2, 2, C)`` and ``bias`` complex ``(C,)`` (each or both None:
    ``affine=False``; ``bias=False`` drops the bias only, as torch)."""
    module.affine = affine
    rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
    weight = nn.Parameter(torch.empty(2, 2, channels, **rk)) if affine else None
    module.register_parameter("weight", weight)
    shift = nn.Parameter(torch.empty(channels, **fk)) if affine and bias else None
    module.register_parameter("bias", shift)


def _reset_affine(module: nn.Module, channels: int) -> None:
    if module.weight is not None:
        with torch.no_grad():
            module.weight.copy_(identity_2x2((channels,), module.weight, 1 / math.sqrt(2)))
    if module.bias is not None:
        nn.init.zeros_(module.bias)


def _affine_repr(module: nn.Module) -> str:
    """torch's ``affine=..., bias=...`` (``bias`` whether the module has one)."""
    return f"affine={module.affine}, bias={module.bias is not None}"


class _WhiteningNorm(HasDtype, nn.Module):
    """Shared state of the batch and instance norms: the affine parameters and the running
    statistics (``running_mean`` complex ``(C,)``, ``running_cov`` real ``(2, 2, C)``,
    ``num_batches_tracked``), with torch's ``_NormBase`` arguments."""

    _ranks: Sequence[int] = ()  # accepted input ranks (batched last)
    _layout: str = ""  # the input shape, for error messages

    def __init__(
        self,
        num_features: int,
        eps: float,
        momentum: float | None,
        affine: bool,
        track_running_stats: bool,
        device: torch.device | str | None,
        dtype: torch.dtype | None,
        bias: bool,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        check_sizes(owner, num_features=num_features)
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        self._dtype = fk["dtype"]
        _affine_parameters(self, affine, bias, num_features, fk)
        if track_running_stats:
            rk = {"device": device, "dtype": real_dtype(self.dtype)}
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
            self.running_cov.copy_(identity_2x2((self.num_features,), self.running_cov, 0.5))
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self, self.num_features)

    def _check_input(self, x: torch.Tensor) -> None:
        owner = type(self).__name__
        check_dtype(x, self.dtype, owner)
        if x.dim() not in self._ranks or x.shape[1] != self.num_features:
            raise ValueError(
                f"{owner}: expected input {self._layout.format(C=self.num_features)}, "
                f"got shape {tuple(x.shape)}"
            )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, {_affine_repr(self)}, "
            f"track_running_stats={self.track_running_stats}, dtype={self.dtype}"
        )


class _BatchNorm(_WhiteningNorm):
    r"""Complex whitening batch normalisation (Trabelsi et al., "Deep Complex Networks", ICLR
    2018, Sec. 3.5), per channel over the batch and the spatial dims.

    Training: each channel is centred and whitened with its batch mean and 2x2 real/imaginary
    covariance; running statistics are updated as ``torch.nn.BatchNorm*d`` does (``momentum``;
    ``None`` for a cumulative average; unbiased covariance). Evaluation uses the running
    statistics (or batch statistics when ``track_running_stats=False``).

    Buffers: ``running_mean`` complex ``(C,)`` (init 0), ``running_cov`` real ``(2, 2, C)``
    (init :math:`I/2`, i.e. unit complex variance :math:`E|z|^2 = 1`, the analogue of torch's
    ``running_var = 1``: an untrained module in eval mode maps ``x`` to ``x``),
    ``num_batches_tracked``.
    Parameters (``affine=True``): real ``weight`` ``(2, 2, C)`` init :math:`I/\sqrt2` (Trabelsi;
    a general 2x2 map with 4 free entries, where the paper's :math:`\gamma` is symmetric with 3:
    ``torch.nn.utils.parametrize`` can tie them), complex ``bias`` ``(C,)`` init 0; at init the
    training output has variance 0.5 per part
    (:math:`E|y|^2 = 1`), as complextorch's and torchcvnn's; 1 per part with ``affine=False``.
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
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias
        )

    def _momentum(self) -> float | torch.Tensor:
        """The running statistics' update factor of this forward (counting it in training):
        ``momentum``, or ``1 / num_batches_tracked`` for ``momentum=None`` (cumulative
        average, without reading the count on the host)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = self.num_batches_tracked.to(self.running_cov.dtype).reciprocal()
        return factor

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` complex ``(B, C, *)`` -> the same shape, whitened per channel ``C`` with batch
        statistics in training mode and the running ones in eval mode."""
        self._check_input(input)
        factor = self._momentum()
        use_batch = self.training or not self.track_running_stats
        return CF.batch_norm(
            input, self.running_mean, self.running_cov, self.weight, self.bias, use_batch, factor,
            self.eps,
        )  # fmt: skip


class BatchNorm1d(TorchCounterpart, _BatchNorm, torch_class=nn.BatchNorm1d):
    __doc__ = (
        _BatchNorm.__doc__
        + """
    Shape: ``(N, C)`` or ``(N, C, L)`` -> same.

    Examples::

        >>> bn = BatchNorm1d(16)
        >>> bn(torch.randn(8, 16, 50, dtype=torch.complex64)).shape
        torch.Size([8, 16, 50])
    """
    )
    _ranks = (2, 3)
    _layout = "(B, {C}) or (B, {C}, L)"


class BatchNorm2d(TorchCounterpart, _BatchNorm, torch_class=nn.BatchNorm2d):
    __doc__ = (
        _BatchNorm.__doc__
        + """
    Shape: ``(N, C, H, W)`` -> same.

    Examples::

        >>> bn = BatchNorm2d(16)
        >>> bn(torch.randn(4, 16, 32, 32, dtype=torch.complex64)).shape
        torch.Size([4, 16, 32, 32])
    """
    )
    _ranks = (4,)
    _layout = "(N, {C}, H, W)"


class BatchNorm3d(TorchCounterpart, _BatchNorm, torch_class=nn.BatchNorm3d):
    __doc__ = (
        _BatchNorm.__doc__
        + """
    Shape: ``(N, C, D, H, W)`` -> same.

    Examples::

        >>> bn = BatchNorm3d(8)
        >>> bn(torch.randn(2, 8, 4, 16, 16, dtype=torch.complex64)).shape
        torch.Size([2, 8, 4, 16, 16])
    """
    )
    _ranks = (5,)
    _layout = "(N, {C}, D, H, W)"


class SyncBatchNorm(TorchCounterpart, _BatchNorm, torch_class=nn.SyncBatchNorm):
    __doc__ = (
        _BatchNorm.__doc__
        + """
    In training, with ``torch.distributed`` initialised and more than one rank in
    ``process_group`` (default: the world), each channel's statistics are those of the batches
    of every rank together, gathered once per forward and combined exactly
    (:func:`cplxnet.functional.sync_batch_norm`), with the gradients of the global batch, as
    ``torch.nn.SyncBatchNorm``; otherwise it is :class:`BatchNorm2d` for any rank of input.
    :meth:`convert_sync_batchnorm` converts a model's complex and real batch norms.

    Shape: ``(N, C, *)`` -> same.

    Examples::

        >>> model = torch.nn.Sequential(BatchNorm2d(8), torch.nn.BatchNorm2d(3))
        >>> [type(m).__module__ for m in SyncBatchNorm.convert_sync_batchnorm(model)]
        ['cplxnet.nn.whitening', 'torch.nn.modules.batchnorm']
    """
    )
    _ranks = range(2, sys.maxsize)  # any batched input, as torch's SyncBatchNorm
    _layout = "(N, {C}, *)"

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self.process_group = process_group

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` complex ``(B, C, *)`` -> the same shape; statistics over every rank in
        training (see the class docstring)."""
        if not (
            self.training
            and dist.is_available()
            and dist.is_initialized()
            and dist.get_world_size(self.process_group) > 1
        ):
            return super().forward(input)
        self._check_input(input)
        return CF.sync_batch_norm(
            input, self.running_mean, self.running_cov, self.weight, self.bias, self._momentum(),
            self.eps, self.process_group,
        )  # fmt: skip

    @classmethod
    def convert_sync_batchnorm(cls, module: nn.Module, process_group: Any | None = None):
        """``module`` with every complex ``BatchNorm1d/2d/3d`` replaced by a
        :class:`SyncBatchNorm` holding its parameters, buffers and mode (and every real
        ``torch.nn`` batch norm by torch's ``SyncBatchNorm``, as
        ``torch.nn.SyncBatchNorm.convert_sync_batchnorm``), sharing their parameter and buffer
        tensors (an optimiser holding them keeps working); returns the converted module
        when ``module`` itself is one, else ``module`` changed in place."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            new = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, device="meta",
                      dtype=module.dtype, bias=module.bias is not None)  # fmt: skip
            for name, tensor in [*module.named_parameters(recurse=False),
                                 *module.named_buffers(recurse=False)]:  # fmt: skip
                setattr(new, name, tensor)  # the module's own tensors, as torch's conversion
            return new.train(module.training)
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            return nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
        for name, child in module.named_children():
            module.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return module


class _InstanceNorm(_WhiteningNorm):
    r"""Complex whitening instance normalisation: each sample's channel is centred and whitened
    with its own mean and 2x2 real/imaginary covariance over the spatial dims (Trabelsi et al.'s
    whitening, ICLR 2018, applied per instance as Ulyanov et al.'s instance norm, 2016).

    Arguments, defaults and behaviour are ``torch.nn.InstanceNorm*d``'s: ``affine=False`` and
    ``track_running_stats=False`` by default; with ``track_running_stats=True`` the running
    statistics (``running_mean`` complex ``(C,)``, ``running_cov`` real ``(2, 2, C)``, init 0 and
    :math:`I/2`) are updated in training with the per-instance statistics averaged over the
    batch (unbiased covariance, ``momentum``; ``momentum=None`` leaves them unchanged, as torch)
    and used in eval mode. Parameters (``affine=True``): real ``weight`` ``(2, 2, C)`` init
    :math:`I/\sqrt2`, complex ``bias`` ``(C,)`` init 0 (output variance 0.5 per part at init; 1
    without the affine map).
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` complex ``(B, C, *)`` or unbatched ``(C, *)`` -> the same shape, whitened per
        sample and channel (running statistics in eval mode when tracked)."""
        owner = type(self).__name__
        check_dtype(input, self.dtype, owner)
        if input.dim() not in self._ranks:
            raise ValueError(
                f"{owner}: expected input {self._layout.format(C=self.num_features)}, "
                f"got shape {tuple(input.shape)}"
            )
        unbatched = input.dim() == self._ranks[0]
        xb = input.unsqueeze(0) if unbatched else input
        if xb.shape[1] != self.num_features:
            if self.affine or self.track_running_stats:
                raise ValueError(
                    f"{owner}: expected input's size at dim={input.dim() - self._ranks[0]} to "
                    f"match num_features ({self.num_features}), got shape {tuple(input.shape)}"
                )
            warnings.warn(
                f"{owner}: input has {xb.shape[1]} channels but num_features is "
                f"{self.num_features}; they are unused since affine=False",
                stacklevel=2,
            )
        use_input_stats = self.training or not self.track_running_stats
        if use_input_stats and math.prod(xb.shape[2:]) == 1:
            raise ValueError(
                f"{owner}: expected more than 1 spatial element when training or without "
                f"running statistics, got input {tuple(input.shape)}"
            )
        y = CF.instance_norm(
            xb,
            self.running_mean,
            self.running_cov,
            self.weight,
            self.bias,
            use_input_stats,
            0.0 if self.momentum is None else self.momentum,
            self.eps,
        )
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(TorchCounterpart, _InstanceNorm, torch_class=nn.InstanceNorm1d):
    __doc__ = (
        _InstanceNorm.__doc__
        + """
    Shape: ``(N, C, L)`` or ``(C, L)`` -> same.

    Examples::

        >>> norm = InstanceNorm1d(16, affine=True)
        >>> norm(torch.randn(8, 16, 50, dtype=torch.complex64)).shape
        torch.Size([8, 16, 50])
    """
    )
    _ranks = (2, 3)
    _layout = "(N, {C}, L) or ({C}, L)"


class InstanceNorm2d(TorchCounterpart, _InstanceNorm, torch_class=nn.InstanceNorm2d):
    __doc__ = (
        _InstanceNorm.__doc__
        + """
    Shape: ``(N, C, H, W)`` or ``(C, H, W)`` -> same.

    Examples::

        >>> norm = InstanceNorm2d(16)
        >>> norm(torch.randn(4, 16, 32, 32, dtype=torch.complex64)).shape
        torch.Size([4, 16, 32, 32])
    """
    )
    _ranks = (3, 4)
    _layout = "(N, {C}, H, W) or ({C}, H, W)"


class InstanceNorm3d(TorchCounterpart, _InstanceNorm, torch_class=nn.InstanceNorm3d):
    __doc__ = (
        _InstanceNorm.__doc__
        + """
    Shape: ``(N, C, D, H, W)`` or ``(C, D, H, W)`` -> same.

    Examples::

        >>> norm = InstanceNorm3d(8)
        >>> norm(torch.randn(2, 8, 4, 16, 16, dtype=torch.complex64)).shape
        torch.Size([2, 8, 4, 16, 16])
    """
    )
    _ranks = (4, 5)
    _layout = "(N, {C}, D, H, W) or ({C}, D, H, W)"


class GroupNorm(TorchCounterpart, HasDtype, nn.Module, torch_class=nn.GroupNorm):
    r"""Complex whitening group normalisation: the channels of each sample are split into
    ``num_groups`` groups, each centred and whitened with its mean and 2x2 real/imaginary
    covariance over its channels and spatial dims (Trabelsi et al.'s whitening, ICLR 2018,
    applied per group as Wu & He's group norm, ECCV 2018). No running statistics: training and
    eval mode compute the same.

    Arguments and defaults are ``torch.nn.GroupNorm``'s. Parameters (``affine=True``), per
    channel: real ``weight`` ``(2, 2, C)`` init :math:`I/\sqrt2` (Trabelsi) and complex
    ``bias`` ``(C,)`` init 0; at init the output has variance 0.5 per part
    (:math:`E|y|^2 = 1`), 1 per part with ``affine=False``.

    Shape: ``(N, C, *)`` -> same.

    Examples::

        >>> gn = GroupNorm(4, 16)
        >>> gn(torch.randn(2, 16, 32, 32, dtype=torch.complex64)).shape
        torch.Size([2, 16, 32, 32])
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        bias: bool = True,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        check_sizes(owner, num_groups=num_groups, num_channels=num_channels)
        if num_channels % num_groups:
            raise ValueError(
                f"{owner}: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        super().__init__()
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self._dtype = fk["dtype"]
        _affine_parameters(self, affine, bias, num_channels, fk)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self, self.num_channels)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` complex ``(B, C, *)`` -> the same shape, whitened per sample and group."""
        owner = type(self).__name__
        check_dtype(input, self.dtype, owner)
        if input.dim() < 2 or input.shape[1] != self.num_channels:
            raise ValueError(
                f"{owner}: expected input (N, {self.num_channels}, *), "
                f"got shape {tuple(input.shape)}"
            )
        return CF.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, {_affine_repr(self)}, "
            f"dtype={self.dtype}"
        )
