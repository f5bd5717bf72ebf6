"""Pooling over a sequence with a padding mask (True = padding), max-over-time by modulus, and
pooling over 1-D, 2-D and 3-D grids (max and adaptive max by modulus, average, unpooling)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .._utils import pack, runs_composed, unpack, without_autocast
from .grid_views import (
    adaptive_blocks,
    adaptive_sizes,
    block_mean,
    is_channels_last,
    on_parts,
    pool_blocks,
    separable_mean,
    sizes_of,
)

__all__ = [
    "masked_mean",
    "masked_max_magnitude",
    "max_magnitude",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
]


def _keep_weights(
    x: torch.Tensor, padding_mask: torch.Tensor | None, dim: int
) -> torch.Tensor | None:
    """Broadcast ``~padding_mask`` ``(B, L)`` to ``x`` with ``L`` at ``dim`` (bool) or None."""
    if padding_mask is None:
        return None
    keep = ~padding_mask  # (B, L)
    shape = [1] * x.dim()
    shape[0], shape[dim] = keep.shape[0], keep.shape[1]
    return keep.reshape(shape)


@without_autocast
def masked_mean(
    x: torch.Tensor, padding_mask: torch.Tensor | None = None, dim: int = 1
) -> torch.Tensor:
    r"""Mean of ``x`` over ``dim`` counting only non-padded positions.

    ``x`` is ``(B, L, ...)`` with the sequence at ``dim`` (default 1; use ``dim=-1`` for a
    ``(B, C, L)`` conv output) and ``padding_mask`` is a bool ``(B, L)`` with True marking padding.
    A sequence that is entirely padding pools to zeros. Values at padded positions never affect the
    output or receive gradient. The weighted sum runs as one real batched matmul on the packed view
    (:func:`cplxnet._utils.pack`), so complex and real inputs share the code.
    """
    dim = dim % x.dim()
    if padding_mask is None:
        return x.mean(dim=dim)
    keep = (~padding_mask).to(x.real.dtype)  # (B, L)
    count = keep.sum(dim=1, keepdim=True).clamp_min(1.0)  # (B, 1)
    w = (keep / count).unsqueeze(1)  # (B, 1, L)
    xm = x.movedim(dim, 1)  # (B, L, *rest)
    rest = xm.shape[2:]
    # (B, L, F) real (F = 2 * features if complex); explicit sizes so that B = 0 works
    flat = pack(xm.reshape(xm.shape[0], xm.shape[1], math.prod(rest)))
    # padded entries are zeroed first so that inf/nan stored in padding cannot leak (0 * inf = nan)
    flat = flat.masked_fill(padding_mask.unsqueeze(-1), 0.0)
    out = torch.bmm(w, flat).squeeze(1)  # (B, F)
    return unpack(out, x).reshape(xm.shape[0], *rest)


def masked_max_magnitude(
    x: torch.Tensor, padding_mask: torch.Tensor | None = None, dim: int = 1
) -> torch.Tensor:
    r"""Per feature, the entry of ``x`` with the largest modulus over ``dim`` among non-padded
    positions (the complex entry itself, phase included; for a real ``x`` the entry with the largest
    absolute value, sign included).

    The gradient flows only to the selected entry (through ``gather``). A sequence that is entirely
    padding pools to zeros. Shapes as :func:`masked_mean`.
    """
    dim = dim % x.dim()
    score = _sq_modulus_or_square(x).detach()  # ordering by |x|^2 avoids a sqrt
    keep = _keep_weights(x, padding_mask, dim)
    if keep is not None:
        score = score.masked_fill(~keep, -1.0)
    idx = score.argmax(dim=dim, keepdim=True)
    out = x.gather(dim, idx).squeeze(dim)
    if keep is not None:
        empty = ~keep.any(dim=dim)  # (B, 1, ...) broadcastable to out
        out = out.masked_fill(empty, 0)
    return out


def max_magnitude(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Max-over-time by modulus, e.g. for a Kim-CNN ``(B, C, L)`` conv output (``dim=-1``):
    :func:`masked_max_magnitude` without a mask."""
    return masked_max_magnitude(x, None, dim)


def _sq_modulus_or_square(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(x.resolve_conj()).square().sum(-1) if x.is_complex() else x.square()


# ---- pooling over grids: (B, C, *S) or unbatched (C, *S), S of 1, 2 or 3 sizes ----------------
_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_AMAX = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}
_AAVG = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}


