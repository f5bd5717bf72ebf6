"""Complex 1-D, 2-D and 3-D convolutions and transposed convolutions, each as one real
convolution with a block kernel.

- 2-D and 3-D: on the channels-last real view. In a channels-last complex tensor
  (``torch.channels_last``, ``torch.channels_last_3d``) the complex values of one position are
  contiguous over the channels, so its real view is a channels-last real tensor ``(N, 2C, *S)``
  with channels ``[channel][part]`` (:func:`~cplxnet.functional.grid_views.cl_real_view`). The
  real convolution runs on that view with the block kernel in the same channel order and its
  channels-last output is viewed back as complex. A channels-last input (or weight: torch's
  rule) gives a channels-last output and no copy of the data; a contiguous one is converted in
  and the output converted back (one copy each way, as the planar layout needs too), which
  measured 0.84-0.93x the time of the planar layout below in ``benchmarks/grid_layers.py``
  (``benchmarks/RESULTS.md``) and 0.57-0.94x in side runs at the U-Net's sizes: torch's CPU
  convolutions run channels-last without their own internal reordering.
- 1-D (no channels-last format): the planar real ``(N, 2C, L)`` (channels
  ``[group][part][channel]``), one copy in and one out.
- Transposed convolutions with non-overlapping windows on a contiguous input (a U-Net's
  upsampling, every rank): one complex GEMM per sample and one copy out
  (:func:`non_overlapping`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._utils import is_transformed, without_autocast
from .grid_views import through_channels_last

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
    if bias is None:
        return w, None
    g_out = bias.shape[0] // groups
    bb = torch.view_as_real(bias.resolve_conj()).reshape(groups, g_out, 2)
    bb = bb.movedim(-1, 1).reshape(-1)
    return w, bb


def _interleaved_weight(weight: torch.Tensor, bias: torch.Tensor | None, transposed: bool = False):
    """Real block kernel of complex ``weight`` with channels ordered ``[channel][part]`` on
    both sides (the channels-last layout): ``(2 C_out, 2 C_in/g, *k)``, or for a transposed
    convolution ``(2 C_in, 2 C_out/g, *k)``; ``bias`` ``(C_out,)`` as ``(2 C_out,)``."""
    a, b = weight.real, weight.imag
    if transposed:  # rows are input channels: x_r feeds (A, B), x_i feeds (-B, A)
        rows = (torch.stack([a, b], 2), torch.stack([-b, a], 2))
    else:  # rows are output channels: y_r = A x_r - B x_i, y_i = B x_r + A x_i
        rows = (torch.stack([a, -b], 2), torch.stack([b, a], 2))
    w = torch.stack(rows, 1).reshape(2 * weight.shape[0], 2 * weight.shape[1], *weight.shape[2:])
    return w, None if bias is None else torch.view_as_real(bias.resolve_conj()).reshape(-1)


def _channels_last_conv(fn, x, weight, bias, transposed, *args):
    """The real convolution ``fn`` of complex ``x`` ``(N, C, *S)`` (or unbatched ``(C, *S)``)
    on its channels-last real view (see the module docstring); the output channels-last when
    :func:`_keeps_channels_last` says torch would keep that format, else contiguous."""
    unbatched = x.dim() == weight.dim() - 1
    xb = x.unsqueeze(0) if unbatched else x
    keep = _keeps_channels_last(xb, weight)
    w, b = _interleaved_weight(weight, bias, transposed)
    y = through_channels_last(lambda r: fn(r, w, b, *args), xb, keep)
    return y.squeeze(0) if unbatched else y


def _strides_like_channels_last(t: torch.Tensor) -> bool:
    """Whether torch reads the strides of 4-D or 5-D ``t`` as channels-last (its
    ``suggest_memory_format``): the strides grow in the order C, then the spatial axes from the
    last, then N, each at least the extent of the one before, with ties (a tensor that is both
    contiguous and channels-last, as one with a single channel) read as contiguous unless its
    strides were laid out channels-last."""
    shape, strides = t.shape, t.stride()
    if len(shape) not in (4, 5) or strides[1] == 0:
        return False
    low = 0
    for d in (1, *range(len(shape) - 1, 1, -1), 0):
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * max(shape[d], 1)
    return True


def _keeps_channels_last(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Torch's rule for the output format of its convolutions: channels-last when the strides
    of the batched input (an unbatched one unsqueezed, whose batch stride rules it out) or of
    the weight read as channels-last (:func:`_strides_like_channels_last`). Tested against
    torch's native complex convolutions for every 2-D case; for 3-D, torch 2.13's CPU kernels
    return a contiguous output in some of these cases (complex128; complex64 with a batch of
    one or unbatched, in one group), where this rule keeps the channels-last format."""
    return _strides_like_channels_last(x) or _strides_like_channels_last(weight)


