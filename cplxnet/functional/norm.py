r"""Complex normalisation: split and whitening layer norm, whitening batch norm, RMS norm.

Whitening (Trabelsi et al., "Deep Complex Networks", ICLR 2018, Sec. 3.5) treats each complex
feature as a 2-vector :math:`(x, y)` and maps the centred data through the inverse square root of
its 2x2 covariance :math:`V = [[V_{rr}, V_{ri}], [V_{ri}, V_{ii}]]`, so the output has identity
covariance (real and imaginary parts decorrelated, each of unit variance). Any real 2x2 map of
:math:`(x, y)` is a widely linear map :math:`\alpha z + \beta \bar z` of :math:`z = x + iy`.
The 2x2 inverse square root has a closed form (:func:`inv_sqrt_2x2`), evaluated on the
trace-normalised covariance so that it stays finite for data of any scale; ``eps`` is added to
both diagonal entries of :math:`V`.

The layers compute on the contiguous real and imaginary parts of the input
(:func:`cplxnet._utils.parts`, one copy) with torch's real kernels and join the result into a
complex tensor at the end: torch's element-wise kernels do not vectorise on the stride-2 views
``x.real``, ``x.imag`` or against per-element scalars broadcast over ``view_as_real``'s last
dimension of size 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .._utils import as_complex, grad_via_composed, is_tracing, join, pack, parts

__all__ = ["layer_norm", "batch_norm", "rms_norm", "whiten", "inv_sqrt_2x2"]


def inv_sqrt_2x2(
    vrr: torch.Tensor, vri: torch.Tensor, vii: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Entries ``(w_rr, w_ri, w_ii)`` of :math:`(V + \epsilon I)^{-1/2}` for the symmetric 2x2
    covariance :math:`V = [[v_{rr}, v_{ri}], [v_{ri}, v_{ii}]]` (tensors of any one shape).

    Closed form on the trace-normalised matrix :math:`\hat A = (V + \epsilon I) / k`,
    :math:`k = \operatorname{tr}(V + \epsilon I)`: with :math:`\hat s = \sqrt{\det \hat A}` and
    :math:`\hat t = \sqrt{1 + 2 \hat s}`, :math:`\hat A^{-1/2} = \operatorname{adj}(\hat A + \hat s
    I) / (\hat s \hat t)` and :math:`(V + \epsilon I)^{-1/2} = k^{-1/2} \hat A^{-1/2}`. Every
    intermediate is O(1) whatever the scale of the data (squaring the unnormalised moments
    overflows float32 for moduli around 1e10), and the determinant is summed from non-negative
    terms, :math:`\det \hat A = \max(\hat v_{rr} \hat v_{ii} - \hat v_{ri}^2, 0) + \hat\epsilon
    (\hat v_{rr} + \hat v_{ii}) + \hat\epsilon^2` (hats: divided by :math:`k`), so rounding cannot
    make it negative.
    """
    k = vrr + vii + 2.0 * eps
    inv_k = 1.0 / k
    a, c, b = vrr * inv_k, vii * inv_k, vri * inv_k
    e = eps * inv_k
    det = (a * c - b * b).clamp_min(0.0) + e * (a + c) + e * e
    s = torch.sqrt(det)
    f = torch.rsqrt(k) / (s * torch.sqrt(1.0 + 2.0 * s))
    return f * (c + e + s), -f * b, f * (a + e + s)


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


def _whiten_parts(
    re: torch.Tensor,
    im: torch.Tensor,
    dims: tuple[int, ...],
    eps: float,
    stats: tuple | None = None,
) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    r"""Whitening on the parts ``re, im = parts(x)`` (real, shape ``S``): centre and whiten over
    the ``dims`` of ``S`` (batch statistics), or with ``stats = (mean_r, mean_i, vrr, vri, vii)``
    broadcastable to ``S``. Returns the whitened real and imaginary parts and the statistics used
    (``(mean_r, mean_i, vrr, vri, vii)``, biased covariance)."""
    if stats is None:
        mean_r, mean_i = re.mean(dim=dims, keepdim=True), im.mean(dim=dims, keepdim=True)
        cr, ci = re - mean_r, im - mean_i
        vrr = (cr * cr).mean(dim=dims, keepdim=True)
        vii = (ci * ci).mean(dim=dims, keepdim=True)
        vri = (cr * ci).mean(dim=dims, keepdim=True)
        stats = (mean_r, mean_i, vrr, vri, vii)
    else:
        cr, ci = re - stats[0], im - stats[1]
    wrr, wri, wii = inv_sqrt_2x2(*stats[2:], eps)
    yr = torch.addcmul(wrr * cr, wri, ci)
    yi = torch.addcmul(wri * cr, wii, ci)
    return yr, yi, stats


