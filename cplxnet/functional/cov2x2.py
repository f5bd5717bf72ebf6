"""The inverse square root of a symmetric 2x2 covariance in closed form, the core of the
whitening norms (:mod:`cplxnet.functional.norm`) and of their compiled kernels
(:mod:`cplxnet.functional.compiled`)."""

from __future__ import annotations

import torch

__all__ = [
    "inv_sqrt_2x2",
    "inv_sqrt_2x2_vjp",
    "inv_sqrt_2x2_matrix",
    "inv_sqrt_2x2_matrix_vjp",
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
    f = torch.rsqrt(k) / (s * t)
    return f * (c + e + s), -f * b, f * (a + e + s)


def _normalised(vrr, vri, vii, eps):
    r"""The trace-normalised entries ``(a, b, c, e)`` of :func:`inv_sqrt_2x2`, the trace ``k``,
    :math:`\hat s = \sqrt{\det \hat A}` and :math:`\hat t = \sqrt{1 + 2 \hat s}`."""
    k = vrr + vii + 2.0 * eps
    inv_k = 1.0 / k
    a, c, b = vrr * inv_k, vii * inv_k, vri * inv_k
    e = eps * inv_k
    det = (a * c - b * b).clamp_min(0.0) + e * (a + c) + e * e
    s = torch.sqrt(det)
    return a, b, c, e, k, s, torch.sqrt(1.0 + 2.0 * s)


def _sandwich(m1, m2, m3, g1, h, g3):
    """Entries ``(00, 01, 11)`` of :math:`M G M` for the symmetric 2x2 matrices
    :math:`M = [[m_1, m_2], [m_2, m_3]]` and :math:`G = [[g_1, h], [h, g_3]]`."""
    p, q = m1 * g1 + m2 * h, m1 * h + m2 * g3  # first row of M G
    r = m2 * h + m3 * g3  # (M G)_11
    return p * m1 + q * m2, p * m2 + q * m3, (m2 * g1 + m3 * h) * m2 + r * m3


def inv_sqrt_2x2_vjp(
    vrr: torch.Tensor,
    vri: torch.Tensor,
    vii: torch.Tensor,
    eps: float,
    g_rr: torch.Tensor,
    g_ri: torch.Tensor,
    g_ii: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Gradients of the inputs ``(vrr, vri, vii)`` of :func:`inv_sqrt_2x2` given the gradients
    ``(g_rr, g_ri, g_ii)`` of its outputs: the vector-Jacobian product autograd computes through
    the closed form, in closed form itself.

    With :math:`A = V + \epsilon I`, :math:`S = A^{1/2}`, :math:`W = S^{-1}` and :math:`G` the
    symmetric gradient of :math:`W` (off-diagonal :math:`g_{ri} / 2`), the gradient of
    :math:`A` solves the Sylvester equation :math:`S X + X S = -W G W`. For a 2x2 symmetric
    :math:`S` with determinant :math:`d` and trace :math:`t` its solution is
    :math:`X = (d P + T P T) / (2 d t)` with :math:`P = -W G W` and :math:`T =
    \operatorname{adj} S` (check it on the eigenvalues: :math:`X_{ij} = P_{ij} / (\sigma_i +
    \sigma_j)`), a sum without cancellation. Since :math:`W = T / d` and :math:`T^2 =
    \operatorname{adj} A`, on the trace-normalised :math:`\hat A` of :func:`inv_sqrt_2x2`
    (:math:`A = k \hat A`):
    :math:`X = -k^{-3/2} (\hat T G \hat T / \hat s + \operatorname{adj}(\hat A) G
    \operatorname{adj}(\hat A) / \hat s^2) / (2 \hat s \hat t)`: the products are taken on the
    O(1) normalised matrices and the scale of the data enters once, through :math:`k^{-3/2}`.
    Returns :math:`(X_{00}, 2 X_{01}, X_{11})`.
    """
    a, b, c, e, k, s, t = _normalised(vrr, vri, vii, eps)
    j1, j2, j3 = c + e, -b, a + e  # adj(A^)
    inv_t = 1.0 / t
    t1, t2, t3 = (j1 + s) * inv_t, j2 * inv_t, (j3 + s) * inv_t  # adj(S^) = (adj(A^) + s I) / t
    h = 0.5 * g_ri
    x1, x2, x3 = _sandwich(t1, t2, t3, g_rr, h, g_ii)
    y1, y2, y3 = _sandwich(j1, j2, j3, g_rr, h, g_ii)
    inv_s = 1.0 / s
    f = -(torch.rsqrt(k) ** 3) * (0.5 * inv_s * inv_t)
    f1, f2 = f * inv_s, f * inv_s * inv_s
    return f1 * x1 + f2 * y1, 2.0 * (f1 * x2 + f2 * y2), f1 * x3 + f2 * y3


def inv_sqrt_2x2_matrix(v: torch.Tensor, eps: float) -> torch.Tensor:
    """:func:`inv_sqrt_2x2` of the symmetric ``(..., 2, 2)`` ``v`` as a ``(..., 2, 2)`` matrix."""
    wrr, wri, wii = inv_sqrt_2x2(v[..., 0, 0], v[..., 0, 1], v[..., 1, 1], eps)
    return torch.stack([wrr, wri, wri, wii], -1).unflatten(-1, (2, 2))


def identity_2x2(shape: tuple, like: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale`` times the 2x2 identity for each entry of ``shape``: ``(2, 2, *shape)`` with the
    dtype and device of ``like`` (an expanded view; copy it into a parameter or buffer)."""
    eye = torch.eye(2, dtype=like.dtype, device=like.device) * scale
    return eye.reshape(2, 2, *([1] * len(shape))).expand(2, 2, *shape)


def inv_sqrt_2x2_matrix_vjp(v: torch.Tensor, eps: float, g: torch.Tensor) -> torch.Tensor:
    """The gradient of the symmetric ``(..., 2, 2)`` ``v`` given the gradient ``g`` of
    :func:`inv_sqrt_2x2_matrix` ``(v, eps)``, as autograd gives it (the closed form
    :func:`inv_sqrt_2x2_vjp`): ``v[..., 1, 0]`` is not read, so its entry is 0."""
    v3 = (v[..., 0, 0], v[..., 0, 1], v[..., 1, 1])
    g3 = (g[..., 0, 0], g[..., 0, 1] + g[..., 1, 0], g[..., 1, 1])
    gv_rr, gv_ri, gv_ii = inv_sqrt_2x2_vjp(*v3, eps, *g3)
    return torch.stack([gv_rr, gv_ri, torch.zeros_like(gv_ri), gv_ii], -1).unflatten(-1, (2, 2))
