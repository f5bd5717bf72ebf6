"""Sequence pooling modules honouring a padding mask (True = padding), and pooling over 1-D, 2-D
and 3-D grids by modulus (max) or by parts (average)."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from .._utils import check_mask
from ..functional.grid_views import check_grid

__all__ = ["MeanPool", "MaxMagnitudePool"]


def _check(x: object, mask: torch.Tensor | None, dim: int, owner: str) -> None:
    if not isinstance(x, torch.Tensor) or not (x.is_complex() or x.is_floating_point()):
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{owner}: input must be a complex or floating tensor, got {got}")
    if x.dim() < 2:
        raise ValueError(
            f"{owner}: expected an input (B, L, ...) with at least 2 dims, got {tuple(x.shape)}"
        )
    d = dim % x.dim()
    if d == 0:
        raise ValueError(f"{owner}: dim={dim} is the batch dim; pool over a sequence dim instead")
    check_mask(mask, (x.shape[0], x.shape[d]), owner, "padding_mask (True = padding)")


class MeanPool(nn.Module):
    r"""Mean over the sequence dim ``dim`` (default 1, ``(B, L, D) -> (B, D)``) counting only
    non-padded positions; ``padding_mask`` ``(B, L)`` bool, True = padding (see
    :func:`cplxnet.functional.masked_mean`). Complex or real input.

    Examples::

        >>> pool = MeanPool(dim=1)  # (B, L, D) -> (B, D)
        >>> pool(torch.tensor([[[1 + 1j], [3 - 1j]]]))
        tensor([[2.+0.j]])
    """

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(
        self, input: torch.Tensor, padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``input`` ``(B, L, ...)`` complex or real, ``padding_mask`` ``(B, L)`` bool, **True =
        padding** (``None``: no padding) -> ``input`` with the ``dim`` axis averaged over the
        non-padded positions, e.g. ``(B, L, D) -> (B, D)``."""
        _check(input, padding_mask, self.dim, type(self).__name__)
        return CF.masked_mean(input, padding_mask, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class MaxMagnitudePool(nn.Module):
    r"""Per feature, the entry with the largest modulus over the sequence dim ``dim`` among
    non-padded positions (default ``dim=1``; ``dim=-1`` is max-over-time for a ``(B, C, L)`` conv
    output as in Kim's CNN). The gradient flows to the selected entries only (see
    :func:`cplxnet.functional.masked_max_magnitude`). Complex or real input.

    Examples::

        >>> pool = MaxMagnitudePool(dim=1)  # (B, L, D) -> (B, D)
        >>> pool(torch.tensor([[[1 + 0j], [0 - 3j], [2 + 2j]]]))
        tensor([[0.-3.j]])
    """

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(
        self, input: torch.Tensor, padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``input`` ``(B, L, ...)`` complex or real, ``padding_mask`` ``(B, L)`` bool, **True =
        padding** (``None``: no padding) -> along ``dim``, the entry of largest modulus among the
        non-padded positions, e.g. ``(B, L, D) -> (B, D)``."""
        _check(input, padding_mask, self.dim, type(self).__name__)
        return CF.masked_max_magnitude(input, padding_mask, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


# ---- pooling over grids ------------------------------------------------------------------------
# Each class subclasses torch's module of the same name: torch's arguments, order, defaults,
# attributes and repr, with a forward that pools complex inputs (cplxnet.functional).
__all__ += [
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
]


class _GridPool:
    """Mixin: the rank ``_nd`` and the functional form ``_fn`` of a grid pool."""

    _nd = 1
    _fn = staticmethod(CF.max_pool1d)

    def _check(self, x: torch.Tensor) -> None:
        check_grid(x, type(self).__name__, self._nd)


class _MaxPool(_GridPool):
    def forward(self, input: torch.Tensor):
        """``input`` ``(B, C, *S)`` (or unbatched) complex -> the entry of largest modulus in each
        window, ``(B, C, *S_out)`` as torch's; with ``return_indices`` also torch's indices."""
        self._check(input)
        return self._fn(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class MaxPool1d(_MaxPool, nn.MaxPool1d):
    r"""Max pooling by modulus over ``(B, C, L)``: the complex entry of largest :math:`|z|` in
    each window (phase kept), arguments, output sizes and indices as ``torch.nn.MaxPool1d``.

    Ties go to the first position of the window in row-major scan order (torch's real max pool
    on :math:`|z|`); a NaN is selected. The gradient flows to the selected entries only. Real
    inputs are pooled by :math:`|x|` (sign kept). See :func:`cplxnet.functional.max_pool1d`.

    Examples::

        >>> pool = MaxPool1d(2, return_indices=True)
        >>> y, idx = pool(torch.randn(3, 4, 8, dtype=torch.cfloat))
        >>> y.shape, idx.shape
        (torch.Size([3, 4, 4]), torch.Size([3, 4, 4]))
    """

    _nd = 1
    _fn = staticmethod(CF.max_pool1d)


class MaxPool2d(_MaxPool, nn.MaxPool2d):
    r"""Max pooling by modulus over ``(B, C, H, W)``; see :class:`MaxPool1d` (arguments as
    ``torch.nn.MaxPool2d``).

    Examples::

        >>> MaxPool2d(2)(torch.randn(1, 4, 8, 8, dtype=torch.cfloat)).shape
        torch.Size([1, 4, 4, 4])
    """

    _nd = 2
    _fn = staticmethod(CF.max_pool2d)


class MaxPool3d(_MaxPool, nn.MaxPool3d):
    r"""Max pooling by modulus over ``(B, C, D, H, W)``; see :class:`MaxPool1d` (arguments as
    ``torch.nn.MaxPool3d``).

    Examples::

        >>> pool = MaxPool3d(2)
        >>> pool(torch.randn(1, 2, 4, 4, 4, dtype=torch.cfloat)).shape
        torch.Size([1, 2, 2, 2, 2])
    """

    _nd = 3
    _fn = staticmethod(CF.max_pool3d)


class _MaxUnpool(_GridPool):
    def forward(
        self, input: torch.Tensor, indices: torch.Tensor, output_size: list[int] | None = None
    ) -> torch.Tensor:
        """``input`` ``(B, C, *S)`` (or unbatched) and ``indices`` of the same shape, as returned by
        the max pool (``return_indices=True``) -> ``(B, C, *S_out)``: ``input``'s entries at
        ``indices`` in a zero grid of torch's unpooled size (or ``output_size``)."""
        self._check(input)
        return self._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpool, nn.MaxUnpool1d):
    r"""Partial inverse of :class:`MaxPool1d` for complex inputs (the selected entries back at
    their positions, zeros elsewhere); arguments and ``forward(input, indices, output_size)`` as
    ``torch.nn.MaxUnpool1d``. See :func:`cplxnet.functional.max_unpool1d`.

    Examples::

        >>> pool, unpool = MaxPool1d(2, return_indices=True), MaxUnpool1d(2)
        >>> x = torch.randn(1, 2, 8, dtype=torch.cfloat)
        >>> unpool(*pool(x)).shape
        torch.Size([1, 2, 8])
    """

    _nd = 1
    _fn = staticmethod(CF.max_unpool1d)


class MaxUnpool2d(_MaxUnpool, nn.MaxUnpool2d):
    r"""Partial inverse of :class:`MaxPool2d`; see :class:`MaxUnpool1d`.

    Examples::

        >>> pool, unpool = MaxPool2d(2, return_indices=True), MaxUnpool2d(2)
        >>> out, idx = pool(torch.randn(1, 3, 4, 4, dtype=torch.cfloat))
        >>> unpool(out, idx).shape
        torch.Size([1, 3, 4, 4])
    """

    _nd = 2
    _fn = staticmethod(CF.max_unpool2d)


class MaxUnpool3d(_MaxUnpool, nn.MaxUnpool3d):
    r"""Partial inverse of :class:`MaxPool3d`; see :class:`MaxUnpool1d`.

    Examples::

        >>> pool, unpool = MaxPool3d(2, return_indices=True), MaxUnpool3d(2)
        >>> out, idx = pool(torch.randn(1, 3, 4, 4, 4, dtype=torch.cfloat))
        >>> unpool(out, idx).shape
        torch.Size([1, 3, 4, 4, 4])
    """

    _nd = 3
    _fn = staticmethod(CF.max_unpool3d)


class _AvgPool(_GridPool):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C, *S)`` (or unbatched) complex or real -> the window means."""
        self._check(input)
        args = (self.kernel_size, self.stride, self.padding, self.ceil_mode,
                self.count_include_pad)  # fmt: skip
        if self._nd > 1:  # torch's AvgPool1d has no divisor_override
            args += (self.divisor_override,)
        return self._fn(input, *args)


class AvgPool1d(_AvgPool, nn.AvgPool1d):
    r"""Average pooling over ``(B, C, L)``: torch's ``AvgPool1d`` (same arguments) of the real
    and imaginary parts (:func:`cplxnet.functional.avg_pool1d`: non-overlapping windows summed
    on the interleaved layout, other windows in one torch call on a real view).

    Examples::

        >>> AvgPool1d(3, stride=2)(torch.randn(2, 4, 9, dtype=torch.cfloat)).shape
        torch.Size([2, 4, 4])
    """

    _fn = staticmethod(CF.avg_pool1d)


class AvgPool2d(_AvgPool, nn.AvgPool2d):
    r"""Average pooling over ``(B, C, H, W)``; see :class:`AvgPool1d` (arguments, including
    ``divisor_override``, as ``torch.nn.AvgPool2d``).

    Examples::

        >>> pool = AvgPool2d(2)
        >>> pool(torch.randn(2, 3, 8, 8, dtype=torch.cfloat)).shape
        torch.Size([2, 3, 4, 4])
    """

    _nd = 2
    _fn = staticmethod(CF.avg_pool2d)


class AvgPool3d(_AvgPool, nn.AvgPool3d):
    r"""Average pooling over ``(B, C, D, H, W)``; see :class:`AvgPool2d`.

    Examples::

        >>> pool = AvgPool3d(2, stride=1)
        >>> pool(torch.randn(1, 3, 4, 4, 4, dtype=torch.cfloat)).shape
        torch.Size([1, 3, 3, 3, 3])
    """

    _nd = 3
    _fn = staticmethod(CF.avg_pool3d)


class _AdaptiveMax(_GridPool):
    def forward(self, input: torch.Tensor):
        """``input`` ``(B, C, *S)`` (or unbatched) -> ``(B, C, *output_size)``: the entry of largest
        modulus in each of torch's adaptive windows (with torch's indices if asked)."""
        self._check(input)
        return self._fn(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMax, nn.AdaptiveMaxPool1d):
    r"""Adaptive max pooling by modulus over ``(B, C, L)`` to ``output_size`` (ties and indices
    as :class:`MaxPool1d`); arguments as ``torch.nn.AdaptiveMaxPool1d``. See
    :func:`cplxnet.functional.adaptive_max_pool1d`.

    Examples::

        >>> AdaptiveMaxPool1d(1)(torch.randn(2, 4, 9, dtype=torch.cfloat)).shape
        torch.Size([2, 4, 1])
    """

    _nd = 1
    _fn = staticmethod(CF.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMax, nn.AdaptiveMaxPool2d):
    r"""Adaptive max pooling by modulus over ``(B, C, H, W)``; see :class:`AdaptiveMaxPool1d`.

    Examples::

        >>> pool = AdaptiveMaxPool2d(4, return_indices=True)
        >>> out, idx = pool(torch.randn(2, 3, 9, 7, dtype=torch.cfloat))
        >>> out.shape, idx.shape
        (torch.Size([2, 3, 4, 4]), torch.Size([2, 3, 4, 4]))
    """

    _nd = 2
    _fn = staticmethod(CF.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMax, nn.AdaptiveMaxPool3d):
    r"""Adaptive max pooling by modulus over ``(B, C, D, H, W)``; see
    :class:`AdaptiveMaxPool1d`.

    Examples::

        >>> pool = AdaptiveMaxPool3d((1, 2, 2))
        >>> pool(torch.randn(1, 3, 4, 6, 6, dtype=torch.cfloat)).shape
        torch.Size([1, 3, 1, 2, 2])
    """

    _nd = 3
    _fn = staticmethod(CF.adaptive_max_pool3d)


class _AdaptiveAvg(_GridPool):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C, *S)`` (or unbatched) -> ``(B, C, *output_size)`` window means."""
        self._check(input)
        return self._fn(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvg, nn.AdaptiveAvgPool1d):
    r"""Adaptive average pooling over ``(B, C, L)``: torch's ``AdaptiveAvgPool1d`` of the real
    and imaginary parts (:func:`cplxnet.functional.adaptive_avg_pool1d`).

    Examples::

        >>> AdaptiveAvgPool1d(1)(torch.randn(2, 4, 9, dtype=torch.cfloat)).shape
        torch.Size([2, 4, 1])
    """

    _nd = 1
    _fn = staticmethod(CF.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvg, nn.AdaptiveAvgPool2d):
    r"""Adaptive average pooling over ``(B, C, H, W)``; see :class:`AdaptiveAvgPool1d`.

    Examples::

        >>> pool = AdaptiveAvgPool2d((4, 4))
        >>> pool(torch.randn(2, 3, 9, 7, dtype=torch.cfloat)).shape
        torch.Size([2, 3, 4, 4])
    """

    _nd = 2
    _fn = staticmethod(CF.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvg, nn.AdaptiveAvgPool3d):
    r"""Adaptive average pooling over ``(B, C, D, H, W)``; see :class:`AdaptiveAvgPool1d`.

    Examples::

        >>> pool = AdaptiveAvgPool3d(2)
        >>> pool(torch.randn(1, 3, 5, 6, 7, dtype=torch.cfloat)).shape
        torch.Size([1, 3, 2, 2, 2])
    """

    _nd = 3
    _fn = staticmethod(CF.adaptive_avg_pool3d)


