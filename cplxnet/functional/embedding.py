"""Complex token embedding lookup whose backward works (dense or sparse)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .._utils import function_output, grad_via_composed, runs_composed
from . import compiled as _kernels
from . import interleaved

__all__ = ["embedding", "embedding_packed", "complex_order"]


def embedding_packed(
    ids: torch.Tensor,
    packed_weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    r"""Look up rows of a packed complex table.

    ``packed_weight`` is the real ``(V, 2D)`` view :func:`cplxnet._utils.pack` of a complex
    ``(V, D)`` table (interleaved ``[re0, im0, re1, im1, ...]``). The lookup is the real
    ``F.embedding`` (so ``padding_idx``, ``scale_grad_by_freq`` and ``sparse`` behave as in torch),
    and the ``(*, 2D)`` result is viewed back as complex ``(*, D)`` without a copy. ``max_norm``
    renormalises the rows looked up, in place, to complex ``norm_type``-norm
    :math:`(\sum_j |w_j|^p)^{1/p} \le` ``max_norm`` (torch's rule: rows above it are scaled by
    ``max_norm / (norm + 1e-7)``); for ``p = 2`` that is the Euclidean norm of the packed row, so
    torch's own renormalisation does it.
    With ``sparse=True`` the gradient of ``packed_weight`` is a sparse COO tensor usable with
    ``torch.optim.SparseAdam`` (which rejects complex parameters, hence the real storage).
    """
    if max_norm is not None and norm_type != 2.0:
        _renorm_complex_rows_(packed_weight, ids, max_norm, norm_type)
        max_norm = None
    out = F.embedding(ids, packed_weight, padding_idx, max_norm, 2.0, scale_grad_by_freq, sparse)
    return torch.view_as_complex(out.unflatten(-1, (-1, 2)))


def _renorm_complex_rows_(
    packed_weight: torch.Tensor, ids: torch.Tensor, max_norm: float, norm_type: float
) -> None:
    """torch's ``embedding_renorm_`` for the complex rows of a packed table: each row looked up
    whose complex ``norm_type``-norm exceeds ``max_norm`` is scaled by ``max_norm / (norm +
    1e-7)``, in place and outside autograd (repeated ids write the same row twice)."""
    with torch.no_grad():
        rows = ids.reshape(-1)
        picked = packed_weight.index_select(0, rows)
        norm = torch.linalg.vector_norm(
            torch.view_as_complex(picked.unflatten(-1, (-1, 2))), norm_type, dim=-1
        )
        scale = torch.where(norm > max_norm, max_norm / (norm + 1e-7), torch.ones_like(norm))
        packed_weight.index_copy_(0, rows, picked * scale.unsqueeze(-1))


def embedding(
    ids: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    r"""Rows ``weight[ids]`` of a complex ``(V, D)`` table, with a working (dense) backward.

    ``torch.nn.functional.embedding`` has no complex backward in torch 2.13; this runs it on the
    zero-copy real view ``view_as_real(weight).flatten(-2)`` (see :func:`embedding_packed`).
    Arguments as ``torch.nn.functional.embedding``; ``padding_idx`` rows receive no gradient and
    ``max_norm`` / ``norm_type`` renormalise complex rows as :func:`embedding_packed` says. A
    sparse gradient needs the table stored real-packed (:class:`cplxnet.nn.Embedding` does, or
    :func:`embedding_packed`): ``sparse=True`` with a complex ``weight`` is a ``ValueError``.
    """
    if not weight.is_complex():
        return F.embedding(
            ids, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
        )
    if sparse:
        raise ValueError(
            "embedding: sparse=True needs the table stored real-packed (torch has no sparse "
            "gradient of a complex view); use cplxnet.nn.Embedding(..., sparse=True) or "
            "embedding_packed"
        )
    packed = torch.view_as_real(weight).flatten(-2)  # (V, 2D)
    return embedding_packed(ids, packed, padding_idx, max_norm, norm_type, scale_grad_by_freq)


def _cos_sin(angle: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos(angle), sin(angle)``; on CPU (float32/64, eager) through NumPy, whose SIMD kernels
    measured 2-5x faster than torch 2.13's CPU ``cos``/``sin`` at one thread
    (benchmarks/RESULTS.md), to the same accuracy (a few float32 ulps); torch everywhere else
    (other devices, tracing, more torch threads than :data:`interleaved.NUMPY_MAX_THREADS`)."""
    if interleaved.numpy_ok(angle, (torch.float32, torch.float64)):
        a = angle.detach().contiguous().numpy()
        return torch.from_numpy(np.cos(a)), torch.from_numpy(np.sin(a))
    return torch.cos(angle), torch.sin(angle)


