"""The inverse square root of a symmetric 2x2 covariance in closed form, the core of the
whitening norms (:mod:`cplxnet.functional.norm`, :mod:`cplxnet.functional.whitening`) and of
their compiled kernels (:mod:`cplxnet.functional.compiled`).

The functions take torch tensors or NumPy arrays (one formula, written with operators and
:func:`xp`): the whitening norms evaluate these per-channel formulas in NumPy for eager CPU
tensors, where a NumPy operation on a few hundred values costs about a quarter of a torch
dispatch, and in torch everywhere else (other devices, tracing, compilation).
"""

from __future__ import annotations

import numpy as np
import torch


def xp(a):
    """The array namespace of ``a``: ``numpy`` for an ndarray, else ``torch``."""
    return np if isinstance(a, np.ndarray) else torch


__all__ = [
    "inv_sqrt_2x2",
    "inv_sqrt_2x2_vjp",
    "inv_sqrt_2x2_factors",
    "inv_sqrt_2x2_from_factors",
    "inv_sqrt_2x2_grad",
    "inv_sqrt_2x2_matrix",
    "identity_2x2",
]


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
    a, b, c, e, k, s, t = _normalised(vrr, vri, vii, eps)
    f = k**-0.5 / (s * t)
    return f * (c + e + s), -f * b, f * (a + e + s)


def _normalised(vrr, vri, vii, eps):
    r"""The trace-normalised entries ``(a, b, c, e)`` of :func:`inv_sqrt_2x2`, the trace ``k``,
    :math:`\hat s = \sqrt{\det \hat A}` and :math:`\hat t = \sqrt{1 + 2 \hat s}`."""
    k = vrr + vii + 2.0 * eps
    inv_k = 1.0 / k
    a, c, b = vrr * inv_k, vii * inv_k, vri * inv_k
    e = eps * inv_k
    det = (a * c - b * b).clip(min=0.0) + e * (a + c) + e * e
    s = xp(det).sqrt(det)
    return a, b, c, e, k, s, xp(s).sqrt(1.0 + 2.0 * s)


def inv_sqrt_2x2_factors(v: torch.Tensor, eps: float):
    r""":func:`inv_sqrt_2x2` of the symmetric ``(..., 2, 2)`` ``v`` in factors: the normalised
    inverse square root :math:`\hat W = (\hat A)^{-1/2}` ``(..., 2, 2)``, :math:`\hat s`,
    :math:`\hat t` and the trace :math:`k` (see :func:`inv_sqrt_2x2`), so that
    :math:`(V + \epsilon I)^{-1/2} = k^{-1/2} \hat W`; what :func:`inv_sqrt_2x2_grad` needs."""
    a, b, c, e, k, s, t = _normalised(v[..., 0, 0], v[..., 0, 1], v[..., 1, 1], eps)
    f = 1.0 / (s * t)
    off = -f * b
    w_hat = xp(f).stack([f * (c + e + s), off, off, f * (a + e + s)], -1)
    return w_hat.reshape(*f.shape, 2, 2), s, t, k


def inv_sqrt_2x2_from_factors(factors) -> torch.Tensor:
    r""":math:`(V + \epsilon I)^{-1/2} = k^{-1/2} \hat W` ``(..., 2, 2)`` from
    :func:`inv_sqrt_2x2_factors`."""
    w_hat, _, _, k = factors
    return w_hat * (k**-0.5)[..., None, None]


def inv_sqrt_2x2_grad(factors, g: torch.Tensor) -> torch.Tensor:
    r"""The gradient :math:`G_A` of the symmetric covariance for the gradient ``g``
    ``(..., 2, 2)`` of :math:`W = (V + \epsilon I)^{-1/2}`, from :func:`inv_sqrt_2x2_factors`:
    :math:`dL = \langle G_A, dV \rangle` for every symmetric :math:`dV` (autograd through
    :func:`inv_sqrt_2x2_matrix`, which reads the upper triangle, gives :math:`g_V` with
    :math:`g_V + g_V^T = 2 G_A`).

    With :math:`A = V + \epsilon I`, :math:`S = A^{1/2}` and :math:`G` the symmetric part of
    ``g``, :math:`G_A` solves the Sylvester equation :math:`S X + X S = -W G W`; on the
    eigenvalues :math:`\sigma_i` of :math:`S`, :math:`X_{ij} = -(W G W)_{ij} / (\sigma_i +
    \sigma_j)`. For 2x2 that is :math:`X = -(P + \det(S)\, W P W) / (2 \operatorname{tr} S)`,
    :math:`P = W G W` (check it entry by entry in the eigenbasis), a sum of terms of one sign
    (no cancellation, whatever the conditioning). On the trace-normalised factors
    (:math:`A = k \hat A`, :math:`\hat W = k^{1/2} W`, :math:`\det \hat S = \hat s`,
    :math:`\operatorname{tr} \hat S = \hat t`):
    :math:`G_A = -(\hat P + \hat s \hat W \hat P \hat W) / (2 \hat t) \cdot k^{-3/2}`,
    :math:`\hat P = \hat W G \hat W`, every product on O(1) normalised matrices.
    """
    w_hat, s, t, k = factors
    sym = (0.5 * k**-0.5)[..., None, None] * (g + g.swapaxes(-1, -2))  # k^{-1/2}, then 1 / k:
    p = w_hat @ sym @ w_hat  # k^{-3/2} alone leaves the float32 range for traces above 1e26
    q = w_hat @ p @ w_hat
    return (p + s[..., None, None] * q) * (-0.5 / (t * k))[..., None, None]


def inv_sqrt_2x2_vjp(
    vrr: torch.Tensor,
    vri: torch.Tensor,
    vii: torch.Tensor,
    eps: float,
    g_rr: torch.Tensor,
    g_ri: torch.Tensor,
    g_ii: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of the inputs ``(vrr, vri, vii)`` of :func:`inv_sqrt_2x2` given the gradients
    ``(g_rr, g_ri, g_ii)`` of its outputs, as autograd computes them through the closed form,
    by :func:`inv_sqrt_2x2_grad`."""
    v = torch.stack([vrr, vri, vri, vii], -1).unflatten(-1, (2, 2))
    h = 0.5 * g_ri
    g = torch.stack([g_rr, h, h, g_ii], -1).unflatten(-1, (2, 2))
    ga = inv_sqrt_2x2_grad(inv_sqrt_2x2_factors(v, eps), g)
    return ga[..., 0, 0], 2.0 * ga[..., 0, 1], ga[..., 1, 1]


def inv_sqrt_2x2_matrix(v: torch.Tensor, eps: float) -> torch.Tensor:
    """:func:`inv_sqrt_2x2` of the symmetric ``(..., 2, 2)`` ``v`` as a ``(..., 2, 2)`` matrix."""
    wrr, wri, wii = inv_sqrt_2x2(v[..., 0, 0], v[..., 0, 1], v[..., 1, 1], eps)
    return torch.stack([wrr, wri, wri, wii], -1).unflatten(-1, (2, 2))


def identity_2x2(shape: tuple, like: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale`` times the 2x2 identity for each entry of ``shape``: ``(2, 2, *shape)`` with the
    dtype and device of ``like`` (an expanded view; copy it into a parameter or buffer)."""
    eye = torch.eye(2, dtype=like.dtype, device=like.device) * scale
    return eye.reshape(2, 2, *([1] * len(shape))).expand(2, 2, *shape)