def _to_parts(x: torch.Tensor, groups: int) -> torch.Tensor:
    """``(B, C, *S)`` complex -> ``(B, 2C, *S)`` real, channels ``[group][part][channel]``."""
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    xr = (
        torch.view_as_real(x.resolve_conj())
        .reshape(n, groups, c // groups, *spatial, 2)
        .movedim(-1, 2)
    )
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


def _check_operands(x, weight, bias, groups, nd: int, transposed: bool) -> None:
    """torch's checks of a convolution's operands, worded for the complex sizes (the kernels see
    twice the channels of the real parts): ``weight`` and ``bias`` of ``x``'s complex dtype,
    ``x`` of ``nd + 1`` or ``nd + 2`` dims with the channels the weight expects, ``bias`` of one
    entry per output channel."""
    name = f"conv{'_transpose' if transposed else ''}{nd}d"
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != x.dtype:
            raise RuntimeError(
                f"{name}: input is {x.dtype} but {what} is {t.dtype}; give both one complex dtype"
            )
    if x.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(
            f"{name}: expected {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got input "
            f"of size {list(x.shape)}"
        )
    channels = x.shape[-nd - 1]
    expected = weight.shape[0] if transposed else weight.shape[1] * groups
    if channels != expected:
        raise RuntimeError(
            f"{name}: given groups={groups}, weight of size {list(weight.shape)}, expected input "
            f"{list(x.shape)} to have {expected} channels, but got {channels} channels instead"
        )
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise RuntimeError(
            f"{name}: given weight of size {list(weight.shape)}, expected bias to be 1-D with "
            f"{out_channels} elements, but got bias of size {list(bias.shape)} instead"
        )


def _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, nd):
    if x.is_complex():
        _check_operands(x, weight, bias, groups, nd, False)
    if padding_mode != "zeros":
        x = F.pad(x, _pad_widths(padding, weight.shape[2:], dilation, nd), mode=padding_mode)
        padding = 0
    fn = _REAL_CONV[nd]
    if not x.is_complex():
        return fn(x, weight, bias, stride, padding, dilation, groups)
    if nd > 1 and not is_transformed():  # torch.func transforms take the block form below
        return _channels_last_conv(fn, x, weight, bias, False, stride, padding, dilation, groups)
    unbatched = x.dim() == nd + 1
    xb = x.unsqueeze(0) if unbatched else x
    w, b = _block_weight(weight, bias, groups)
    out = _from_parts(fn(_to_parts(xb, groups), w, b, stride, padding, dilation, groups), groups)
    return out.squeeze(0) if unbatched else out


def _is_one(v) -> bool:
    return all(e == 1 for e in ((v,) if isinstance(v, int) else v))


def _is_zero(v) -> bool:
    return not any((v,) if isinstance(v, int) else v)


def non_overlapping(x, weight, stride, padding, output_padding, groups, dilation) -> bool:
    """A complex transposed convolution of batched (an unbatched input unsqueezed), contiguous
    ``x`` whose windows do not overlap: ``stride`` = kernel size on every axis, no padding,
    output padding or dilation, one group (each input position writes its own block of
    outputs: a U-Net's upsampling)."""
    nd = weight.dim() - 2
    k = tuple(weight.shape[2:])
    s = (stride,) * nd if isinstance(stride, int) else tuple(stride)
    return (
        x.dim() == nd + 2 and x.is_contiguous() and groups == 1 and s == k
        and _is_zero(padding) and _is_zero(output_padding) and _is_one(dilation)
        and x.shape[1] == weight.shape[0]
    )  # fmt: skip


