"""Complex-to-real readouts: turn complex features into real ones for a real classifier head."""

from __future__ import annotations

import torch

__all__ = ["magnitude", "real_part", "concat_real_imag"]


def magnitude(z: torch.Tensor) -> torch.Tensor:
    r"""Modulus :math:`|z| = \sqrt{x^2 + y^2}` (real, same shape).

    PyTorch's complex ``abs`` backward is :math:`g\,\mathrm{sgn}(z)`, which is 0 at the origin: the
    gradient is finite (a subgradient) at :math:`z = 0`, not NaN as for ``sqrt(x^2 + y^2)``.
    """
    return z.abs()


def real_part(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathrm{Re}\, z` (a view; the gradient reaches ``z`` as a real-valued cotangent)."""
    return z.real if z.is_complex() else z


def concat_real_imag(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""``[Re z, Im z]`` concatenated along ``dim`` (default: features): ``(*, D) -> (*, 2D)``.

    The readout used by most complex text classifiers before a real linear layer (Wang et al.,
    "Encoding Word Order in Complex Embeddings", ICLR 2020).
    """
    return torch.cat([z.real, z.imag], dim=dim)