# ---- spectral pooling --------------------------------------------------------------------------
__all__ += ["SpectralPool1d", "SpectralPool2d", "SpectralPool3d"]


class _SpectralPool(nn.Module):
    """Spectral pooling to ``output_size`` over the last ``_nd`` dims (no torch counterpart)."""

    _nd = 1
    _fn = staticmethod(CF.spectral_pool1d)

    def __init__(self, output_size: int | tuple[int | None, ...]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C, *S)`` (or unbatched) complex or real -> ``(B, C, *output_size)``,
        the low frequencies of its DFT kept (real input: real output)."""
        return self._fn(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class SpectralPool1d(_SpectralPool):
    r"""Spectral pooling of ``(B, C, L)`` to length ``output_size`` :math:`k < L` (:math:`k =
    L`: unchanged): the DFT along ``L`` keeps its frequencies :math:`|f| \le k/2`, the two of
    :math:`\pm k/2` added for an even :math:`k`, and is inverted at length :math:`k`:

    .. math::
        y[m] = \sum_{|f| \le k/2} \hat{x}[f \bmod L]\, e^{2\pi i f m / k}, \quad
        \hat{x}[f] = \frac{1}{L} \sum_j x[j]\, e^{-2\pi i f j / L}.

    The mean is kept, a signal of frequencies below :math:`k/2` is resampled exactly, and a
    real input gives ``scipy.signal.resample`` (Rippel et al., NeurIPS 2015; for MRI: cropping
    k-space). complextorch's ``SpectralPool1d`` gives the same for an odd :math:`k` and drops
    :math:`+k/2` for an even one. See :func:`cplxnet.functional.spectral_pool1d`.

    Examples::

        >>> SpectralPool1d(8)(torch.randn(2, 4, 32, dtype=torch.cfloat)).shape
        torch.Size([2, 4, 8])
    """

    _nd = 1
    _fn = staticmethod(CF.spectral_pool1d)


class SpectralPool2d(_SpectralPool):
    r"""Spectral pooling of ``(B, C, H, W)`` to ``output_size`` (an int, or two with ``None``
    keeping a size): :class:`SpectralPool1d` along each axis. A channels-last input gives a
    channels-last output.

    Examples::

        >>> SpectralPool2d((16, None))(torch.randn(2, 3, 32, 24, dtype=torch.cfloat)).shape
        torch.Size([2, 3, 16, 24])
    """

    _nd = 2
    _fn = staticmethod(CF.spectral_pool2d)


class SpectralPool3d(_SpectralPool):
    r"""Spectral pooling of ``(B, C, D, H, W)`` to ``output_size``: :class:`SpectralPool1d`
    along each axis.

    Examples::

        >>> SpectralPool3d(4)(torch.randn(1, 2, 8, 16, 16, dtype=torch.cfloat)).shape
        torch.Size([1, 2, 4, 4, 4])
    """

    _nd = 3
    _fn = staticmethod(CF.spectral_pool3d)