def _conv_transpose_gemm(x: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor:
    """:func:`non_overlapping` transposed convolution as ONE complex GEMM per sample: with
    ``x`` ``(B, C, *S)`` read as ``(B, C, prod S)`` (no copy) and ``W`` ``(C, C_out, *k)`` as
    ``(C, C_out prod k)``, ``Y = W^T x`` is ``(B, C_out, *k, *S)``, permuted to
    ``y[b, o, s_1 k_1 + j_1, ...] = sum_c x[b, c, s] W[c, o, j] + bias[o]`` (one copy out)."""
    n, c, *sp = x.shape
    co, *k = weight.shape[1:]
    nd = len(sp)
    y = torch.matmul(weight.flatten(1).mT, x.flatten(2)).view(n, co, *k, *sp)
    y = y.permute(0, 1, *(d for i in range(nd) for d in (2 + nd + i, 2 + i)))
    y = y.reshape(n, co, *(a * b for a, b in zip(sp, k)))
    return y if bias is None else y + bias.view(co, *[1] * nd)


def _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, nd):
    fn = _REAL_CONV_T[nd]
    if not x.is_complex():
        return fn(x, weight, bias, stride, padding, output_padding, groups, dilation)
    _check_operands(x, weight, bias, groups, nd, True)
    unbatched = x.dim() == nd + 1
    xb = x.unsqueeze(0) if unbatched else x
    weight_cl = nd > 1 and _strides_like_channels_last(weight)
    if not weight_cl and non_overlapping(
        xb, weight, stride, padding, output_padding, groups, dilation
    ):
        out = _conv_transpose_gemm(xb, weight, bias)
    elif nd > 1 and not is_transformed():
        args = (stride, padding, output_padding, groups, dilation)
        return _channels_last_conv(fn, x, weight, bias, True, *args)
    else:
        w, b = _block_weight(weight, bias, groups, transposed=True)
        y = fn(_to_parts(xb, groups), w, b, stride, padding, output_padding, groups, dilation)
        out = _from_parts(y, groups)
    return out.squeeze(0) if unbatched else out


@without_autocast
def conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple | str = 0,
    dilation: int | tuple = 1,
    groups: int = 1,
    *,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    r"""Complex 1-D cross-correlation :math:`y = W \star x + b` on ``(B, C_in, L)``.

    With :math:`x = x_r + i x_i` and :math:`W = A + iB`:
    :math:`y = (A \star x_r - B \star x_i) + i (B \star x_r + A \star x_i) + b` (four real
    convolutions; Trabelsi et al., ICLR 2018, Sec. 3.2), computed as ONE real convolution with
    twice the channels: the input is repacked to ``[x_r; x_i]`` channels (one copy), the kernel is
    the real block ``[[A, -B], [B, A]]`` (per group) and the output is packed back (one copy).
    This is the equal-FLOP real convolution plus two memory passes (measured 1.06x the real
    ``Conv1d(2C, 2C, 3)``, forward+backward, C = 256, batch 32, length 128, 2 threads), whereas
    torch's native complex convolution (three real convolutions by Gauss's trick plus many
    temporaries) took 1.3x as long as this version (``benchmarks/layers.py``).
    ``padding``/``stride``/``dilation``/``groups`` as ``torch.nn.functional.conv1d``;
    ``padding_mode`` (keyword-only) one of 'zeros', 'reflect', 'replicate', 'circular'
    (non-zero modes pad with ``F.pad`` first, as ``torch.nn.Conv1d`` does). The same block scheme
    serves :func:`conv2d`, :func:`conv3d` and the transposed convolutions.
    """
    return _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, 1)


@without_autocast
def conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple | str = 0,
    dilation: int | tuple = 1,
    groups: int = 1,
    *,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    r"""Complex 2-D cross-correlation on ``(B, C_in, H, W)``; see :func:`conv1d`."""
    return _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, 2)


@without_autocast
def conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple = 1,
    padding: int | tuple | str = 0,
    dilation: int | tuple = 1,
    groups: int = 1,
    *,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    r"""Complex 3-D cross-correlation on ``(B, C_in, D, H, W)``; see :func:`conv1d` (one real
    ``conv3d`` with the block kernel; torch's native complex ``conv3d`` gives the same values
    and is the test reference, see ``benchmarks/RESULTS.md`` for the speed of both)."""
    return _conv(x, weight, bias, stride, padding, dilation, groups, padding_mode, 3)


@without_autocast
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
    ``[[A, B], [-B, A]]`` (rows: input parts ``x_r``, ``x_i``), plus one repacking copy each way,
    as :func:`conv1d`. Equals torch's native complex ``conv_transpose1d`` (the test reference).
    Non-overlapping windows on a contiguous input, at every rank (``stride`` = kernel size, no
    padding, output padding or dilation, one group: a U-Net's upsampling), are instead ONE
    complex GEMM per sample, ``W^T`` ``(C_out prod k, C_in)`` times the input read in place as
    ``(C_in, prod S)``, and one permuting copy of the output (:func:`non_overlapping`;
    ``benchmarks/grid_layers.py``: 0.99-1.04x the real layer of twice the channels at every
    rank, against 1.08-1.17x for the block kernel in 2-D and 3-D).
    """
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, 1)


@without_autocast
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


@without_autocast
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