def _gather_at(x: torch.Tensor, idx: torch.Tensor, nd: int) -> torch.Tensor:
    """The entries of ``x`` ``(*, *S)`` at torch's pooling indices ``idx`` ``(*, *S')`` (flat
    positions in each ``S`` plane); the gradient flows to those entries only. A channels-last
    ``x`` is gathered as ``(N, M, C)`` rows (no copy), the result channels-last."""
    if is_channels_last(x, nd):
        rows = x.movedim(1, -1).flatten(1, nd)  # (N, M, C), contiguous
        at = idx.movedim(1, -1)
        out = rows.gather(1, at.flatten(1, nd))
        return out.view(at.shape).movedim(-1, 1)
    return x.flatten(-nd).gather(-1, idx.flatten(-nd)).view(idx.shape)


def _modulus(x: torch.Tensor) -> torch.Tensor:
    """:math:`|x|`: ``torch.hypot`` of the parts of a complex ``x`` (no overflow; vectorised,
    about 3x faster than torch's complex ``abs``, with which it agrees to 1 ulp), ``abs`` of a
    real one; in ``x``'s layout."""
    if not x.is_complex():
        return x.abs()
    r = torch.view_as_real(x.resolve_conj())
    return torch.hypot(r[..., 0], r[..., 1])


def _by_modulus(pool: Callable, x: torch.Tensor, nd: int, return_indices: bool, *args):
    """``pool`` (torch's real max pool with ``return_indices``) on ``|x|``, then the entries of
    ``x`` at the returned indices."""
    score = _modulus(x.detach())
    if not is_channels_last(x, nd):  # torch's pools take channels-last or contiguous scores
        score = score.contiguous()
    _, idx = pool(score, *args, return_indices=True)
    out = _gather_at(x, idx, nd)
    return (out, idx) if return_indices else out