class _ComplexOrder(torch.autograd.Function):
    """``r * exp(i (w * pos + theta))`` with a hand-written backward that reuses ``cos``/``sin``.

    Autograd through ``cos``/``sin``/``mul``/``complex`` evaluates the transcendental functions
    twice and runs about ten element-wise passes each way; this evaluates them once.
    """

    @staticmethod
    def forward(ctx, r, w, theta, pos):  # noqa: D102 (autograd.Function)
        if w is None:
            angle = theta
        elif theta is None:
            angle = w * pos
        else:
            angle = torch.addcmul(theta, w, pos)  # (B, L, n)
        c, s = _cos_sin(angle)
        ctx.save_for_backward(r, c, s, pos)
        ctx.inputs = (r, w, theta, pos)  # for double backward only (no copies)
        ctx.shapes = (None if w is None else w.shape, None if theta is None else theta.shape)
        return torch.complex(c * r, s * r)  # (B, L, n)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return (*grad_via_composed(_complex_order_composed, ctx.inputs, ctx, grad), None)
        r, c, s, pos = ctx.saved_tensors
        w_shape, theta_shape = ctx.shapes
        g = torch.view_as_real(grad.resolve_conj())  # (B, L, n, 2): dL/dRe, dL/dIm
        g_re, g_im = g[..., 0], g[..., 1]
        grad_r = grad_w = grad_theta = None
        if ctx.needs_input_grad[0]:  # dL/dr = g_re cos + g_im sin
            grad_r = torch.addcmul(g_re * c, g_im, s).sum_to_size(r.shape)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            # dL/dangle = r (g_im cos - g_re sin)
            grad_angle = torch.addcmul(g_im * c, g_re, s, value=-1.0).mul_(r)
            if ctx.needs_input_grad[1]:
                grad_w = (grad_angle * pos).sum_to_size(w_shape)
            if ctx.needs_input_grad[2]:
                grad_theta = grad_angle.sum_to_size(theta_shape)
        return grad_r, grad_w, grad_theta, None


class _ComplexOrderCompiled(torch.autograd.Function):
    """:class:`_ComplexOrder` as compiled kernels (:mod:`cplxnet.functional.compiled`): the
    forward writes the complex64 output directly, the backward recomputes cos and sin in its
    kernel (nothing but the inputs is saved)."""

    @staticmethod
    def forward(ctx, r, w, theta, pos):  # noqa: D102 (autograd.Function)
        ctx.save_for_backward(r, w, theta, pos)
        out = _kernels.kernel("complex_order_forward")(*_detached(r, w, theta, pos))
        return function_output(_kernels.words_to_complex(out))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        r, w, theta, pos = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return (
                *grad_via_composed(_complex_order_composed, (r, w, theta, pos), ctx, grad),
                None,
            )
        gw = _kernels.as_words(grad)
        grad_r, grad_angle = _kernels.kernel("complex_order_backward")(
            *_detached(r, w, theta, pos), gw
        )
        grad_w = grad_theta = None
        if ctx.needs_input_grad[1]:
            grad_w = (grad_angle * pos).sum_to_size(w.shape)
        if ctx.needs_input_grad[2]:
            grad_theta = grad_angle.sum_to_size(theta.shape)
        return grad_r.sum_to_size(r.shape), grad_w, grad_theta, None


def _detached(*tensors):
    return tuple(None if t is None else t.detach() for t in tensors)


def _complex_order_composed(r, w, theta, pos):
    """The complex-order map composed of differentiable ops (tracing, double backward)."""
    angle = torch.zeros((), dtype=r.dtype, device=r.device)
    if w is not None:
        angle = angle + w * pos
    if theta is not None:
        angle = angle + theta
    return torch.complex(r * torch.cos(angle), r * torch.sin(angle))


def complex_order(
    amplitude: torch.Tensor,
    frequency: torch.Tensor | None,
    phase: torch.Tensor | None,
    positions: torch.Tensor,
) -> torch.Tensor:
    r"""The complex-order map :math:`r\, e^{i (w\, \text{pos} + \theta)}` (Wang et al., ICLR 2020).

    ``amplitude`` :math:`r`, ``frequency`` :math:`w` and ``phase`` :math:`\theta` are real tensors
    already looked up per token (``(B, L, n)``, or broadcastable to it: ``(n,)`` when shared by all
    words, ``(B, L, 1)`` when shared by a word's dimensions); ``positions`` is ``(L, 1)``.
    ``frequency=None`` means :math:`w = 0`, ``phase=None`` :math:`\theta = 0`. Returns the complex
    ``(B, L, n)`` embedding.

    The backward is written by hand and reuses the forward's :math:`\cos\phi, \sin\phi`
    (:math:`\phi = w\,\text{pos} + \theta`): with the incoming gradient :math:`g = g_{re} + i
    g_{im}` (torch's convention), :math:`\partial_r = g_{re}\cos\phi + g_{im}\sin\phi`,
    :math:`\partial_\theta = r (g_{im}\cos\phi - g_{re}\sin\phi)` and :math:`\partial_w =
    \text{pos}\, \partial_\theta` (summed over broadcast dimensions); gradcheck in complex128
    covers every sharing layout (tests/functional/test_embedding_functional.py); double backward
    differentiates the readable form. After :func:`cplxnet.functional.use_compiled_kernels`,
    float32 inputs run as compiled kernels (:class:`_ComplexOrderCompiled`).
    """
    if frequency is None and phase is None:
        zero = torch.zeros((), dtype=amplitude.dtype, device=amplitude.device)
        return torch.complex(amplitude, zero.expand_as(amplitude))
    if runs_composed():  # the readable form: compilers, torch.export, torch.func transforms
        return _complex_order_composed(amplitude, frequency, phase, positions)
    if _kernels.applies(amplitude, torch.float32) and amplitude.numel() > 0:
        return _ComplexOrderCompiled.apply(amplitude, frequency, phase, positions)
    return _ComplexOrder.apply(amplitude, frequency, phase, positions)
