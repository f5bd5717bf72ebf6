r"""Complex normalisation: split and whitening layer norm, RMS norm (the whitening batch,
instance and group norms are in :mod:`cplxnet.functional.whitening`).

Whitening (Trabelsi et al., "Deep Complex Networks", ICLR 2018, Sec. 3.5) treats each complex
feature as a 2-vector :math:`(x, y)` and maps the centred data through the inverse square root of
its 2x2 covariance :math:`V = [[V_{rr}, V_{ri}], [V_{ri}, V_{ii}]]`, so the output has identity
covariance (real and imaginary parts decorrelated, each of unit variance). Any real 2x2 map of
:math:`(x, y)` is a widely linear map :math:`\alpha z + \beta \bar z` of :math:`z = x + iy`.
The 2x2 inverse square root has a closed form (:func:`inv_sqrt_2x2`), evaluated on the
trace-normalised covariance so that it stays finite for any covariance the dtype holds (the
second moments are computed in the input's precision: moduli up to about 1e19 in complex64);
``eps`` is added to both diagonal entries of :math:`V`.

Layouts (eager): the split layer norm copies the input into two contiguous part planes
(:func:`cplxnet.functional.interleaved.part_planes`, one copy) and runs torch's fused real
``native_layer_norm`` and its backward on each (:class:`_LayerNormSplit`);
the whitening norms copy it once into a grouped layout (each row's real parts followed by its
imaginary parts) on which the moments and the 2x2 whitening are batched matrix products, with a
hand-written backward (:class:`_WhitenAffine`). torch's element-wise kernels do not vectorise on
the stride-2 views ``x.real``, ``x.imag`` or against per-element scalars broadcast over
``view_as_real``'s last dimension of size 2, hence the copies. With
:func:`cplxnet.functional.use_compiled_kernels` the layer norms of complex64 inputs run as
compiled kernels on the interleaved data instead (:mod:`cplxnet.functional.compiled`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .._utils import (
    as_complex,
    eager_complex,
    function_output,
    grad_via_composed,
    join,
    pack,
    parts,
    runs_composed,
    without_autocast,
)
from . import compiled as _kernels
from . import interleaved as _il
from .cov2x2 import (
    inv_sqrt_2x2,
    inv_sqrt_2x2_factors,
    inv_sqrt_2x2_from_factors,
    inv_sqrt_2x2_grad,
    inv_sqrt_2x2_vjp,
)

__all__ = ["layer_norm", "rms_norm", "whiten", "inv_sqrt_2x2"]


def whiten(c: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, eps: float) -> torch.Tensor:
    r"""Whiten centred complex data ``c`` given its second moments (see the module docstring).

    Args:
        c: centred complex data.
        m1: :math:`E|c|^2` (real), broadcastable to ``c``.
        m2: :math:`E c^2` (complex pseudo-variance), broadcastable to ``c``.
        eps: added to both diagonal entries of the 2x2 covariance.
    """
    wrr, wri, wii = inv_sqrt_2x2(0.5 * (m1 + m2.real), 0.5 * m2.imag, 0.5 * (m1 - m2.real), eps)
    # the real 2x2 map W as the widely linear alpha c + beta conj(c)
    alpha = 0.5 * (wrr + wii)
    beta = torch.complex(0.5 * (wrr - wii), wri)
    return c * alpha + c.conj() * beta


def _to_groups(x: torch.Tensor, shape3: tuple[int, int, int]) -> torch.Tensor:
    """Complex ``x`` reshaped to ``(A, G, K)`` -> real ``(A, G, 2, K)``: each row of ``K``
    real parts followed by its ``K`` imaginary parts, contiguous (one copy)."""
    p = torch.view_as_real(x.resolve_conj().reshape(shape3)).transpose(-1, -2)
    return p.clone(memory_format=torch.contiguous_format)  # a copy even where K == 1


def _from_groups(p: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Inverse of :func:`_to_groups`: real ``(A, G, 2, K)`` -> complex of ``shape`` (one copy)."""
    return torch.complex(p[:, :, 0], p[:, :, 1]).reshape(shape)


def _inv_sqrt_mat(v: torch.Tensor, eps: float) -> torch.Tensor:
    """:func:`inv_sqrt_2x2` of the symmetric ``(G, 2, 2)`` ``v``, as a ``(G, 2, 2)`` matrix."""
    wrr, wri, wii = inv_sqrt_2x2(v[:, 0, 0], v[:, 0, 1], v[:, 1, 1], eps)
    return torch.stack([wrr, wri, wri, wii], -1).unflatten(-1, (2, 2))


