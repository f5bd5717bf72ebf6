"""Public helpers for code built on cplxnet (the model zoo, your own layers).

* :func:`pack` / :func:`unpack`: the zero-copy interleaved real view ``[re0, im0, re1, ...]`` of a
  complex tensor and back (``pack(a) @ pack(b) = Re(a b^H)``).
* :func:`check_choice`, :func:`check_indices`, :func:`check_mask`: the input checks cplxnet's
  layers use, raising errors that name the owner and the fix.
* :func:`is_tracing`: True under ``torch.compile`` / ``torch.export``, where checks that read
  tensor data are skipped.
* :func:`without_autocast`: the decorator that keeps cplxnet's layers out of autocast on complex
  input (as torch's complex ops), for a layer of your own computed on real kernels.
* :func:`count_parameters`: complex and real parameters of a model, and their total in reals.
* :func:`parameters_to_vector`, :func:`vector_to_parameters`: torch's utilities of those names
  on one real vector, each complex parameter as its (re, im) pairs; torch's concatenate into
  one complex vector and write it back, so they turn a model's real parameters complex.
* :func:`update_bn`, :func:`replace_all_batch_norm_modules_`: torch's batch-norm utilities
  (``torch.optim.swa_utils.update_bn``, ``torch.func.replace_all_batch_norm_modules_``), which
  find only ``torch.nn``'s batch norms, for cplxnet's complex ``BatchNorm1d/2d/3d`` and
  ``SyncBatchNorm`` as well.
"""

from collections.abc import Iterable
from typing import Any, NamedTuple

import torch
from torch import nn

from ._utils import (
    as_complex,
    check_choice,
    check_indices,
    check_mask,
    is_tracing,
    pack,
    real_dtype,
    unpack,
    without_autocast,
)

__all__ = [
    "pack",
    "unpack",
    "check_choice",
    "check_indices",
    "check_mask",
    "is_tracing",
    "without_autocast",
    "count_parameters",
    "ParameterCount",
    "parameters_to_vector",
    "vector_to_parameters",
    "update_bn",
    "replace_all_batch_norm_modules_",
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


def parameters_to_vector(parameters: Iterable[torch.Tensor]) -> torch.Tensor:
    """One real 1-D vector of ``parameters``: a complex parameter contributes its interleaved
    (re, im) pairs (``torch.view_as_real``), a real one its values, in order. Unlike
    ``torch.nn.utils.parameters_to_vector`` (one complex vector when any parameter is complex),
    it keeps a model's real and complex parameters apart; its length is
    :func:`count_parameters`'s ``total_real`` for a model without packed tables.

    Examples::

        >>> import cplxnet.nn as cnn
        >>> model = torch.nn.Sequential(cnn.Linear(3, 2), cnn.LayerNorm(2))
        >>> vec = parameters_to_vector(model.parameters())
        >>> vec.dtype, vec.numel()  # Linear: 2 x (6 + 2); LayerNorm: 2 x 2 real gains, 2 x 2
        (torch.float32, 24)
        >>> vector_to_parameters(vec * 0, model.parameters())
        >>> [p.dtype for p in model.parameters()]
        [torch.complex64, torch.complex64, torch.float32, torch.complex64]
    """
    parts = [(torch.view_as_real(p) if p.is_complex() else p).reshape(-1) for p in parameters]
    if not parts:
        raise ValueError("parameters_to_vector: no parameters given")
    return torch.cat(parts)


def vector_to_parameters(vec: torch.Tensor, parameters: Iterable[torch.Tensor]) -> None:
    """Write the real 1-D ``vec`` of :func:`parameters_to_vector` back into ``parameters``: each
    takes its slice (a complex one its (re, im) pairs) in its own dtype, so real parameters stay
    real. As torch's ``vector_to_parameters``, a parameter's ``.data`` becomes a view of ``vec``
    where the layout allows it (a complex one at an odd offset gets a copy)."""
    if not isinstance(vec, torch.Tensor) or vec.dim() != 1 or vec.is_complex():
        what = f"{vec.dtype} {tuple(vec.shape)}" if isinstance(vec, torch.Tensor) else type(vec)
        raise ValueError(
            f"vector_to_parameters: expected a real 1-D tensor, got {what}; pass the vector of "
            "cplxnet.utils.parameters_to_vector"
        )
    params = list(parameters)
    sizes = [p.numel() * (2 if p.is_complex() else 1) for p in params]
    if sum(sizes) != vec.numel():
        raise ValueError(
            f"vector_to_parameters: the parameters hold {sum(sizes):,} reals, the vector "
            f"{vec.numel():,}; pass the vector of parameters_to_vector over the same parameters"
        )
    start = 0
    for p, size in zip(params, sizes):
        part = vec[start : start + size]
        start += size
        if p.is_complex():
            p.data = as_complex(part.to(real_dtype(p.dtype)).view(*p.shape, 2))
        else:
            p.data = part.to(p.dtype).view_as(p)


def _batch_norms(model: nn.Module) -> list[nn.Module]:
    """``model``'s batch norms: ``torch.nn``'s and cplxnet's (not the instance norms, as torch)."""
    from .nn import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm

    kinds = (nn.modules.batchnorm._BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm)
    return [m for m in model.modules() if isinstance(m, kinds)]


@torch.no_grad()
def update_bn(
    loader: Iterable[Any], model: nn.Module, device: int | torch.device | None = None
) -> None:
    """Recompute the running statistics of every batch norm of ``model``, cplxnet's complex
    ones and ``torch.nn``'s, with one pass over ``loader`` in training mode (a cumulative
    average over its batches: ``momentum=None``); momenta and the model's mode are restored.
    ``torch.optim.swa_utils.update_bn``'s arguments and behaviour (after weight averaging,
    e.g. ``AveragedModel``); torch's own neither resets cplxnet's batch norms nor averages
    over the pass (their forwards move the old statistics by their momentum). A batch is a
    tensor, or a list or tuple whose first element is the model's input.

    Examples::

        >>> model = torch.nn.Sequential(cplxnet.nn.Conv2d(2, 4, 3), cplxnet.nn.BatchNorm2d(4))
        >>> loader = [torch.randn(8, 2, 6, 6, dtype=torch.cfloat) for _ in range(3)]
        >>> update_bn(loader, model)
        >>> int(model[1].num_batches_tracked)
        3
    """
    momenta = {}
    for module in _batch_norms(model):
        module.reset_running_stats()
        momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        model(batch if device is None else batch.to(device))
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


def replace_all_batch_norm_modules_(root: nn.Module) -> nn.Module:
    """Make every batch norm of ``root``, cplxnet's complex ones and ``torch.nn``'s, use batch
    statistics without running ones (buffers set to None, ``track_running_stats=False``), in
    place, so that ``torch.func.vmap`` can run the model in training mode;
    ``torch.func.replace_all_batch_norm_modules_``'s behaviour, which finds only torch's.
    Returns ``root``.

    Examples::

        >>> bn = replace_all_batch_norm_modules_(cplxnet.nn.BatchNorm2d(4))
        >>> bn.running_mean is None, bn.track_running_stats
        (True, False)
    """
    torch.func.replace_all_batch_norm_modules_(root)  # torch.nn's (and real-dtype cplxnet's)
    for module in _batch_norms(root):  # the complex ones left
        if module.track_running_stats:
            module.running_mean = module.running_cov = module.num_batches_tracked = None
            module.track_running_stats = False
    return root
