"""Complex token embedding lookup whose backward works (dense or sparse)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["embedding", "embedding_packed"]


def embedding_packed(
    ids: torch.Tensor,
    packed_weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    r"""Look up rows of a packed complex table.

    ``packed_weight`` is the real ``(V, 2D)`` view :func:`cplxnet._utils.pack` of a complex
    ``(V, D)`` table (interleaved ``[re0, im0, re1, im1, ...]``). The lookup is the real
    ``F.embedding`` (so ``padding_idx``, ``max_norm`` (the Euclidean norm of the packed row equals
    the complex norm :math:`\sqrt{\sum|w|^2}`), ``scale_grad_by_freq`` and ``sparse`` behave as in
    torch), and the ``(*, 2D)`` result is viewed back as complex ``(*, D)`` without a copy.
    With ``sparse=True`` the gradient of ``packed_weight`` is a sparse COO tensor usable with
    ``torch.optim.SparseAdam`` (which rejects complex parameters, hence the real storage).
    """
    out = F.embedding(ids, packed_weight, padding_idx, max_norm, 2.0, scale_grad_by_freq, sparse)
    return torch.view_as_complex(out.unflatten(-1, (-1, 2)))


def embedding(
    ids: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    r"""Rows ``weight[ids]`` of a complex ``(V, D)`` table, with a working (dense) backward.

    ``torch.nn.functional.embedding`` has no complex backward in torch 2.13; this runs it on the
    zero-copy real view ``view_as_real(weight).flatten(-2)`` (see :func:`embedding_packed`).
    ``padding_idx`` rows receive no gradient. For sparse gradients keep the table real-packed
    (:class:`cplxnet.nn.Embedding` does).
    """
    if not weight.is_complex():
        return F.embedding(ids, weight, padding_idx, max_norm, 2.0, scale_grad_by_freq)
    packed = torch.view_as_real(weight).flatten(-2)  # (V, 2D)
    return embedding_packed(ids, packed, padding_idx, max_norm, scale_grad_by_freq, False)