def _whiten_groups(
    p: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    stats: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Whitening and 2x2 affine on the grouped real layout ``p`` = ``(A, G, 2, K)``
    (:func:`_to_groups`), composed of differentiable torch ops.

    Each group ``g`` is centred and whitened over its ``A * K`` complex entries (batch
    statistics, biased covariance) or with ``stats = (mean (1, G, 2, 1), cov (G, 2, 2))``:
    :math:`y = W_g (p - \bar p_g)`, :math:`W_g = (V_g + \epsilon I)^{-1/2}`
    (:func:`inv_sqrt_2x2`). Then ``weight`` (real ``(2, 2, K)``) and ``bias`` (real ``(2, K)``,
    the parts of the complex bias) are applied per position ``k`` in the row (the layer norm's
    features). The 2x2 products run as batched matrix products over the contiguous rows.
    Returns the output ``(A, G, 2, K)``, the mean and the covariance used."""
    if stats is None:
        n = p.shape[0] * p.shape[3]
        mean = p.mean((0, 3), keepdim=True)
        c = p - mean
        cov = (c @ c.mT).sum(0) / n
    else:
        mean, cov = stats
        c = p - mean
    return _apply_whitening(c, _inv_sqrt_mat(cov, eps), weight, bias), mean, cov


def _apply_whitening(
    c: torch.Tensor,
    w: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """``W c`` followed by the affine, on centred grouped data (see :func:`_whiten_groups`)."""
    y = w @ c
    if weight is not None:  # out_i = sum_j weight[i, j, k] y_j
        y = y[:, :, :1] * weight[:, 0] + y[:, :, 1:] * weight[:, 1]
    return y if bias is None else y + bias


class _WhitenAffine(torch.autograd.Function):
    r"""Batch-statistics whitening plus 2x2 affine (:func:`_whiten_groups`) from complex ``x``
    to complex output, with a hand-written backward.

    Forward: one copy of ``x`` into the grouped layout, the moments and the whitening as batched
    2x2 matrix products, one copy back. Backward, with :math:`c` the centred data, :math:`g_y`
    the gradient of :math:`y = W c` (after the affine's backward) and :math:`n` the entries per
    group: :math:`g_W = \sum g_y c^T` (2x2 per group), the symmetric gradient :math:`G_V` of
    the covariance from :math:`g_W` in closed form
    (:func:`~cplxnet.functional.cov2x2.inv_sqrt_2x2_grad`) on the small per-group tensors,
    :math:`g_c = W g_y + M c` with :math:`M = 2 G_V / n`, and
    :math:`g_p = g_c - \mathrm{mean}(g_c)`. Saved: the centred data and per-group
    2x2 matrices. Double backward differentiates :func:`_whiten_groups` (the same map composed
    of differentiable ops).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, shape3, eps):  # noqa: D102
        p = _to_groups(x, shape3)
        b = None if bias is None else torch.view_as_real(bias.resolve_conj()).T
        n = p.shape[0] * p.shape[3]
        mean = p.mean((0, 3), keepdim=True)
        c = p.sub_(mean)
        cov = (c @ c.mT).sum(0).div_(n)
        y = _apply_whitening(c, _inv_sqrt_mat(cov, eps), weight, b)
        ctx.shape3, ctx.eps = shape3, eps
        ctx.save_for_backward(x, weight, bias, c, cov)
        ctx.mark_non_differentiable(mean, cov)
        return function_output(_from_groups(y, x.shape), x), mean, cov

    @staticmethod
    def backward(ctx, grad, *_):  # noqa: D102
        x, weight, bias, c, cov = ctx.saved_tensors
        shape3, eps = ctx.shape3, ctx.eps
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return (
                *grad_via_composed(
                    lambda x, w, b: _whiten_composed(x, w, b, shape3, eps),
                    (x, weight, bias),
                    ctx,
                    grad,
                ),
                None,
                None,
            )
        n = c.shape[0] * c.shape[3]
        gp = _to_groups(grad, shape3)
        factors = inv_sqrt_2x2_factors(cov, eps)
        w = inv_sqrt_2x2_from_factors(factors)
        g_weight = g_bias = None
        if bias is not None and ctx.needs_input_grad[2]:
            gb = gp.sum((0, 1)).T
            g_bias = torch.complex(gb[:, 0], gb[:, 1]).reshape(bias.shape)
        if weight is None:
            gy, k1 = gp, w
            g_w = (gy @ c.mT).sum(0)
        else:  # out_i = sum_j weight[i, j] y_j per position k
            y = w @ c
            if ctx.needs_input_grad[1]:
                g_weight = torch.stack(
                    [(gp * y[:, :, :1]).sum((0, 1)), (gp * y[:, :, 1:]).sum((0, 1))], 1
                )
            gy = gp[:, :, :1] * weight[0] + gp[:, :, 1:] * weight[1]
            k1 = w
            g_w = (gy @ c.mT).sum(0)
        # V = c c^T / n with V symmetric: d/dc of <G_A, V> is 2 G_A c / n
        m = inv_sqrt_2x2_grad(factors, g_w).mul_(2.0 / n)
        gc = (k1 @ gy).add_(m @ c)
        gc -= gc.mean((0, 3), keepdim=True)
        return _from_groups(gc, x.shape), g_weight, g_bias, None, None


def _whiten_composed(x, weight, bias, shape3, eps):
    """:class:`_WhitenAffine`'s forward composed of differentiable ops (tracing, double
    backward)."""
    b = None if bias is None else torch.view_as_real(bias.resolve_conj()).T
    y, *_ = _whiten_groups(_to_groups(x, shape3), weight, b, eps)
    return _from_groups(y, x.shape)


def _whiten_affine(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    shape3: tuple[int, int, int],
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch-statistics whitening and affine of complex ``x`` viewed as ``shape3 = (A, G, K)``
    (see :func:`_whiten_groups`): through :class:`_WhitenAffine` when eager, else composed.
    Returns the output (shape of ``x``), the mean ``(1, G, 2, 1)`` and covariance ``(G, 2, 2)``."""
    if runs_composed():
        b = None if bias is None else torch.view_as_real(bias.resolve_conj()).T
        y, mean, cov = _whiten_groups(_to_groups(x, shape3), weight, b, eps)
        return _from_groups(y, x.shape), mean.detach(), cov.detach()
    return _WhitenAffine.apply(x, weight, bias, shape3, eps)


class _WhitenRowsCompiled(torch.autograd.Function):
    """Whitening layer norm of complex64 ``x`` over its last ``len(shape)`` dims as compiled
    kernels on the complex64 words (:mod:`cplxnet.functional.compiled`): one forward kernel,
    and a backward of two kernels around the per-row 2x2 algebra (the closed-form gradient
    :func:`~cplxnet.functional.cov2x2.inv_sqrt_2x2_vjp` on the small per-row tensors)."""

    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps):  # noqa: D102 (autograd.Function)
        size = math.prod(shape)
        a, b = _whiten_affine_rows(x, weight, bias, size)
        words = _kernels.as_words(x).reshape(-1, size)
        out, *stats = _kernels.kernel("whiten_rows_forward")(words, a, b, eps)
        ctx.save_for_backward(x, weight, bias, *stats)
        ctx.shape, ctx.eps = shape, eps
        return function_output(_kernels.words_to_complex(out).reshape(x.shape))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        x, weight, bias, *stats = ctx.saved_tensors
        shape, eps = ctx.shape, ctx.eps
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            out = grad_via_composed(
                lambda x, w, b: _layer_norm_whiten(x, shape, w, b, eps),
                (x, weight, bias),
                ctx,
                grad,
            )
            return (*out, None, None)
        size = math.prod(shape)
        a, _ = _whiten_affine_rows(x, weight, None, size)
        words = _kernels.as_words(x).reshape(-1, size)
        gwords = _kernels.as_words(grad).reshape(words.shape)
        wmat = inv_sqrt_2x2(*stats[2:], eps)
        s_rr, s_ri, s_ii, t0, t1 = _kernels.kernel("whiten_rows_grad_w")(
            words, gwords, a, stats, wmat
        )
        gv_rr, gv_ri, gv_ii = inv_sqrt_2x2_vjp(*stats[2:], eps, s_rr, s_ri, s_ii)
        gv = (gv_rr * (2.0 / size), gv_ri / size, gv_ii * (2.0 / size))
        gx = _kernels.kernel("whiten_rows_grad_x")(words, gwords, a, stats, wmat, gv)
        g_weight = g_bias = None
        if weight is not None and ctx.needs_input_grad[1]:
            rows = [torch.view_as_real(_kernels.words_to_complex(t).sum(0)).T for t in (t0, t1)]
            g_weight = torch.stack(rows).reshape(weight.shape)
        if bias is not None and ctx.needs_input_grad[2]:
            g_bias = grad.resolve_conj().reshape(-1, size).sum(0).reshape(bias.shape)
        return _kernels.words_to_complex(gx).reshape(x.shape), g_weight, g_bias, None, None


def _whiten_affine_rows(x, weight, bias, size):
    """2x2 gains ``(2, 2, size)`` and shifts ``(2, size)`` (real, contiguous, detached) of the
    whitening layer norm for the compiled kernels: identity and zeros where None."""
    rdt = x.real.dtype
    if weight is None:
        a = torch.eye(2, dtype=rdt, device=x.device).unsqueeze(-1).expand(2, 2, size)
    else:
        a = weight.detach().reshape(2, 2, size)
    if bias is None:
        b = torch.zeros(2, size, dtype=rdt, device=x.device)
    else:
        b = torch.view_as_real(bias.detach().resolve_conj().reshape(size)).T
    return a.contiguous(), b.contiguous()


@without_autocast
def _whiten_rows(x, shape, weight, bias, eps):
    """Whitening layer norm: the compiled kernels when they apply, else :func:`_layer_norm_whiten`
    (autocast off inside, :func:`~cplxnet._utils.without_autocast`)."""
    if _kernels.applies(x) and x.numel() > 0:
        return _WhitenRowsCompiled.apply(x, weight, bias, shape, eps)
    return _layer_norm_whiten(x, shape, weight, bias, eps)


def _layer_norm_whiten(x, shape, weight, bias, eps):
    """The eager whitening layer norm (:class:`_WhitenAffine` on rows of ``prod(shape)``)."""
    size = math.prod(shape)
    shape3 = (1, x.numel() // max(size, 1), size)
    w = None if weight is None else weight.reshape(2, 2, size)
    b = None if bias is None else bias.reshape(size)
    return _whiten_affine(x, w, b, shape3, eps)[0]


def _layer_norm_split(x, shape, weight, bias, eps):
    """Split layer norm composed of differentiable ops: torch's fused real ``layer_norm`` on the
    contiguous parts (tracing, and the double backward of :class:`_LayerNormSplit` and of the
    compiled kernels)."""
    re, im = parts(x)
    w = (None, None) if weight is None else (weight[0], weight[1])
    b = (None, None) if bias is None else (bias.real, bias.imag)
    return join(F.layer_norm(re, shape, w[0], b[0], eps), F.layer_norm(im, shape, w[1], b[1], eps))


class _LayerNormSplit(torch.autograd.Function):
    r"""Split layer norm of complex ``x`` over rows of ``size`` entries: torch's fused real
    ``native_layer_norm`` (forward) and ``native_layer_norm_backward`` on each part plane, with
    the affine of the part fused in.

    Forward: one copy of ``x`` into its two contiguous part planes
    (:func:`cplxnet.functional.interleaved.part_planes`), two fused norms, one
    ``torch.complex`` join. Backward: the same copy of the incoming gradient, the two fused
    backward kernels (which also give the gains' and shifts' gradients), one join. Saved: the
    part planes and the per-row means and inverse deviations. Double backward differentiates
    :func:`_layer_norm_split` (the same map composed of differentiable ops).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps):  # noqa: D102 (autograd.Function)
        size = math.prod(shape)
        p = _il.part_planes(x, size)
        w = (None, None) if weight is None else weight.reshape(2, size).unbind(0)
        b = (None, None) if bias is None else torch.view_as_real(bias.resolve_conj()).unbind(-1)
        b = tuple(None if t is None else t.reshape(size) for t in b)
        y0, m0, r0 = torch.native_layer_norm(p[0], (size,), w[0], b[0], eps)
        y1, m1, r1 = torch.native_layer_norm(p[1], (size,), w[1], b[1], eps)
        ctx.save_for_backward(x, weight, bias, p, m0, r0, m1, r1)
        ctx.shape, ctx.eps = shape, eps
        return function_output(torch.complex(y0, y1).reshape(x.shape), x)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        x, weight, bias, p, m0, r0, m1, r1 = ctx.saved_tensors
        shape, eps = ctx.shape, ctx.eps
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            out = grad_via_composed(
                lambda x, w, b: _layer_norm_split(x, shape, w, b, eps),
                (x, weight, bias),
                ctx,
                grad,
            )
            return (*out, None, None)
        size = math.prod(shape)
        gp = _il.part_planes(grad, size)
        w = (None, None) if weight is None else weight.reshape(2, size).unbind(0)
        need_w = weight is not None and ctx.needs_input_grad[1]
        need_b = bias is not None and ctx.needs_input_grad[2]
        mask = [ctx.needs_input_grad[0], need_w, need_b]
        like_b = p[0, 0] if need_b else None  # the kernel reads only the bias' shape and dtype
        backward = torch.ops.aten.native_layer_norm_backward
        g0 = backward(gp[0], p[0], (size,), m0, r0, w[0], like_b, mask)
        g1 = backward(gp[1], p[1], (size,), m1, r1, w[1], like_b, mask)
        gx = torch.complex(g0[0], g1[0]).reshape(x.shape) if mask[0] else None
        g_weight = torch.stack([g0[1], g1[1]]).reshape(weight.shape) if need_w else None
        g_bias = torch.complex(g0[2], g1[2]).reshape(bias.shape) if need_b else None
        return gx, g_weight, g_bias, None, None


def _split_affine_rows(x, weight, bias, size):
    """Gains ``(2, size)`` and shifts ``(2, size)`` (real, contiguous, detached) of the split
    layer norm for the compiled kernels: ones and zeros where ``weight`` / ``bias`` is None."""
    rdt = x.real.dtype
    w = torch.ones(2, size, dtype=rdt, device=x.device) if weight is None else weight
    if bias is None:
        b = torch.zeros(2, size, dtype=rdt, device=x.device)
    else:
        b = torch.view_as_real(bias.detach().resolve_conj().reshape(size)).T
    return w.detach().reshape(2, size).contiguous(), b.contiguous()


class _LayerNormSplitCompiled(torch.autograd.Function):
    """Split layer norm of complex64 ``x`` over its last ``len(shape)`` dims as compiled kernels
    on the complex64 words (:mod:`cplxnet.functional.compiled`); the gains' and shift's
    gradients are the kernels' per-entry terms summed over the rows."""

    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps):  # noqa: D102 (autograd.Function)
        size = math.prod(shape)
        w, b = _split_affine_rows(x, weight, bias, size)
        words = _kernels.as_words(x).reshape(-1, size)
        out, *stats = _kernels.kernel("layer_norm_split_forward")(
            words, w[0], w[1], b[0], b[1], eps
        )
        ctx.save_for_backward(x, weight, bias, *stats)
        ctx.shape, ctx.eps = shape, eps
        return function_output(_kernels.words_to_complex(out).reshape(x.shape))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        x, weight, bias, *stats = ctx.saved_tensors
        shape, eps = ctx.shape, ctx.eps
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            out = grad_via_composed(
                lambda x, w, b: _layer_norm_split(x, shape, w, b, eps),
                (x, weight, bias),
                ctx,
                grad,
            )
            return (*out, None, None)
        size = math.prod(shape)
        w, _ = _split_affine_rows(x, weight, None, size)
        words = _kernels.as_words(x).reshape(-1, size)
        gwords = _kernels.as_words(grad).reshape(words.shape)
        gx, terms = _kernels.kernel("layer_norm_split_backward")(words, gwords, w[0], w[1], stats)
        g_weight = g_bias = None
        if weight is not None and ctx.needs_input_grad[1]:
            g_weight = torch.view_as_real(_kernels.words_to_complex(terms).sum(0)).T
            g_weight = g_weight.reshape(weight.shape)
        if bias is not None and ctx.needs_input_grad[2]:
            g_bias = grad.resolve_conj().reshape(-1, size).sum(0).reshape(bias.shape)
        return _kernels.words_to_complex(gx).reshape(x.shape), g_weight, g_bias, None, None


