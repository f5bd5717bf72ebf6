"""Complex up/down-sampling of grids by torch's interpolation, applied to both parts at once."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .grid_views import block_repeat, nearest_blocks, on_parts

__all__ = ["interpolate"]


def interpolate(
    x: torch.Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> torch.Tensor:
    r"""``torch.nn.functional.interpolate`` for complex ``(B, C, *S)`` grids (``S`` of 1, 2 or 3
    sizes), every argument and mode as torch's ('nearest', 'linear', 'bilinear', 'bicubic',
    'trilinear', 'area', 'nearest-exact').

    Interpolation is real-linear with real weights, so
    :math:`\mathrm{interp}(x) = \mathrm{interp}(\Re x) + i\,\mathrm{interp}(\Im x)`. A
    channels-last input: one call on its channels-last real view (the result channels-last);
    'bilinear' and 'trilinear' of a contiguous input: the same, converted in and back (torch's
    channels-last kernels measured 4-8x faster than its contiguous ones in
    ``benchmarks/grid_layers.py``, more than the conversion costs); other modes:
    torch's interpolation of the contiguous real and imaginary parts (two calls; one copy each
    way, :func:`cplxnet.functional.grid_views.on_parts`): torch's kernels on the copy-free
    ``(B C, 2, *S)`` real view (channels-last, two channels) measured 1.3-2.2x slower than these
    copies
    (``benchmarks/RESULTS.md``). 'nearest' to sizes ``k S`` with ``k`` a power of two up to 16
    (where torch's source index ``floor(j / k)`` is exact) repeats each complex entry over its
    block instead (:func:`cplxnet.functional.grid_views.block_repeat`: one copy out, the
    backward a sum over each block on the interleaved layout). A real ``x`` gets torch's result.
    """
    if not isinstance(x, torch.Tensor) or x.dim() not in (3, 4, 5):
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(
            f"interpolate: expected a batched input (B, C, L), (B, C, H, W) or (B, C, D, H, W), "
            f"got {got}"
        )

    k = nearest_blocks(
        x, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
    )
    if k is not None:
        return block_repeat(x, k)

    def fn(r: torch.Tensor) -> torch.Tensor:
        return F.interpolate(
            r, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
        )

    linear = mode in ("bilinear", "trilinear")  # measured faster through channels-last
    return on_parts(fn, x, x.dim() - 2, split=True, via_channels_last=linear)
