"""Complex 1-D, 2-D and 3-D convolutions and transposed convolutions, each as one real
convolution with a block kernel."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
]

_REAL_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_REAL_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _block_weight(
    weight: torch.Tensor, bias: torch.Tensor | None, groups: int, transposed: bool = False
):
    """Real block kernel ``[[A, -B], [B, A]]`` per group for complex ``W = A + iB``.

    ``weight`` ``(C_out, C_in/g, *k)`` complex -> ``(2 C_out, 2 C_in/g, *k)`` real whose output
    and input channels are ordered ``[group][part][channel]``; ``bias`` likewise ``(2 C_out,)``.
    For a transposed convolution ``weight`` is ``(C_in, C_out/g, *k)`` and the block is the
    transpose ``[[A, B], [-B, A]]`` (rows: input parts), ``(2 C_in, 2 C_out/g, *k)``.
    """
    co = weight.shape[0]
    a = weight.real.reshape(groups, co // groups, *weight.shape[1:])
    b = weight.imag.reshape(groups, co // groups, *weight.shape[1:])
    if transposed:  # rows are input channels: x_r feeds (A, B), x_i feeds (-B, A)
        top, bot = torch.cat([a, b], 2), torch.cat([-b, a], 2)
    else:  # rows are output channels: y_r = A x_r - B x_i, y_i = B x_r + A x_i
        top, bot = torch.cat([a, -b], 2), torch.cat([b, a], 2)
    w = torch.stack([top, bot], 1).reshape(2 * co, 2 * weight.shape[1], *weight.shape[2:])
    return w, _block_bias(bias, groups)


def _block_bias(bias: torch.Tensor | None, groups: int) -> torch.Tensor | None:
    """Complex ``bias`` ``(C,)`` -> real ``(2C,)`` ordered ``[group][part][channel]``."""
    if bias is None:
        return None
    g_out = bias.shape[0] // groups
    return torch.view_as_real(bias).reshape(groups, g_out, 2).movedim(-1, 1).reshape(-1)


def _interleaved_weight(weight: torch.Tensor, groups: int, transposed: bool) -> torch.Tensor:
    """The block kernel of :func:`_block_weight` acting on the interleaved layout: the last
    spatial axis of the real view ``(..., L, 2)`` flattened to ``2L`` (``[x_r(0), x_i(0),
    x_r(1), ...]``), so the part is the parity of that axis and the kernel's last axis is ``2k``.

    Convolution (``weight`` ``(C_out, C_in/g, *k)``): ``(2 C_out, C_in/g, *k', 2k)``, the output
    channels ``[group][part][channel]`` (real-part rows interleave ``(A, -B)``, imaginary-part rows
    ``(B, A)``). Transposed (``weight`` ``(C_in, C_out/g, *k)``): ``(2 C_in, C_out/g, *k', 2k)``,
    the input channels ``[group][part][channel]`` (``x_r`` rows ``(A, B)``, ``x_i`` rows
    ``(-B, A)``), whose output lands on the interleaved layout."""
    a, b = weight.real, weight.imag
    if transposed:
        first, second = torch.stack([a, b], -1), torch.stack([-b, a], -1)
    else:
        first, second = torch.stack([a, -b], -1), torch.stack([b, a], -1)
    c = weight.shape[0]
    w = torch.stack([first.flatten(-2), second.flatten(-2)], 0)  # (2, C, ..., 2k)
    w = w.reshape(2, groups, c // groups, *w.shape[2:]).transpose(0, 1)
    return w.reshape(2 * c, *w.shape[3:])


def _last_doubled(value, nd: int) -> tuple:
    """A per-axis argument with its last entry doubled (the interleaved last axis)."""
    t = (value,) * nd if isinstance(value, int) else tuple(value)
    return (*t[:-1], 2 * t[-1])


def _last_one(value, nd: int) -> tuple:
    """A per-axis ``dilation`` with 1 on the last (interleaved) axis."""
    t = (value,) * nd if isinstance(value, int) else tuple(value)
    return (*t[:-1], 1)


def _interleavable(padding, dilation, nd: int) -> bool:
    """Whether the convolution runs on the interleaved layout: numeric padding and no dilation
    on the last axis (a dilated last axis would need a kernel with zero taps)."""
    dil = (dilation,) * nd if isinstance(dilation, int) else tuple(dilation)
    return not isinstance(padding, str) and dil[-1] == 1


def _to_parts(x: torch.Tensor, groups: int) -> torch.Tensor:
    """``(B, C, *S)`` complex -> ``(B, 2C, *S)`` real, channels ``[group][part][channel]``."""
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    xr = torch.view_as_real(x).reshape(n, groups, c // groups, *spatial, 2).movedim(-1, 2)
    return xr.reshape(n, 2 * c, *spatial)  # one copy


def _from_parts(y: torch.Tensor, groups: int) -> torch.Tensor:
    """Inverse of :func:`_to_parts` for the output ``(B, 2 C_out, *S')`` real."""
    n, co, out_sp = y.shape[0], y.shape[1] // 2, y.shape[2:]
    y = y.reshape(n, groups, 2, co // groups, *out_sp).movedim(2, -1).reshape(n, co, *out_sp, 2)
    return torch.view_as_complex(y.contiguous())  # one copy back to interleaved complex


def _pad_widths(padding, kernel_size, dilation, nd: int) -> list[int]:
    """``F.pad`` widths ``(last_lo, last_hi, prev_lo, prev_hi, ...)`` of a convolution's
    ``padding`` (ints, 'valid', or 'same': total ``dilation * (k - 1)``, the extra one on the high
    side, as torch's ``_ConvNd``)."""
    if padding == "valid":
        return [0] * (2 * nd)
    if padding == "same":
        dil = (dilation,) * nd if isinstance(dilation, int) else tuple(dilation)
        total = [d * (k - 1) for d, k in zip(dil, kernel_size)]
        return [w for t in reversed(total) for w in (t // 2, t - t // 2)]
    pad = (padding,) * nd if isinstance(padding, int) else tuple(padding)
    return [p for p in reversed(pad) for _ in range(2)]


def _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, nd):
    if padding_mode != "zeros":
        x = F.pad(x, _pad_widths(padding, weight.shape[2:], dilation, nd), mode=padding_mode)
        padding = 0
    fn = _REAL_CONV[nd]
    if not x.is_complex():
        return fn(x, weight, bias, stride, padding, dilation, groups)
    unbatched = x.dim() == nd + 1
    xb = x.unsqueeze(0) if unbatched else x
    if _interleavable(padding, dilation, nd):
        # the input as its interleaved real view (no copy), the output channels [part][channel]
        y = fn(
            torch.view_as_real(xb).flatten(-2),
            _interleaved_weight(weight, groups, transposed=False),
            _block_bias(bias, groups),
            _last_doubled(stride, nd),
            _last_doubled(padding, nd),
            _last_one(dilation, nd),
            groups,
        )
    else:
        w, b = _block_weight(weight, bias, groups)
        y = fn(_to_parts(xb, groups), w, b, stride, padding, dilation, groups)
    out = _from_parts(y, groups)
    return out.squeeze(0) if unbatched else out


def _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, nd):
    fn = _REAL_CONV_T[nd]
    if not x.is_complex():
        return fn(x, weight, bias, stride, padding, output_padding, groups, dilation)
    unbatched = x.dim() == nd + 1
    xb = x.unsqueeze(0) if unbatched else x
    if _interleavable(padding, dilation, nd):
        # the input repacked [part][channel], the output lands on the interleaved layout
        y = fn(
            _to_parts(xb, groups),
            _interleaved_weight(weight, groups, transposed=True),
            None,
            _last_doubled(stride, nd),
            _last_doubled(padding, nd),
            _last_doubled(output_padding, nd),
            groups,
            _last_one(dilation, nd),
        ).unflatten(-1, (-1, 2))
        if bias is not None:  # in place on the fresh output (the real op does not save it)
            y.add_(torch.view_as_real(bias).view(-1, *(1,) * nd, 2))
        out = torch.view_as_complex(y)
    else:
        w, b = _block_weight(weight, bias, groups, transposed=True)
        y = fn(_to_parts(xb, groups), w, b, stride, padding, output_padding, groups, dilation)
        out = _from_parts(y, groups)
    return out.squeeze(0) if unbatched else out


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
    convolutions; Trabelsi et al., ICLR 2018, Sec. 3.2), computed as ONE real convolution with
    the real block kernel ``[[A, -B], [B, A]]`` (per group), the equal-FLOP real convolution with
    twice the channels. It reads the input in place: the real view of ``x`` with the last axis
    interleaved (``[x_r(0), x_i(0), x_r(1), ...]``, length ``2L``) is convolved with the block
    kernel's taps interleaved the same way at twice the stride on that axis, which gives the
    output channels ``[y_r; y_i]``; one copy packs them back to complex. A dilated last axis or a
    string ``padding`` uses the repacked ``[x_r; x_i]`` input instead (one more copy). Torch's
    native complex convolution (three real convolutions by Gauss's trick plus temporaries)
    measured slower (``benchmarks/RESULTS.md``).
    ``padding``/``stride``/``dilation``/``groups`` as ``torch.nn.functional.conv1d``;
    ``padding_mode`` one of 'zeros', 'reflect', 'replicate', 'circular' (non-zero modes pad
    with ``F.pad`` first, as ``torch.nn.Conv1d`` does). The same block scheme serves
    :func:`conv2d`, :func:`conv3d` and the transposed convolutions.
    """
    return _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, 1)


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
    return _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, 2)


def conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple | str = 0,
    dilation: int | tuple = 1,
    groups: int = 1,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    r"""Complex 3-D cross-correlation on ``(B, C_in, D, H, W)``; see :func:`conv1d` (one real
    ``conv3d`` with the block kernel; torch's native complex ``conv3d`` gives the same values
    and is the test reference, see ``benchmarks/RESULTS.md`` for the speed of both)."""
    return _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, 3)


def conv_transpose1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple = 0,
    output_padding: int | tuple = 0,
    groups: int = 1,
    dilation: int | tuple = 1,
) -> torch.Tensor:
    r"""Complex 1-D transposed convolution on ``(B, C_in, L)`` with ``weight``
    ``(C_in, C_out/groups, k)``, arguments in the order of
    ``torch.nn.functional.conv_transpose1d``.

    The adjoint (not conjugated) of :func:`conv1d`'s linear map in ``x``: with :math:`W = A + iB`,
    :math:`y = (A^\top \ast x_r - B^\top \ast x_i) + i (B^\top \ast x_r + A^\top \ast x_i) + b`,
    computed as ONE real transposed convolution with twice the channels and the block kernel
    ``[[A, B], [-B, A]]`` (rows: input parts ``x_r``, ``x_i``): the input is repacked to
    ``[x_r; x_i]`` channels (one copy) and, with the kernel's taps interleaved on the last axis
    at twice the stride, the output lands on the interleaved real view of the complex result
    (no copy; the bias is added in place), the mirror of :func:`conv1d`'s layout. This is faster
    than torch's native complex ``conv_transpose1d`` (about 2x, ``benchmarks/RESULTS.md``),
    which gives the same values (the test reference).
    """
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, 1)


def conv_transpose2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple = 0,
    output_padding: int | tuple = 0,
    groups: int = 1,
    dilation: int | tuple = 1,
) -> torch.Tensor:
    r"""Complex 2-D transposed convolution on ``(B, C_in, H, W)``; see
    :func:`conv_transpose1d`."""
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, 2)


def conv_transpose3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple = 0,
    output_padding: int | tuple = 0,
    groups: int = 1,
    dilation: int | tuple = 1,
) -> torch.Tensor:
    r"""Complex 3-D transposed convolution on ``(B, C_in, D, H, W)``; see
    :func:`conv_transpose1d`."""
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, 3)
