"""Complex 1-D and 2-D convolution layers."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.utils import _pair, _single

from .. import functional as CF
from .. import init as cinit
from .._utils import HasDtype, check_choice, check_dtype, factory_kwargs
from .dropin import TorchCounterpart

__all__ = ["Conv1d", "Conv2d"]

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(HasDtype, nn.Module):
    """Shared parameters, checks and forward of :class:`Conv1d` and :class:`Conv2d`."""

    _nd = 0
    _tuple = staticmethod(_single)
    _conv = staticmethod(CF.conv1d)  # the functional form of the subclass

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple,
        stride: int | tuple = 1,
        padding: int | tuple | str = 0,
        dilation: int | tuple = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{owner}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                f"divisible by groups ({groups})"
            )
        check_choice(padding_mode, _PAD_MODES, owner, "padding_mode")
        for name, value in (
            ("in_channels", in_channels),
            ("out_channels", out_channels),
            ("kernel_size", kernel_size),
            ("stride", stride),
            ("dilation", dilation),
        ):
            sizes = self._tuple(value)
            if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in sizes):
                raise ValueError(f"{owner}: {name} must be positive integers, got {value!r}")
        if not isinstance(padding, str) and any(p < 0 for p in self._tuple(padding)):
            raise ValueError(f"{owner}: padding must be non-negative, got {padding!r}")
        if isinstance(padding, str):
            check_choice(padding, ("same", "valid"), owner, "padding")
            if padding == "same" and any(s != 1 for s in self._tuple(stride)):
                raise ValueError(
                    f"{owner}: padding='same' is not supported for strided convolutions"
                )
            if padding_mode != "zeros" and padding == "same":
                raise ValueError(f"{owner}: padding='same' needs padding_mode='zeros'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = self._tuple(kernel_size)
        self.stride = self._tuple(stride)
        self.padding = padding if isinstance(padding, str) else self._tuple(padding)
        self.dilation = self._tuple(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        self._dtype = fk["dtype"]
        self.weight = nn.Parameter(
            torch.empty(out_channels, in_channels // groups, *self.kernel_size, **fk)
        )
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, **fk))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        cinit.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def _check_input(self, x: torch.Tensor) -> None:
        owner = type(self).__name__
        check_dtype(x, self.dtype, owner)
        nd = self._nd
        if x.dim() not in (nd + 1, nd + 2) or x.shape[-nd - 1] != self.in_channels:
            raise ValueError(
                f"{owner}: expected input (B, {self.in_channels}, {'L' if nd == 1 else 'H, W'}) "
                f"(or unbatched), got shape {tuple(x.shape)}"
            )
        pad = (0,) * nd if self.padding == "valid" else self.padding
        if pad != "same":
            for size, p, k, d in zip(x.shape[-nd:], pad, self.kernel_size, self.dilation):
                if size + 2 * p < d * (k - 1) + 1:
                    raise ValueError(
                        f"{owner}: input of shape {tuple(x.shape)} is shorter than the kernel: "
                        f"padded size {size + 2 * p} < dilated kernel size {d * (k - 1) + 1}; "
                        "pad the input or use a smaller kernel_size"
                    )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, C_in, L)`` (``Conv1d``) or ``(B, C_in, H, W)`` (``Conv2d``), or unbatched
        without ``B``, complex -> ``(B, C_out, L_out)`` / ``(B, C_out, H_out, W_out)`` complex, with
        torch's output sizes for the given padding, stride and dilation."""
        self._check_input(x)
        return self._conv(
            x,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.padding_mode,
        )

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != self._tuple(0):
            s += (
                f", padding={self.padding!r}"
                if isinstance(self.padding, str)
                else f", padding={self.padding}"
            )
        if self.dilation != self._tuple(1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s + f", dtype={self.dtype}"


class Conv1d(TorchCounterpart, _ConvNd, torch_class=nn.Conv1d):
    r"""Complex 1-D convolution ``(B, C_in, L) -> (B, C_out, L_out)`` (see
    :func:`cplxnet.functional.conv1d`); arguments as ``torch.nn.Conv1d``.

    Initialisation: complex Glorot-uniform (:func:`cplxnet.init.xavier_uniform_`) with torch's conv
    fans (``fan_in = C_in/groups * k``, ``fan_out = C_out * k``), so
    :math:`E|w|^2 = 2/(\text{fan\_in} + \text{fan\_out})`; bias zero.
    """

    _nd = 1
    _tuple = staticmethod(_single)
    _conv = staticmethod(CF.conv1d)


class Conv2d(TorchCounterpart, _ConvNd, torch_class=nn.Conv2d):
    r"""Complex 2-D convolution ``(B, C_in, H, W) -> (B, C_out, H_out, W_out)``; see
    :class:`Conv1d` (same initialisation and arguments as ``torch.nn.Conv2d``)."""

    _nd = 2
    _tuple = staticmethod(_pair)
    _conv = staticmethod(CF.conv2d)