class _Whiten(torch.autograd.Function):
    r"""Batch-statistics whitening of the parts ``re, im`` over ``dims``, hand-written backward.

    Forward as :func:`_whiten_parts`: :math:`c = p - \bar p`, :math:`V = \mathrm{mean}(c c^T)`,
    :math:`W = (V + \epsilon I)^{-1/2}` (:func:`inv_sqrt_2x2`), :math:`y = W c`. Backward, with
    :math:`g_y` the gradient of :math:`y` and :math:`n` the number of reduced entries:
    :math:`g_W = \sum g_y c^T` (2x2 per group), :math:`g_V` from :math:`g_W` by autograd through
    the closed form on the small per-group tensors, :math:`g_c = W g_y + (g_V + g_V^T) c / n` and
    :math:`g_x = g_c - \mathrm{mean}(g_c)`: about eight contiguous passes over the data instead of
    the ~twenty of autograd through the composed ops.
    """

    @staticmethod
    def forward(ctx, re, im, dims, eps):  # noqa: D102 (autograd.Function)
        y0, y1, stats = _whiten_parts(re, im, dims, eps)
        mean_r, mean_i, vrr, vri, vii = stats
        ctx.dims, ctx.eps = dims, eps
        ctx.save_for_backward(re, im, re - mean_r, im - mean_i, vrr, vri, vii)
        ctx.mark_non_differentiable(mean_r, mean_i, vrr, vri, vii)
        return y0, y1, mean_r, mean_i, vrr, vri, vii

    @staticmethod
    def backward(ctx, gy0, gy1, *_):  # noqa: D102
        re, im, cr, ci, vrr, vri, vii = ctx.saved_tensors
        dims, eps = ctx.dims, ctx.eps
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return grad_via_composed(
                lambda a, b: _whiten_parts(a, b, dims, eps)[:2], (re, im), ctx, (gy0, gy1)
            )
        gy0 = torch.zeros_like(cr) if gy0 is None else gy0
        gy1 = torch.zeros_like(ci) if gy1 is None else gy1
        n = math.prod(cr.shape[d] for d in dims)
        g_rr = (gy0 * cr).sum(dims, keepdim=True)
        g_ri = (gy0 * ci).sum(dims, keepdim=True) + (gy1 * cr).sum(dims, keepdim=True)
        g_ii = (gy1 * ci).sum(dims, keepdim=True)
        with torch.enable_grad():
            v = [t.detach().requires_grad_() for t in (vrr, vri, vii)]
            w = inv_sqrt_2x2(*v, eps)
            gv_rr, gv_ri, gv_ii = torch.autograd.grad(w, v, (g_rr, g_ri, g_ii))
        wrr, wri, wii = (t.detach() for t in w)
        g_re = (gy0 * wrr).addcmul_(gy1, wri).addcmul_(cr, gv_rr * (2.0 / n))
        g_re.addcmul_(ci, gv_ri / n)
        g_im = (gy0 * wri).addcmul_(gy1, wii).addcmul_(cr, gv_ri / n)
        g_im.addcmul_(ci, gv_ii * (2.0 / n))
        g_re -= g_re.mean(dims, keepdim=True)
        g_im -= g_im.mean(dims, keepdim=True)
        return g_re, g_im, None, None


def _whiten_batch(
    re: torch.Tensor, im: torch.Tensor, dims: tuple[int, ...], eps: float
) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    """:func:`_whiten_parts` with batch statistics, through :class:`_Whiten` when eager."""
    if is_tracing() or torch.jit.is_tracing():
        return _whiten_parts(re, im, dims, eps)
    y0, y1, *stats = _Whiten.apply(re, im, dims, eps)
    return y0, y1, tuple(stats)


