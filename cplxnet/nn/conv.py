"""Complex convolution and transposed convolution layers in 1, 2 and 3 dimensions."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.utils import _pair, _single, _triple

from .. import functional as CF
from .. import init as cinit
from .._utils import HasDtype, check_choice, check_dtype, factory_kwargs
from .dropin import TorchCounterpart

__all__ = [
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
]

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")
_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


class _ConvNd(HasDtype, nn.Module):
    """Shared parameters, checks and ``extra_repr`` of every complex (transposed) convolution,
    as torch's ``_ConvNd``: a subclass sets the rank ``_nd``, the tuple helper and its functional
    form, and the transposed ones pass ``transposed=True`` and ``output_padding``."""

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
        *,
        transposed: bool = False,
        output_padding: int | tuple = 0,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{owner}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                f"divisible by groups ({groups})"
            )
        check_choice(padding_mode, ("zeros",) if transposed else _PAD_MODES, owner, "padding_mode")
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
        if isinstance(padding, str) and transposed:
            raise ValueError(f"{owner}: padding must be integers, got {padding!r}")
        if not isinstance(padding, str) and any(p < 0 for p in self._tuple(padding)):
            raise ValueError(f"{owner}: padding must be non-negative, got {padding!r}")
        if isinstance(padding, str):
            check_choice(padding, ("same", "valid"), owner, "padding")
            if padding == "same" and any(s != 1 for s in self._tuple(stride)):
                raise ValueError(
                    f"{owner}: padding='same' is not supported for strided convolutions"
                )
        op = self._tuple(output_padding)
        if any(p < 0 for p in op):  # its upper bound is checked where it is used (as torch)
            raise ValueError(
                f"{owner}: output_padding must be non-negative, got {output_padding!r}"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = self._tuple(kernel_size)
        self.stride = self._tuple(stride)
        self.padding = padding if isinstance(padding, str) else self._tuple(padding)
        self.dilation = self._tuple(dilation)
        self.transposed = transposed
        self.output_padding = op
        self.groups = groups
        self.padding_mode = padding_mode
        self._dtype = fk["dtype"]
        shape = (
            (in_channels, out_channels // groups)
            if transposed
            else (out_channels, in_channels // groups)
        )
        self.weight = nn.Parameter(torch.empty(*shape, *self.kernel_size, **fk))
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
                f"{owner}: expected input (B, {self.in_channels}, {_SPATIAL[nd]}) "
                f"(or unbatched), got shape {tuple(x.shape)}"
            )
        if self.transposed:
            return
        pad = (0,) * nd if self.padding == "valid" else self.padding
        if pad != "same":
            for size, p, k, d in zip(x.shape[-nd:], pad, self.kernel_size, self.dilation):
                if size + 2 * p < d * (k - 1) + 1:
                    raise ValueError(
                        f"{owner}: input of shape {tuple(x.shape)} is shorter than the kernel: "
                        f"padded size {size + 2 * p} < dilated kernel size {d * (k - 1) + 1}; "
                        "pad the input or use a smaller kernel_size"
                    )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C_in, *S)`` complex with ``S`` = ``(L,)``, ``(H, W)`` or ``(D, H, W)``
        (or unbatched without ``B``) -> ``(B, C_out, *S_out)`` complex, with torch's output
        sizes for the given padding, stride and dilation."""
        self._check_input(input)
        return self._conv(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            padding_mode=self.padding_mode,
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
        if self.output_padding != self._tuple(0):
            s += f", output_padding={self.output_padding}"
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

    Examples::

        >>> conv = Conv1d(4, 8, 3, padding=1)
        >>> conv(torch.randn(2, 4, 16, dtype=torch.cfloat)).shape
        torch.Size([2, 8, 16])
    """

    _nd = 1
    _tuple = staticmethod(_single)
    _conv = staticmethod(CF.conv1d)


class Conv2d(TorchCounterpart, _ConvNd, torch_class=nn.Conv2d):
    r"""Complex 2-D convolution ``(B, C_in, H, W) -> (B, C_out, H_out, W_out)``; see
    :class:`Conv1d` (same initialisation and arguments as ``torch.nn.Conv2d``).

    Examples::

        >>> conv = Conv2d(2, 4, 3, stride=2, padding=1)
        >>> conv(torch.randn(1, 2, 16, 16, dtype=torch.cfloat)).shape
        torch.Size([1, 4, 8, 8])
    """

    _nd = 2
    _tuple = staticmethod(_pair)
    _conv = staticmethod(CF.conv2d)


class Conv3d(TorchCounterpart, _ConvNd, torch_class=nn.Conv3d):
    r"""Complex 3-D convolution ``(B, C_in, D, H, W) -> (B, C_out, D_out, H_out, W_out)`` for
    volumes (e.g. MRI); see :class:`Conv1d` (same initialisation and arguments as
    ``torch.nn.Conv3d``). Computed as one real ``conv3d`` with twice the channels and the block
    kernel on the channels-last real view (:mod:`cplxnet.functional.conv`), the scheme of every
    rank; torch's native complex ``conv3d`` gives the same values and measured about as fast
    (ours 1.05x its time on a contiguous input and 0.94x on a channels-last one,
    ``benchmarks/RESULTS.md``).

    Examples::

        >>> conv = Conv3d(2, 4, 3, padding=1)
        >>> conv(torch.randn(1, 2, 8, 8, 8, dtype=torch.cfloat)).shape
        torch.Size([1, 4, 8, 8, 8])
    """

    _nd = 3
    _tuple = staticmethod(_triple)
    _conv = staticmethod(CF.conv3d)


class _ConvTransposeNd(_ConvNd):
    r"""Complex transposed convolution (torch's ``_ConvTransposeNd``): torch's arguments and
    order, ``weight`` ``(C_in, C_out/groups, *k)``, ``forward(input, output_size=None)``.

    Initialisation: complex Glorot-uniform with torch's fans of that weight
    (``fan_in = C_out/groups * prod(k)``, ``fan_out = C_in * prod(k)``); bias zero. Only
    ``padding_mode='zeros'``, as torch.
    """

    _conv_t = staticmethod(CF.conv_transpose1d)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple,
        stride: int | tuple = 1,
        padding: int | tuple = 0,
        output_padding: int | tuple = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple = 1,
        padding_mode: str = "zeros",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
            transposed=True,
            output_padding=output_padding,
        )

    def _output_padding(self, x: torch.Tensor, output_size: list[int] | None) -> tuple:
        """The ``output_padding`` giving ``output_size`` (spatial sizes, or with the batch and
        channel sizes as torch takes them), checked against the reachable range."""
        owner, nd = type(self).__name__, self._nd
        if output_size is None:  # an output_padding too large for the default size (as torch)
            if any(p >= s and p >= d for p, s, d in
                   zip(self.output_padding, self.stride, self.dilation)):  # fmt: skip
                raise ValueError(
                    f"{owner}: output_padding {self.output_padding} must be smaller than either "
                    f"stride {self.stride} or dilation {self.dilation}; give output_size, or a "
                    "smaller output_padding"
                )
            return self.output_padding
        size = list(output_size)
        lead = x.dim() - nd
        if len(size) == lead + nd:
            size = size[lead:]
        if len(size) != nd:
            raise ValueError(
                f"{owner}: for {x.dim()}-D input, output_size must have {nd} or {lead + nd} "
                f"elements, got {tuple(output_size)}"
            )
        lo = [
            (n - 1) * s - 2 * p + d * (k - 1) + 1
            for n, s, p, d, k in zip(
                x.shape[-nd:], self.stride, self.padding, self.dilation, self.kernel_size
            )
        ]
        hi = [m + s - 1 for m, s in zip(lo, self.stride)]
        if any(not m <= o <= h for m, o, h in zip(lo, size, hi)):
            raise ValueError(
                f"{owner}: requested an output size of {tuple(size)}, but valid sizes range "
                f"from {tuple(lo)} to {tuple(hi)} (for an input of {tuple(x.shape[-nd:])})"
            )
        return tuple(o - m for o, m in zip(size, lo))

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        r"""``input`` ``(B, C_in, *S)`` complex (or unbatched) -> ``(B, C_out, *S_out)`` with
        :math:`S_{out} = (S - 1)\,\text{stride} - 2\,\text{padding} + \text{dilation}\,(k - 1) +
        \text{output\_padding} + 1`, or exactly ``output_size`` (which picks the
        ``output_padding``), as ``torch.nn.ConvTranspose{1,2,3}d``."""
        self._check_input(input)
        return self._conv_t(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(TorchCounterpart, _ConvTransposeNd, torch_class=nn.ConvTranspose1d):
    r"""Complex 1-D transposed convolution ``(B, C_in, L) -> (B, C_out, L_out)``, arguments as
    ``torch.nn.ConvTranspose1d``; see :func:`cplxnet.functional.conv_transpose1d` for the math.

    Computed as one real transposed convolution with twice the channels and the real block
    kernel ``[[A, B], [-B, A]]`` of :math:`W = A + iB`, or, with ``stride`` equal to the kernel
    size (no padding, output padding or dilation, one group) on a contiguous input, as
    one complex GEMM per sample (every rank); torch's native complex ``conv_transpose1d`` gives
    the same values (the test reference) and measured slower (``benchmarks/RESULTS.md``).

    Examples::

        >>> up = ConvTranspose1d(4, 2, 4, stride=2, padding=1)
        >>> up(torch.randn(3, 4, 16, dtype=torch.cfloat)).shape
        torch.Size([3, 2, 32])
    """

    _nd = 1
    _tuple = staticmethod(_single)
    _conv_t = staticmethod(CF.conv_transpose1d)


class ConvTranspose2d(TorchCounterpart, _ConvTransposeNd, torch_class=nn.ConvTranspose2d):
    r"""Complex 2-D transposed convolution ``(B, C_in, H, W) -> (B, C_out, H_out, W_out)`` (the
    up-sampling path of a complex U-Net); see :class:`ConvTranspose1d`.

    Examples::

        >>> up = ConvTranspose2d(8, 4, 2, stride=2)
        >>> x = torch.randn(1, 8, 16, 16, dtype=torch.cfloat)
        >>> up(x).shape, up(x, output_size=(33, 33)).shape
        (torch.Size([1, 4, 32, 32]), torch.Size([1, 4, 33, 33]))
    """

    _nd = 2
    _tuple = staticmethod(_pair)
    _conv_t = staticmethod(CF.conv_transpose2d)


class ConvTranspose3d(TorchCounterpart, _ConvTransposeNd, torch_class=nn.ConvTranspose3d):
    r"""Complex 3-D transposed convolution ``(B, C_in, D, H, W) -> (B, C_out, D', H', W')``; see
    :class:`ConvTranspose1d`.

    Examples::

        >>> up = ConvTranspose3d(4, 2, 2, stride=2)
        >>> up(torch.randn(1, 4, 4, 4, 4, dtype=torch.cfloat)).shape
        torch.Size([1, 2, 8, 8, 8])
    """

    _nd = 3
    _tuple = staticmethod(_triple)
    _conv_t = staticmethod(CF.conv_transpose3d)
