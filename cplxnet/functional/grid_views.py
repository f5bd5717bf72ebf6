"""Real views of complex grids ``(*, *S)`` on which torch's real pooling and interpolation
kernels run: the contiguous parts, the channels-last ``(M, 2, *S)`` view of the interleaved
layout, and 8-byte copies of complex64 entries as float64; plus the non-overlapping block mean
on the interleaved layout. Which view each layer uses is the one measured fastest in
``benchmarks/grid_layers.py`` (``benchmarks/RESULTS.md``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from .._utils import (
    as_complex,
    eager_complex,
    function_output,
    grad_via_composed,
    is_transformed,
    join,
    parts,
    real_view,
)

__all__: list[str] = []


def check_rank(x: torch.Tensor, nd: int) -> None:
    """The ValueError of a grid op of rank ``nd`` unless ``x`` is ``(B, C, *S)`` or ``(C, *S)``."""
    if x.dim() not in (nd + 1, nd + 2):
        raise ValueError(
            f"expected a ({nd + 2}-D) batched or ({nd + 1}-D) unbatched input for a {nd}-D grid "
            f"operation, got shape {tuple(x.shape)}"
        )


def is_channels_last(x: torch.Tensor, nd: int, *, complex_only: bool = True) -> bool:
    """Whether ``x`` (complex, or any dtype when not ``complex_only``) is a batched
    ``(N, C, *S)`` grid of rank ``nd`` (2 or 3) in torch's channels-last format and not also
    contiguous (one channel, or sizes of 1, make it both); an unbatched ``(C, *S)`` input never
    is; inside ``torch.func`` transforms, which cannot query the format, it is read as
    contiguous."""
    if (
        is_transformed()
        or nd not in (2, 3)
        or x.dim() != nd + 2
        or (complex_only and not x.is_complex())
        or x.is_contiguous()
    ):
        return False
    return x.is_contiguous(memory_format=cl_format(nd))


def cl_format(nd: int) -> torch.memory_format:
    """Torch's channels-last memory format of a batched ``nd``-D grid (2 or 3)."""
    return torch.channels_last if nd == 2 else torch.channels_last_3d


def through_channels_last(fn: Callable, x: torch.Tensor, keep: bool) -> torch.Tensor:
    """Real op ``fn`` (a convolution, or a per-channel pool or interpolation) of batched complex
    ``x`` on the channels-last real view of ``x`` (:func:`cl_real_view`; a contiguous ``x`` is
    converted once), the result viewed back as complex: channels-last when ``keep``, else
    converted to contiguous."""
    y = cl_complex_view(fn(cl_real_view(x.contiguous(memory_format=cl_format(x.dim() - 2)))))
    return y if keep else y.contiguous()


def cl_real_view(x: torch.Tensor) -> torch.Tensor:
    """Channels-last complex ``(N, C, *S)`` -> its real view ``(N, 2C, *S)``, itself a
    channels-last real tensor with channels ``[channel][part]`` (no copy). A per-channel real op
    (pooling, interpolation) on it acts on each part; a convolution takes its block kernel in
    that channel order."""
    nd = x.dim() - 2
    xr = real_view(x.resolve_conj()).permute(0, *range(2, nd + 2), 1, nd + 2)  # (N, *S, C, 2)
    return xr.reshape(*xr.shape[:-2], 2 * x.shape[1]).permute(0, nd + 1, *range(1, nd + 1))