def _affine_2x2_parts(
    yr: torch.Tensor, yi: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None
) -> torch.Tensor:
    """Apply the per-feature real 2x2 ``weight`` (``(2, 2, *F)``, ``F`` broadcastable to the
    parts) and complex ``bias`` to the whitened parts and join them into a complex tensor."""
    if weight is not None:
        yr, yi = (
            torch.addcmul(weight[0, 0] * yr, weight[0, 1], yi),
            torch.addcmul(weight[1, 0] * yr, weight[1, 1], yi),
        )
    if bias is not None:  # contiguous parts: a stride-2 operand does not vectorise
        yr, yi = yr + bias.real.contiguous(), yi + bias.imag.contiguous()
    return join(yr, yi)


def layer_norm(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
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

    Both modes first copy ``x`` into its contiguous real and imaginary parts
    (:func:`cplxnet._utils.parts`): ``"split"`` is then two calls of torch's fused real
    ``layer_norm`` (with the affine fused in), ``"whiten"`` a few contiguous real element-wise
    ops, and the result is joined back into a complex tensor.
    """
    shape = tuple(normalized_shape)
    k = len(shape)
    if not x.is_complex():
        if mode != "split":
            raise ValueError(f"layer_norm: mode={mode!r} needs a complex input (use mode='split')")
        return F.layer_norm(x, shape, weight, bias, eps)
    if mode == "split":
        re, im = parts(x)
        w = (None, None) if weight is None else (weight[0], weight[1])
        b = (None, None) if bias is None else (bias.real, bias.imag)
        return join(
            F.layer_norm(re, shape, w[0], b[0], eps), F.layer_norm(im, shape, w[1], b[1], eps)
        )
    if mode == "whiten":
        yr, yi, _ = _whiten_batch(*parts(x), tuple(range(x.dim() - k, x.dim())), eps)
        return _affine_2x2_parts(yr, yi, weight, bias)
    raise ValueError(f"layer_norm: unknown mode {mode!r}; valid modes are 'split', 'whiten'")


def batch_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_cov: torch.Tensor | None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    r"""Whitening batch normalisation of a complex ``(B, C)`` or ``(B, C, L)`` input.

    In training (or without running statistics) each channel is centred by its batch mean and
    whitened with its batch 2x2 covariance (biased estimate; :func:`whiten`). When buffers are
    given and ``training`` is True they are updated in place as in ``torch.nn.BatchNorm1d``:
    ``running = (1 - momentum) * running + momentum * batch`` with the *unbiased* covariance
    (factor :math:`n/(n-1)`). In evaluation the running statistics are used. Computed on the
    contiguous real and imaginary parts, as :func:`layer_norm`.

    Args:
        running_mean: complex ``(C,)`` or None.
        running_cov: real ``(2, 2, C)`` covariance :math:`[[V_{rr}, V_{ri}], [V_{ri}, V_{ii}]]`
            or None.
        weight: real ``(2, 2, C)`` per-channel affine matrix or None; bias: complex ``(C,)``.
    """
    if x.dim() not in (2, 3):
        raise ValueError(
            f"batch_norm: expected a (B, C) or (B, C, L) input, got shape {tuple(x.shape)}"
        )
    dims = (0,) if x.dim() == 2 else (0, 2)
    view = (-1,) if x.dim() == 2 else (-1, 1)  # channel stats broadcast as (C,) or (C, 1)
    use_batch = training or running_mean is None
    re, im = parts(x)
    if use_batch:
        n = x.numel() // x.shape[1]
        if n < 2 and training:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, "
                f"got input {tuple(x.shape)}"
            )
        yr, yi, (mr, mi, vrr, vri, vii) = _whiten_batch(re, im, dims, eps)
        if training and running_mean is not None:
            with torch.no_grad():
                unbias = n / max(n - 1, 1)
                cov = torch.stack([torch.stack([vrr, vri]), torch.stack([vri, vii])])
                cov = cov.reshape(2, 2, -1) * unbias
                mean = torch.complex(mr, mi).reshape(-1)
                running_mean.lerp_(mean.to(running_mean.dtype), momentum)
                running_cov.lerp_(cov.to(running_cov.dtype), momentum)
    else:
        rm = torch.view_as_real(running_mean)
        stats = (rm[:, 0], rm[:, 1], running_cov[0, 0], running_cov[0, 1], running_cov[1, 1])
        yr, yi, _ = _whiten_parts(re, im, dims, eps, tuple(t.reshape(view) for t in stats))
    if weight is not None:
        weight = weight.reshape(2, 2, *view)
    if bias is not None:
        bias = bias.reshape(view)
    return _affine_2x2_parts(yr, yi, weight, bias)


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
