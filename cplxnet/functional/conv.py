"""Complex 1-D and 2-D convolutions (native complex kernels)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["conv1d", "conv2d"]


def _conv(fn, x, weight, bias, stride, padding, dilation, groups, padding_mode, nd):
    if padding_mode != "zeros":
        if isinstance(padding, str):
            raise ValueError(f"conv{nd}d: padding_mode={padding_mode!r} needs numeric padding")
        pad = (padding,) * nd if isinstance(padding, int) else tuple(padding)
        # F.pad takes (last_lo, last_hi, prev_lo, prev_hi, ...)
        x = F.pad(x, [p for p in reversed(pad) for _ in range(2)], mode=padding_mode)
        padding = 0
    return fn(x, weight, bias, stride, padding, dilation, groups)


def conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple | str = 0,
    dilation: int | tuple = 1,
    groups: int = 1,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    r"""Complex 1-D cross-correlation :math:`y = W \star x + b` on ``(B, C_in, L)``.

    With :math:`x = x_r + i x_i` and :math:`W = A + iB`:
    :math:`y = (A \star x_r - B \star x_i) + i (B \star x_r + A \star x_i) + b` (four real
    convolutions; Trabelsi et al., ICLR 2018, Sec. 3.2). Runs torch's native complex convolution,
    which costs about as much as the real convolution with twice the channels
    (``shared/notes/performance.md``). ``padding``/``stride``/``dilation``/``groups`` as
    ``torch.nn.functional.conv1d``; ``padding_mode`` one of 'zeros', 'reflect', 'replicate',
    'circular' (non-zero modes pad with ``F.pad`` first, as ``torch.nn.Conv1d`` does).
    """
    return _conv(F.conv1d, x, weight, bias, stride, padding, dilation, groups, padding_mode, 1)


def conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple | str = 0,
    dilation: int | tuple = 1,
    groups: int = 1,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    r"""Complex 2-D cross-correlation on ``(B, C_in, H, W)``; see :func:`conv1d`."""
    return _conv(F.conv2d, x, weight, bias, stride, padding, dilation, groups, padding_mode, 2)