def layer_norm(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    mode: str = "split",
) -> torch.Tensor:
    r"""Complex layer normalisation over the trailing ``normalized_shape`` dims.

    ``mode="split"``: the real and imaginary parts are normalised separately, each to zero mean
    and unit variance over the normalised dims, then scaled and shifted per part:
    :math:`y = w_0 \hat x + b_r + i (w_1 \hat y + b_i)` with ``weight`` real ``(2, *shape)`` and
    ``bias`` complex ``(*shape)`` -- the layer norm of the Complex Order code (Wang et al., ICLR
    2020), which applies a real LayerNorm to each part.

    ``mode="whiten"``: Trabelsi et al.'s 2x2 covariance whitening over the normalised dims
    (:func:`whiten`), then the per-feature real 2x2 ``weight`` ``(2, 2, *shape)`` and complex
    ``bias``.

    On a real ``x`` (``mode="split"`` only) this is ``F.layer_norm`` with real ``weight``/``bias``
    of shape ``normalized_shape``.

    ``"split"`` copies ``x`` into its contiguous real and imaginary parts, runs torch's fused
    real layer norm on each (with the affine fused in) and joins the result, forward and
    backward in one autograd Function (:class:`_LayerNormSplit`). ``"whiten"`` copies each row
    of ``x`` into its ``D`` real parts followed by its ``D`` imaginary parts, computes the
    moments and applies the whitening as batched 2x2 matrix products over these rows, and has a
    hand-written backward (:class:`_WhitenAffine`). After
    :func:`cplxnet.functional.use_compiled_kernels`, complex64 inputs run as compiled kernels on
    the interleaved data instead (:class:`_LayerNormSplitCompiled`, :class:`_WhitenRowsCompiled`).
    """
    shape = tuple(normalized_shape)
    if not x.is_complex():
        if mode != "split":
            raise ValueError(f"layer_norm: mode={mode!r} needs a complex input (use mode='split')")
        return F.layer_norm(x, shape, weight, bias, eps)
    if mode == "split" and _kernels.applies(x) and x.numel() > 0:
        return _LayerNormSplitCompiled.apply(x, weight, bias, shape, eps)
    if mode == "split" and eager_complex(x) and x.numel() > 0:
        return _LayerNormSplit.apply(x, weight, bias, shape, eps)
    if mode == "split":
        return _layer_norm_split(x, shape, weight, bias, eps)
    if mode == "whiten":
        return _whiten_rows(x, shape, weight, bias, eps)
    raise ValueError(f"layer_norm: unknown mode {mode!r}; valid modes are 'split', 'whiten'")


