r"""Spectral pooling: downsampling a 1-D, 2-D or 3-D grid by keeping the low frequencies of its
discrete Fourier transform (Rippel, Snoek and Adams, "Spectral Representations for
Convolutional Neural Networks", NeurIPS 2015). For MRI data this is cropping k-space.

Along each pooled axis of input size :math:`n` and output size :math:`k < n` (an axis with
:math:`k = n` is left as it is),

.. math::

    y[m] = \sum_{f \in \mathbb{Z},\ |f| \le k/2} \hat{x}[f \bmod n]\, e^{2\pi i f m / k},
    \qquad \hat{x}[f] = \frac{1}{n} \sum_{j=0}^{n-1} x[j]\, e^{-2\pi i f j / n}.

For an even :math:`k` the two frequencies :math:`\pm k/2` fall on the same output frequency and
are added, so a real input gives a real output and the result equals
``scipy.signal.resample`` along each axis. A signal whose frequencies all lie below
:math:`k/2` in modulus is resampled exactly, and the mean is kept.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from .grid_views import check_grid, cl_format, is_channels_last

__all__ = ["spectral_pool1d", "spectral_pool2d", "spectral_pool3d"]


def _output_sizes(output_size: object, sizes: Sequence[int], nd: int, owner: str) -> tuple:
    """``output_size`` as ``nd`` ints (``None``: the input's size), each in ``1..size``; any
    integer type (``numpy.int64``) is taken."""
    sequence = isinstance(output_size, (tuple, list, torch.Size))
    given = tuple(output_size) if sequence else (output_size,) * nd
    if len(given) != nd:
        many = "an int" if nd == 1 else f"an int or {nd} ints (None keeps a size)"
        raise ValueError(f"{owner}: output_size must be {many}, got {output_size!r}")
    out = []
    for o, n in zip(given, sizes):
        if o is None:  # the input's size (symbolic when traced)
            out.append(n)
            continue
        try:
            o = None if isinstance(o, bool) else operator.index(o)
        except TypeError:
            o = None
        if o is None or o < 1:
            raise ValueError(f"{owner}: output_size must hold positive ints, got {output_size!r}")
        if o > n:
            raise ValueError(
                f"{owner}: output_size {tuple(given)} exceeds the input's size "
                f"{tuple(sizes)}; spectral pooling only shrinks (enlarge with Upsample)"
            )
        out.append(o)
    return tuple(out)


def _keep_low(spectrum: torch.Tensor, dim: int, n: int, k: int) -> torch.Tensor:
    """The ``k`` frequencies of ``|f| <= k/2`` of the length-``n`` ``spectrum`` along ``dim``, in
    FFT order; for an even ``k`` the bin of ``-k/2`` also receives the bin of ``+k/2``."""
    low, neg = (k + 1) // 2, k // 2  # f = 0..low-1 and f = -neg..-1
    if k % 2:
        parts = [spectrum.narrow(dim, 0, low), spectrum.narrow(dim, n - neg, neg)]
    else:
        nyquist = spectrum.narrow(dim, low, 1) + spectrum.narrow(dim, n - neg, 1)
        parts = [
            spectrum.narrow(dim, 0, low),
            nyquist,
            spectrum.narrow(dim, n - neg + 1, neg - 1),
        ]
    return torch.cat(parts, dim)


def _spectral_pool(input: torch.Tensor, nd: int, output_size: object, owner: str) -> torch.Tensor:
    check_grid(input, owner, nd)
    sizes = tuple(input.shape[-nd:])
    out_sizes = _output_sizes(output_size, sizes, nd, owner)
    axes = [(d - nd, n, k) for d, (n, k) in enumerate(zip(sizes, out_sizes)) if k != n]
    if not axes:
        return input.clone()
    if input.numel() == 0:  # torch's FFT refuses empty batches; any crop is the answer
        return input[(..., *(slice(0, k) for k in out_sizes))].contiguous()
    dims = [d for d, _, _ in axes]
    spectrum = torch.fft.fftn(input, dim=dims, norm="forward")
    for d, n, k in axes:
        spectrum = _keep_low(spectrum, d, n, k)
    out = torch.fft.ifftn(spectrum, dim=dims, norm="forward")
    if not input.is_complex():
        out = out.real
    if is_channels_last(input, nd, complex_only=False):
        return out.contiguous(memory_format=cl_format(nd))
    return out.contiguous()


def spectral_pool1d(input: torch.Tensor, output_size: int | None) -> torch.Tensor:
    r"""Spectral pooling of ``(B, C, L)`` (or ``(C, L)``) to length ``output_size`` (at most
    ``L``; ``None`` or ``L``: unchanged): the frequencies :math:`|f| \le k/2` of the DFT kept,
    the two of :math:`\pm k/2` added for an even :math:`k` (see
    :mod:`cplxnet.functional.spectral`). Complex input gives complex output; real input a real
    output, equal to ``scipy.signal.resample(x, k, axis=-1)``.

    Examples::

        >>> x = torch.exp(2j * torch.pi * 3 * torch.arange(32) / 32).reshape(1, 1, 32)
        >>> y = spectral_pool1d(x, 8)  # frequency 3 < 8/2: resampled exactly
        >>> torch.allclose(y, torch.exp(2j * torch.pi * 3 * torch.arange(8) / 8), atol=1e-6)
        True
    """
    return _spectral_pool(input, 1, output_size, "spectral_pool1d")


def spectral_pool2d(input: torch.Tensor, output_size: int | Sequence[int | None]) -> torch.Tensor:
    r"""Spectral pooling of ``(B, C, H, W)`` (or ``(C, H, W)``) to ``output_size`` (an int for
    both sizes, or two with ``None`` keeping one): :func:`spectral_pool1d` along each axis. A
    channels-last input gives a channels-last output.

    Examples::

        >>> spectral_pool2d(torch.randn(2, 3, 32, 32, dtype=torch.cfloat), (16, None)).shape
        torch.Size([2, 3, 16, 32])
    """
    return _spectral_pool(input, 2, output_size, "spectral_pool2d")


def spectral_pool3d(input: torch.Tensor, output_size: int | Sequence[int | None]) -> torch.Tensor:
    r"""Spectral pooling of ``(B, C, D, H, W)`` (or ``(C, D, H, W)``) to ``output_size``:
    :func:`spectral_pool1d` along each axis.

    Examples::

        >>> spectral_pool3d(torch.randn(1, 2, 8, 16, 16, dtype=torch.cfloat), 4).shape
        torch.Size([1, 2, 4, 4, 4])
    """
    return _spectral_pool(input, 3, output_size, "spectral_pool3d")