def _padding_only_window(x, nd, kernel_size, stride, padding, dilation, ceil_mode) -> str | None:
    """A description of the first axis on which a window of the pool lies entirely in the
    implicit padding (torch's real max pool gives ``-inf`` and an index outside the input
    there), else None; shape arithmetic only (None under a tracer or for arguments torch will
    report)."""
    if runs_composed() or x.dim() not in (nd + 1, nd + 2):
        return None
    k, p, d = sizes_of(kernel_size, nd), sizes_of(padding, nd), sizes_of(dilation, nd)
    s = k if stride is None or sizes_of(stride, nd) == () else sizes_of(stride, nd)
    if not (len(k) == len(s) == len(p) == len(d) == nd):
        return None
    for axis, (n, ki, si, pi, di) in enumerate(zip(x.shape[-nd:], k, s, p, d)):
        if min(ki, si, di) < 1 or pi < 0:
            return None
        span = di * (ki - 1) + 1
        out = (n + 2 * pi - span + (si - 1 if ceil_mode else 0)) // si + 1
        if ceil_mode and (out - 1) * si >= n + pi:  # torch drops a last window that starts
            out -= 1  # in the right padding
        # a window starting and ending inside the input has its first tap there: only the
        # windows at the edges need a look
        left = range(min(out, (pi + si - 1) // si))
        right = range(max(len(left), (n - span + pi) // si + 1), out)
        for i in (*left, *right):
            first = i * si - pi
            if all(not 0 <= first + j * di < n for j in range(ki)):
                return (
                    f"window {i} of axis {axis} (input size {n}, kernel {ki}, stride {si}, "
                    f"padding {pi}, dilation {di})"
                )
    return None


def _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd):
    empty = _padding_only_window(x, nd, kernel_size, stride, padding, dilation, ceil_mode)
    if empty is not None:
        raise ValueError(
            f"max_pool{nd}d: {empty} lies entirely in the padding, where torch's real pool gives "
            "-inf, which no complex entry is; use less padding or dilation, or a larger input"
        )
    return _by_modulus(
        _MAX[nd], x, nd, return_indices, kernel_size, stride, padding, dilation, ceil_mode
    )


def max_pool1d(
    x: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    r"""Max pooling by modulus on ``(B, C, L)`` (or ``(C, L)``): each output is the complex entry
    :math:`x_j` of its window with the largest :math:`|x_j|` (phase included); arguments, output
    sizes and ``return_indices`` (flat positions in each input plane, ``torch.long``) exactly as
    ``torch.nn.functional.max_pool1d``, implicit padding never selected.

    Computed as torch's real max pool with indices on :math:`|x|` (a real tensor of half the
    size), then a gather of the complex entries at those indices, so the gradient flows to the
    selected entries only. Ties: torch's rule on :math:`|x|` (``torch.hypot`` of the parts, no
    overflow), i.e. the first position of the window in row-major scan order; a NaN entry is
    selected (the last NaN of the window). A real ``x`` is pooled by :math:`|x|` as well (sign
    kept), which is the complex layer on real inputs, not torch's max by value.
    (Max-magnitude pooling: e.g. Zhang et al., "Complex-valued convolutional neural network and
    its application in polarimetric SAR image classification", IEEE TGRS 2017.)
    """
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


def max_pool2d(
    x: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    r"""Max pooling by modulus on ``(B, C, H, W)`` (or unbatched); see :func:`max_pool1d`."""
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


def max_pool3d(
    x: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    r"""Max pooling by modulus on ``(B, C, D, H, W)`` (or unbatched); see :func:`max_pool1d`."""
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3)


def unpool_size(
    x: torch.Tensor, kernel_size, stride, padding, output_size, nd: int, owner: str
) -> tuple:
    """Spatial output size of a max unpooling, as torch's: ``(in - 1) * stride - 2 * padding +
    kernel_size``, or ``output_size`` (spatial sizes, or with the leading sizes)."""
    k = (kernel_size,) * nd if isinstance(kernel_size, int) else tuple(kernel_size)
    s = k if stride is None else (stride,) * nd if isinstance(stride, int) else tuple(stride)
    p = (padding,) * nd if isinstance(padding, int) else tuple(padding)
    default = tuple((n - 1) * si - 2 * pi + ki for n, si, pi, ki in zip(x.shape[-nd:], s, p, k))
    if output_size is None:
        return default
    size = tuple(output_size)
    if len(size) == x.dim():
        size = size[-nd:]
    if len(size) != nd:
        raise ValueError(
            f"{owner}: output_size must have {nd} or {x.dim()} elements, got {tuple(output_size)}"
        )
    bad = [(o, d, si) for o, d, si in zip(size, default, s) if not d - si < o < d + si]
    if bad:
        lo = tuple(d - si + 1 for d, si in zip(default, s))
        hi = tuple(d + si - 1 for d, si in zip(default, s))
        raise ValueError(
            f"{owner}: output_size {size} is not reachable from an input of "
            f"{tuple(x.shape[-nd:])}: valid sizes range from {lo} to {hi}"
        )
    return size


def _max_unpool(x, indices, kernel_size, stride, padding, output_size, nd):
    owner = f"max_unpool{nd}d"
    if indices.shape != x.shape or indices.dtype != torch.long:
        raise ValueError(
            f"{owner}: indices must be the torch.long tensor of x's shape {tuple(x.shape)} "
            f"returned by max_pool{nd}d(..., return_indices=True), got "
            f"{indices.dtype} {tuple(indices.shape)}"
        )
    size = unpool_size(x, kernel_size, stride, padding, output_size, nd, owner)
    lead = x.shape[:-nd]
    if is_channels_last(x, nd):  # scattered as (N, M, C) rows, the result channels-last
        n, c = x.shape[:2]
        rows = x.new_zeros(n, math.prod(size), c)
        at, src = (t.movedim(1, -1).flatten(1, nd) for t in (indices, x))
        return rows.scatter_(1, at, src).view(n, *size, c).movedim(-1, 1)
    out = x.new_zeros(*lead, math.prod(size))  # in place: the zeros need no copy nor gradient
    return out.scatter_(-1, indices.flatten(-nd), x.flatten(-nd)).view(*lead, *size)


def max_unpool1d(
    x: torch.Tensor,
    indices: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> torch.Tensor:
    r"""Partial inverse of :func:`max_pool1d`: each entry of ``x`` is written at its index in a
    zero plane of torch's unpooled size (``(L - 1) * stride - 2 * padding + kernel_size`` or
    ``output_size``); arguments as ``torch.nn.functional.max_unpool1d``. One ``scatter`` of the
    complex entries (the gradient is the gather at ``indices``); a repeated index (overlapping
    windows) keeps one of its entries, as torch's."""
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(
    x: torch.Tensor,
    indices: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> torch.Tensor:
    r"""Partial inverse of :func:`max_pool2d`; see :func:`max_unpool1d`."""
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(
    x: torch.Tensor,
    indices: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> torch.Tensor:
    r"""Partial inverse of :func:`max_pool3d`; see :func:`max_unpool1d`."""
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 3)


def _avg_pool(x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor, split):
    k = pool_blocks(x, nd, kernel_size, stride, padding, ceil_mode)
    # a divisor of 0 or not an int: torch's kernel, which reports it
    if k is not None and (divisor is None or (type(divisor) is int and divisor != 0)):
        return block_mean(x, k, math.prod(k) if divisor is None else divisor)
    args = (kernel_size, stride, padding, ceil_mode, count_include_pad)
    if nd == 1:
        return on_parts(lambda r: F.avg_pool1d(r, *args), x, 1, split)
    return on_parts(lambda r: _AVG[nd](r, *args, divisor), x, nd, split, nd == 2)


def avg_pool1d(
    x: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> torch.Tensor:
    r"""Average pooling on ``(B, C, L)`` (or ``(C, L)``): :math:`y = \frac{1}{n}\sum_j x_j` over
    each window, i.e. torch's ``avg_pool1d`` of :math:`\Re x` plus :math:`i` times that of
    :math:`\Im x` (the average is real-linear); arguments and sizes as
    ``torch.nn.functional.avg_pool1d``.

    Non-overlapping windows (``stride`` = ``kernel_size``, no padding, as in most U-Nets) are
    summed on the interleaved layout (:func:`cplxnet.functional.grid_views.block_mean`: strided
    additions, no copy in; the backward repeats the gradient over each window); other windows go
    through ONE torch call on the ``(M, 2, L)`` real view (:func:`on_parts`)."""
    return _avg_pool(x, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None, False)


def avg_pool2d(
    x: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> torch.Tensor:
    r"""Average pooling on ``(B, C, H, W)`` (or unbatched); see :func:`avg_pool1d` (torch's
    ``divisor_override`` too). Overlapping or padded windows of a batched input: one torch call
    on the channels-last real view (a contiguous input converted in and back, measured faster
    than torch's contiguous kernel); unbatched: two torch calls on the contiguous parts."""
    return _avg_pool(
        x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, True
    )


def avg_pool3d(
    x: torch.Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> torch.Tensor:
    r"""Average pooling on ``(B, C, D, H, W)`` (or unbatched); see :func:`avg_pool2d`
    (overlapping windows of a contiguous input: two torch calls on the contiguous parts, which
    measured faster here than the channels-last conversion)."""
    return _avg_pool(
        x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, True
    )


def adaptive_max_pool1d(
    x: torch.Tensor, output_size: int | Sequence[int], return_indices: bool = False
):
    r"""Adaptive max pooling by modulus on ``(B, C, L)`` (or ``(C, L)``) to ``output_size``:
    torch's ``adaptive_max_pool1d`` windows, the entry of largest :math:`|x|` in each (ties and
    NaN as :func:`max_pool1d`), indices as torch's."""
    return _by_modulus(_AMAX[1], x, 1, return_indices, output_size)


def adaptive_max_pool2d(
    x: torch.Tensor, output_size: int | Sequence[int | None], return_indices: bool = False
):
    r"""Adaptive max pooling by modulus on ``(B, C, H, W)``; see :func:`adaptive_max_pool1d`."""
    return _by_modulus(_AMAX[2], x, 2, return_indices, output_size)


def adaptive_max_pool3d(
    x: torch.Tensor, output_size: int | Sequence[int | None], return_indices: bool = False
):
    r"""Adaptive max pooling by modulus on ``(B, C, D, H, W)``; see
    :func:`adaptive_max_pool1d`."""
    return _by_modulus(_AMAX[3], x, 3, return_indices, output_size)


@without_autocast
def _adaptive_avg_pool(x, nd, output_size):
    k = adaptive_blocks(x, nd, output_size)
    if k is not None:
        return block_mean(x, k, math.prod(k))
    out = adaptive_sizes(x, nd, output_size)
    if out is not None:
        return separable_mean(x, out)
    return on_parts(lambda r: _AAVG[nd](r, output_size), x, nd, True, nd == 2)


def adaptive_avg_pool1d(x: torch.Tensor, output_size: int | Sequence[int]) -> torch.Tensor:
    r"""Adaptive average pooling on ``(B, C, L)`` (or ``(C, L)``): torch's
    ``adaptive_avg_pool1d`` of the real and imaginary parts, torch's windows
    :math:`[\lfloor i L / o \rfloor, \lceil (i + 1) L / o \rceil)`. Sizes divisible by the
    output size (e.g. global pooling to 1) are non-overlapping windows, summed on the
    interleaved layout as in :func:`avg_pool1d`; other sizes take two torch calls on the
    contiguous parts."""
    return _adaptive_avg_pool(x, 1, output_size)


def adaptive_avg_pool2d(x: torch.Tensor, output_size: int | Sequence[int | None]) -> torch.Tensor:
    r"""Adaptive average pooling on ``(B, C, H, W)``; see :func:`adaptive_avg_pool1d`. Sizes
    that do not divide, to outputs of at most 16 per axis (e.g. 7, a classifier head's): one
    matrix product per axis on the interleaved real view of a contiguous input (the pool is
    separable; :func:`~cplxnet.functional.grid_views.separable_mean`, no copy of the input);
    larger outputs, other strides, or an input being traced or compiled: torch's kernel on the
    channels-last real view (a batched input converted in and back; an unbatched one on the
    contiguous parts); a channels-last input: that kernel on its real view, no copy."""
    return _adaptive_avg_pool(x, 2, output_size)


def adaptive_avg_pool3d(x: torch.Tensor, output_size: int | Sequence[int | None]) -> torch.Tensor:
    r"""Adaptive average pooling on ``(B, C, D, H, W)``; see :func:`adaptive_avg_pool2d`
    (sizes that do not divide, outputs larger than 16 per axis: torch's kernel on the
    contiguous parts)."""
    return _adaptive_avg_pool(x, 3, output_size)