def rms_norm(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
) -> torch.Tensor:
    r"""Complex RMS normalisation :math:`y = x / \sqrt{\mathrm{mean}|x|^2 + \epsilon} \cdot w`
    over the trailing ``normalized_shape`` dims (Zhang & Sennrich, "Root Mean Square Layer
    Normalization", NeurIPS 2019, with :math:`x^2 \to |x|^2`).

    ``weight`` is real ``(*normalized_shape)``: a real gain scales the modulus and keeps the phase,
    so the layer commutes with a global phase rotation :math:`x \to e^{i\theta} x` (a complex gain
    would also rotate each feature; put a complex Linear after it if that is wanted). ``eps``
    defaults to ``torch.finfo`` of the real dtype, as ``torch.nn.RMSNorm``. Real inputs give
    ``torch.nn.functional.rms_norm``.
    """
    shape = tuple(normalized_shape)
    if eps is None:
        eps = torch.finfo(_real_dtype_of(x)).eps
    if not x.is_complex():
        return F.rms_norm(x, shape, weight, eps)
    # mean over the packed (..., 2D) real view is mean|x|^2 / 2, so rms_norm of the packed view
    # with eps / 2 and gain w / sqrt(2) (repeated per part) is exactly
    # x / sqrt(mean|x|^2 + eps) * w; torch's rms_norm then runs on contiguous real memory (about
    # the cost of the real RMSNorm of 2D features).
    packed_shape = (*shape[:-1], 2 * shape[-1])
    if weight is None:
        gain = torch.full(packed_shape, 0.5**0.5, dtype=_real_dtype_of(x), device=x.device)
    else:
        gain = weight.repeat_interleave(2, dim=-1) * 0.5**0.5
    y = F.rms_norm(pack(x), packed_shape, gain, eps / 2)
    return as_complex(y.unflatten(-1, (-1, 2)))


def _real_dtype_of(x: torch.Tensor) -> torch.dtype:
    return x.real.dtype if x.is_complex() else x.dtype
