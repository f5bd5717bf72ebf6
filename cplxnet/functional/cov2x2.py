"""The inverse square root of a symmetric 2x2 covariance in closed form, the core of the
whitening norms (:mod:`cplxnet.functional.norm`) and of their compiled kernels
(:mod:`cplxnet.functional.compiled`)."""

from __future__ import annotations

import torch

__all__ = ["inv_sqrt_2x2", "inv_sqrt_2x2_matrix", "identity_2x2"]


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


def inv_sqrt_2x2_matrix(v: torch.Tensor, eps: float) -> torch.Tensor:
    """:func:`inv_sqrt_2x2` of the symmetric ``(..., 2, 2)`` ``v`` as a ``(..., 2, 2)`` matrix."""
    wrr, wri, wii = inv_sqrt_2x2(v[..., 0, 0], v[..., 0, 1], v[..., 1, 1], eps)
    return torch.stack([wrr, wri, wri, wii], -1).unflatten(-1, (2, 2))


def identity_2x2(shape: tuple, like: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale`` times the 2x2 identity for each entry of ``shape``: ``(2, 2, *shape)`` with the
    dtype and device of ``like`` (an expanded view; copy it into a parameter or buffer)."""
    eye = torch.eye(2, dtype=like.dtype, device=like.device) * scale
    return eye.reshape(2, 2, *([1] * len(shape))).expand(2, 2, *shape)