def cl_complex_view(y: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`cl_real_view` for a real result ``(N, 2C, *S)``: a view when ``y`` is
    channels-last, as torch's kernels return it for a channels-last input (where one does not,
    e.g. its float64 3-D convolutions, one copy)."""
    nd = y.dim() - 2
    yt = y.permute(0, *range(2, nd + 2), 1).contiguous()  # (N, *S, 2C)
    yc = torch.view_as_complex(yt.reshape(*yt.shape[:-1], y.shape[1] // 2, 2))
    return yc.permute(0, nd + 1, *range(1, nd + 1))


def channels_last(x: torch.Tensor, nd: int) -> torch.Tensor:
    """Complex ``(*, *S)`` -> real ``(M, 2, *S)`` (``M`` = the product of the leading sizes), the
    parts as two channels of stride 1: torch's channels-last layout for 2-D and 3-D grids, no
    copy."""
    lead, spatial = x.shape[:-nd], x.shape[-nd:]
    r = torch.view_as_real(x.resolve_conj())
    return r.reshape(math.prod(lead), *spatial, 2).movedim(-1, 1)


def from_channels_last(y: torch.Tensor, like: torch.Tensor, nd: int) -> torch.Tensor:
    """Inverse of :func:`channels_last` for a result ``(M, 2, *S')``: complex ``(*, *S')``."""
    return as_complex(y.movedim(1, -1)).reshape(*like.shape[:-nd], *y.shape[2:])


def on_parts(
    fn: Callable, x: torch.Tensor, nd: int, split: bool = False, via_channels_last: bool = False
) -> torch.Tensor:
    """``fn`` (a real op acting on each channel of ``(M, C', *S)``) applied to the real and
    imaginary parts of complex ``x`` ``(*, *S)``, the result complex ``(*, *S')``.

    A channels-last ``x``: one call on :func:`cl_real_view` (no copy, the result
    channels-last). ``via_channels_last`` (batched 2-D and 3-D grids): a contiguous ``x`` is
    converted to channels-last, ``fn`` called once on that real view and the result converted
    back (one copy each way), for the kernels whose channels-last form measured faster than
    their contiguous one by more than the copies cost. Else by default ONE call on the
    :func:`channels_last` view (no copy). ``split``: two calls on the contiguous parts
    (:func:`cplxnet._utils.parts`, one copy each way), for the kernels that measured slower on
    that view than the copies cost. A real ``x`` is passed to ``fn`` unchanged."""
    check_rank(x, nd)
    if not x.is_complex():
        return fn(x)
    if is_channels_last(x, nd):  # one call on the real view, the result channels-last as torch's
        return through_channels_last(fn, x, keep=True)
    if via_channels_last and nd in (2, 3) and x.dim() == nd + 2 and not is_transformed():
        return through_channels_last(fn, x, keep=False)
    if split:
        if eager_complex(x):
            re, im = parts(x)
            return join(fn(re), fn(im))
        return torch.complex(fn(x.real), fn(x.imag))
    return from_channels_last(fn(channels_last(x, nd)), x, nd)


# ---- the mean over non-overlapping blocks ----------------------------------------------------
def _block_sum(r: torch.Tensor, k: Sequence[int]) -> torch.Tensor:
    """Sums of real ``r`` ``(M, *S, 2)`` over blocks ``k`` (each ``S_i`` divisible by ``k_i``):
    one axis at a time, the ``k_i`` entries of each block added as strided slices (contiguous
    runs of ``2 prod(S_{i+1:})`` values), the reduced axis first."""
    for i, ki in enumerate(k):
        if ki == 1:
            continue
        ax = 1 + i
        r = r.unflatten(ax, (r.shape[ax] // ki, ki))
        out = r.select(ax + 1, 0) + r.select(ax + 1, 1)
        for j in range(2, ki):
            out.add_(r.select(ax + 1, j))
        r = out
    return r


def _expand_blocks(g: torch.Tensor, k: Sequence[int]) -> torch.Tensor:
    """Each entry of complex ``g`` ``(M, *S')`` repeated over its block ``k``: ``(M, *S' k)``,
    one copy of an expanded view (measured faster than torch's nearest upsampling)."""
    view = g.reshape([g.shape[0]] + [d for s in g.shape[1:] for d in (s, 1)])
    shape = [g.shape[0]] + [d for s, ki in zip(g.shape[1:], k) for d in (s, ki)]
    return view.expand(shape).reshape(g.shape[0], *[s * ki for s, ki in zip(g.shape[1:], k)])


def _block_mean_composed(x: torch.Tensor, k: tuple, divisor: float) -> torch.Tensor:
    nd = len(k)
    m = math.prod(x.shape[:-nd])
    blocks = x.reshape(m, *[d for s, ki in zip(x.shape[-nd:], k) for d in (s // ki, ki)])
    out = blocks.sum(tuple(range(2, 2 * nd + 1, 2))) / divisor
    return out.reshape(*x.shape[:-nd], *out.shape[1:])


def _stand_in(g: torch.Tensor, shape) -> torch.Tensor:
    """A zero input of ``shape`` for the composed form of a linear map in a double backward:
    its vector-Jacobian product does not depend on the input, which is therefore not saved."""
    return g.new_zeros(shape).requires_grad_()


class _BlockMean(torch.autograd.Function):
    """Complex ``x`` ``(*, *S)`` -> the sums over blocks ``k`` divided by ``divisor``, computed
    on the interleaved real view (no copy in); the backward repeats ``g / divisor`` over each
    block (:func:`_expand_blocks`)."""

    @staticmethod
    def forward(ctx, x, k, divisor):  # noqa: D102 (autograd.Function)
        ctx.k, ctx.divisor, ctx.shape = k, divisor, x.shape
        nd = len(k)
        r = torch.view_as_real(x.resolve_conj()).reshape(-1, *x.shape[-nd:], 2)
        y = _block_sum(r, k)
        y = y / divisor if y is r else y.div_(divisor)
        out = torch.view_as_complex(y.contiguous()).reshape(*x.shape[:-nd], *y.shape[1:-1])
        return function_output(out, x)

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        if torch.is_grad_enabled():  # double backward: the composed form (a linear map)
            x = _stand_in(g, ctx.shape)
            return (*grad_via_composed(_block_mean_composed, (x, ctx.k, ctx.divisor), ctx, g),)
        nd = len(ctx.k)
        gm = (g / ctx.divisor).reshape(-1, *g.shape[-nd:])
        return _expand_blocks(gm, ctx.k).reshape(ctx.shape), None, None


def block_mean(x: torch.Tensor, k: Sequence[int], divisor: float) -> torch.Tensor:
    """Complex ``x`` ``(*, *S)`` -> the sum over each block ``k`` (the last ``len(k)`` axes; the
    trailing ``S_i mod k_i`` entries, if any, dropped as by a floor-mode pool) divided by
    ``divisor``: a pool with ``kernel_size == stride == k`` and no padding, computed on the
    interleaved layout. For eager complex ``x`` (see :func:`pool_blocks`)."""
    k = tuple(int(ki) for ki in k)
    nd = len(k)
    keep = [s - s % ki for s, ki in zip(x.shape[-nd:], k)]
    if keep != list(x.shape[-nd:]):
        x = x[(..., *[slice(0, n) for n in keep])]
    return _BlockMean.apply(x, k, float(divisor))


def sizes_of(v, nd: int) -> tuple:
    """``v`` as ``nd`` sizes (an int repeated, a sequence as given); ``()`` for anything else,
    which the callers treat as "not a fast path" (torch then reports it)."""
    if isinstance(v, int):
        return (v,) * nd
    return tuple(v) if isinstance(v, (tuple, list, torch.Size)) else ()


def pool_blocks(x: torch.Tensor, nd: int, kernel_size, stride, padding, ceil_mode) -> tuple | None:
    """The blocks ``k`` of a pool of ``x`` that is a :func:`block_mean` (eager complex ``x``,
    ``stride`` = ``kernel_size`` <= the input size, no padding, floor mode or sizes divisible by
    ``k``), else None (the caller runs torch's kernel, which also reports bad arguments)."""
    if not eager_complex(x) or x.dim() not in (nd + 1, nd + 2) or is_channels_last(x, nd):
        return None
    k = sizes_of(kernel_size, nd)
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride
    s, p, spatial = sizes_of(s, nd), sizes_of(padding, nd), x.shape[-nd:]
    if len(k) != nd or s != k or any(p) or any(not 0 < ki <= n for ki, n in zip(k, spatial)):
        return None
    if ceil_mode and any(n % ki for ki, n in zip(k, spatial)):
        return None
    return k


def adaptive_blocks(x: torch.Tensor, nd: int, output_size) -> tuple | None:
    """The blocks ``k`` of an adaptive average pool of ``x`` to ``output_size`` that is a
    :func:`block_mean` (eager complex ``x``, every size divisible by its output size), else
    None."""
    if not eager_complex(x) or x.dim() not in (nd + 1, nd + 2) or is_channels_last(x, nd):
        return None
    out = sizes_of(output_size, nd)
    if len(out) != nd:
        return None
    spatial = x.shape[-nd:]
    out = tuple(n if o is None else o for o, n in zip(out, spatial))
    if any(not 0 < o <= n or n % o for o, n in zip(out, spatial)):
        return None
    return tuple(n // o for o, n in zip(out, spatial))


#: Largest output size of a :func:`separable_mean` axis: its matrix products cost about
#: ``2 out`` multiply-adds per input value. Forward+backward on one thread against torch's
#: kernel on the parts (``(8, 32, 64, 64)`` to ``o x o``; ``(2, 32, 16, 16, 16)`` to ``o^3``):
#: 2-D 1.33/1.70/1.80/1.20x the real layer against 2.10/3.22/2.99/1.19x at o = 5/7/12/20,
#: 3-D 1.51/0.70/0.45x against 1.92/1.29/1.19x at o = 3/7/12; 1-D (one product with the
#: half-zero :math:`A^T \otimes I_2`) measured slower than the parts at every size: it keeps them.
SEPARABLE_MAX_OUT = 16


def adaptive_sizes(x: torch.Tensor, nd: int, output_size) -> tuple | None:
    """``output_size`` of an adaptive average pool of eager complex contiguous ``x`` of rank
    ``nd`` >= 2 as ``nd`` sizes (``None`` entries: the input's size) when it takes
    :func:`separable_mean` (every size at most :data:`SEPARABLE_MAX_OUT`), or None where the
    caller keeps torch's kernel (1-D; tracing; other strides: torch's channels-last kernel on
    the real view of a channels-last input measured 1.7x faster than the matrix products;
    bad sizes, which torch reports)."""
    if nd < 2 or not eager_complex(x) or x.dim() not in (nd + 1, nd + 2):
        return None
    if not x.is_contiguous():
        return None
    out = sizes_of(output_size, nd)
    if len(out) != nd:
        return None
    out = tuple(n if o is None else o for o, n in zip(out, x.shape[-nd:]))
    if any(isinstance(o, bool) or not isinstance(o, int) or not 1 <= o <= SEPARABLE_MAX_OUT
           for o in out):  # fmt: skip
        return None
    return None if 0 in x.shape[-nd:] else out


def adaptive_mean_matrix(size: int, out: int, like: torch.Tensor) -> torch.Tensor:
    r"""The ``(out, size)`` matrix of torch's adaptive average over one axis: row ``i`` is
    :math:`1 / (e_i - s_i)` on torch's window :math:`[s_i, e_i)`, :math:`s_i = \lfloor i S / o
    \rfloor`, :math:`e_i = \lceil (i + 1) S / o \rceil`; real, on ``like``'s device."""
    i = torch.arange(out, device=like.device)
    start = torch.div(i * size, out, rounding_mode="floor")
    end = torch.div((i + 1) * size + out - 1, out, rounding_mode="floor")
    pos = torch.arange(size, device=like.device)
    inside = (pos >= start[:, None]) & (pos < end[:, None])
    return inside.to(like.dtype) / (end - start).to(like.dtype)[:, None]


def separable_mean(x: torch.Tensor, out: Sequence[int]) -> torch.Tensor:
    r"""Adaptive average pooling of contiguous complex ``x`` ``(*, *S)`` to sizes ``out``, as a
    product of one averaging matrix per axis (:func:`adaptive_mean_matrix`; the windows are
    products of per-axis windows, so the pool is separable):

    .. math::
        y = A_1 \times_1 A_2 \times_2 \cdots\, x,

    computed on the interleaved real view ``(*, *S, 2)`` without copying the input: an axis
    followed by others is one batched matrix product ``A_d @ (P, S_d, Q)`` (the parts ride
    along in ``Q``), the last axis one product with :math:`A^T \otimes I_2` on rows of
    :math:`2 S` interleaved values. Axes whose size is kept are skipped; each step's output,
    smaller when pooling, is the next one's input. The gradient is the transposed products
    (autograd)."""
    r = real_view(x.resolve_conj())  # (*, *S, 2)
    first = r.dim() - len(out) - 1  # the position of S_1
    shape = list(r.shape)
    for d in range(len(out)):
        ax = first + d
        if out[d] == shape[ax]:
            continue
        A = adaptive_mean_matrix(shape[ax], out[d], r)
        rows, size, cols = math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1 :])
        if cols == 2:  # the last axis of the interleaved layout
            K = torch.kron(A, torch.eye(2, dtype=r.dtype, device=r.device)).mT  # A^T (x) I_2
            r = r.reshape(rows, 2 * size) @ K
        else:
            r = torch.matmul(A, r.reshape(rows, size, cols))
        shape[ax] = out[d]
        r = r.reshape(shape)
    return as_complex(r)


# ---- nearest upsampling by whole factors --------------------------------------------------------
def _repeat_composed(x: torch.Tensor, k: tuple) -> torch.Tensor:
    nd = len(k)
    out = _expand_blocks(x.reshape(-1, *x.shape[-nd:]), k)
    return out.reshape(*x.shape[:-nd], *out.shape[1:])


class _BlockRepeat(torch.autograd.Function):
    """Complex ``x`` ``(*, *S)`` -> each entry repeated over a block ``k`` (:func:`_expand_blocks`);
    the backward sums the gradient over each block on the interleaved layout
    (:func:`_block_sum`)."""

    @staticmethod
    def forward(ctx, x, k):  # noqa: D102 (autograd.Function)
        ctx.k, ctx.shape = k, x.shape
        return function_output(_repeat_composed(x.resolve_conj(), k), x)

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        if torch.is_grad_enabled():  # double backward: the composed form (a linear map)
            return (*grad_via_composed(_repeat_composed, (_stand_in(g, ctx.shape), ctx.k), ctx, g),)
        nd = len(ctx.k)
        r = torch.view_as_real(g.resolve_conj()).reshape(-1, *g.shape[-nd:], 2)
        y = _block_sum(r, ctx.k)
        y = y.clone() if y is r else y
        return torch.view_as_complex(y.contiguous()).reshape(ctx.shape), None


_POWERS_OF_TWO = (1, 2, 4, 8, 16)


def nearest_blocks(x: torch.Tensor, size, scale_factor, mode, align_corners, recompute, antialias):
    """The factors ``k`` (powers of two up to 16) of a ``mode='nearest'`` interpolation of eager
    complex ``x`` ``(B, C, *S)`` to sizes ``k_i S_i`` where torch's source index
    ``floor(j * scale)`` is exactly ``j // k_i`` (the scale torch uses, ``1 / scale_factor`` or
    ``S_i / out_i``, is ``1 / k_i``: exact in float); else None (the caller runs torch's kernel,
    which also reports bad arguments)."""
    nd = x.dim() - 2
    if mode != "nearest" or antialias or align_corners is not None or not eager_complex(x):
        return None
    if is_channels_last(x, nd):  # torch's kernel keeps the format
        return None
    spatial = x.shape[2:]
    if size is not None and scale_factor is None and recompute is None:
        out = sizes_of(size, nd)
    elif scale_factor is not None and size is None:
        sf = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else scale_factor
        sf = tuple(sf)
        if len(sf) != nd:
            return None
        if not recompute:  # torch's scale is 1 / scale_factor
            return tuple(int(s) for s in sf) if all(s in _POWERS_OF_TWO for s in sf) else None
        out = tuple(math.floor(n * float(s)) for n, s in zip(spatial, sf))
    else:
        return None
    if len(out) != nd or any(type(o) is not int for o in out):
        return None
    k = tuple(o // n if o % n == 0 else 0 for o, n in zip(out, spatial))
    return k if all(ki in _POWERS_OF_TWO for ki in k) else None


def block_repeat(x: torch.Tensor, k: Sequence[int]) -> torch.Tensor:
    """Complex ``x`` ``(*, *S)`` with each entry repeated over a block ``k`` (the last
    ``len(k)`` axes): nearest upsampling by whole factors, one copy out, the backward a sum
    over each block on the interleaved layout."""
    return _BlockRepeat.apply(x, tuple(int(ki) for ki in k))


_GRID = {1: "L", 2: "H, W", 3: "D, H, W"}


def check_grid(x: object, owner: str, nd: int | None = None) -> None:
    """A complex or floating tensor (``(B, C, *S)`` or ``(C, *S)`` with ``nd`` spatial sizes if
    ``nd`` is given), else one error naming ``owner`` and the expected input."""
    if not isinstance(x, torch.Tensor) or not (x.is_complex() or x.is_floating_point()):
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{owner}: input must be a complex or floating tensor, got {got}")
    if nd is not None and x.dim() not in (nd + 1, nd + 2):
        raise ValueError(
            f"{owner}: expected input (B, C, {_GRID[nd]}) or unbatched (C, {_GRID[nd]}), "
            f"got shape {tuple(x.shape)}"
        )
