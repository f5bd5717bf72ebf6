"""Public helpers for code built on cplxnet (the model zoo, your own layers).

* :func:`pack` / :func:`unpack`: the zero-copy interleaved real view ``[re0, im0, re1, ...]`` of a
  complex tensor and back (``pack(a) @ pack(b) = Re(a b^H)``).
* :func:`check_choice`, :func:`check_indices`, :func:`check_mask`: the input checks cplxnet's
  layers use, raising errors that name the owner and the fix.
* :func:`is_tracing`: True under ``torch.compile`` / ``torch.export``, where checks that read
  tensor data are skipped.
* :func:`count_parameters`: complex and real parameters of a model, and their total in reals.
"""

from typing import NamedTuple

import torch
from torch import nn

from ._utils import check_choice, check_indices, check_mask, is_tracing, pack, unpack

__all__ = [
    "pack",
    "unpack",
    "check_choice",
    "check_indices",
    "check_mask",
    "is_tracing",
    "count_parameters",
    "ParameterCount",
]


class ParameterCount(NamedTuple):
    """Parameter counts: complex parameters, real parameters, and the total in real numbers
    (``total_real = 2 * complex + real``: a complex parameter holds two reals)."""

    complex: int
    real: int
    total_real: int


def _packed_complex_parameters(model: nn.Module) -> set[int]:
    """Ids of real parameters that store a complex table packed (``[re, im]`` interleaved), as
    :class:`cplxnet.nn.Embedding`'s ``packed_weight``: a module whose ``weight`` is a complex
    view sharing the parameter's storage."""
    packed: set[int] = set()
    for module in model.modules():
        if not isinstance(getattr(type(module), "weight", None), property):
            continue
        view = module.weight
        if not isinstance(view, torch.Tensor) or not view.is_complex():
            continue
        ptr = view.untyped_storage().data_ptr()
        for p in module.parameters(recurse=False):
            if not p.is_complex() and p.untyped_storage().data_ptr() == ptr:
                packed.add(id(p))
    return packed


def count_parameters(model: nn.Module, trainable_only: bool = True) -> ParameterCount:
    """Count ``model``'s (unique) parameters: complex ones, real ones, and the total in reals.

    A complex table stored packed as reals (:class:`cplxnet.nn.Embedding` keeps its ``(V, D)``
    complex table as a real ``(V, 2D)`` parameter for sparse gradients) counts as ``V * D``
    complex parameters.
    """
    packed = _packed_complex_parameters(model)
    n_complex = n_real = 0
    for p in model.parameters():
        if trainable_only and not p.requires_grad:
            continue
        if p.is_complex():
            n_complex += p.numel()
        elif id(p) in packed:
            n_complex += p.numel() // 2
        else:
            n_real += p.numel()
    return ParameterCount(n_complex, n_real, 2 * n_complex + n_real)
