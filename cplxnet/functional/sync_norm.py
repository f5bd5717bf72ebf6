r"""Whitening batch normalisation with statistics over every rank of a process group (the complex
counterpart of ``torch.nn.SyncBatchNorm``, for data-parallel training).

Each rank computes the count :math:`n_r`, mean :math:`\mu_r` and biased 2x2 covariance
:math:`V_r` of its own batch per channel; one all-gather shares them, and every rank combines
them exactly (the parallel form of Chan et al., 1979):

.. math::
    N = \sum_r n_r, \qquad \mu = \frac1N \sum_r n_r \mu_r, \qquad
    V = \frac1N \sum_r n_r \left(V_r + (\mu_r - \mu)(\mu_r - \mu)^T\right),

the statistics of the concatenated global batch. Each rank then whitens its own batch with
:math:`(\mu, V)` (:func:`cplxnet.functional.whitening`'s map). The all-gather is differentiable
(its backward all-reduces the gradients of the gathered statistics), so the gradients are those
of the global batch, as torch's ``SyncBatchNorm``.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from .._utils import without_autocast
from .whitening import _check_input, _moments, _update, _whiten_composed

__all__ = ["sync_batch_norm"]


class _AllGather(torch.autograd.Function):
    """``(W, *s)``: ``local`` ``(*s)`` of every rank of ``group`` in rank order; the backward
    sums the gradient over the ranks (all-reduce) and returns this rank's slice."""

    @staticmethod
    def forward(ctx, local, group):  # noqa: D102
        out = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
        dist.all_gather(out, local.contiguous(), group=group)
        ctx.group, ctx.rank = group, dist.get_rank(group)
        return torch.stack(out)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad[ctx.rank], None


@without_autocast
def sync_batch_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_cov: torch.Tensor | None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    momentum: float | torch.Tensor = 0.1,
    eps: float = 1e-5,
    process_group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    r"""Whitening batch normalisation in training of a complex ``(N, C, *)`` input with each
    channel's statistics over the batches of every rank of ``process_group`` (default: the
    world), combined as in the module docstring; the buffers, when given, are updated with the
    global statistics (unbiased covariance over the :math:`N` values of all ranks), as
    :func:`~cplxnet.functional.batch_norm` does with one batch. A rank's batch may be empty
    (``N = 0``: it contributes nothing and gets an empty output). Needs an initialised
    ``torch.distributed``; every rank of the group must call it (a collective). The module:
    :class:`cplxnet.nn.SyncBatchNorm`.
    """
    _check_input(x, "sync_batch_norm", weight, bias)
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "sync_batch_norm: torch.distributed is not initialised; call "
            "torch.distributed.init_process_group first, or use batch_norm in one process"
        )
    n_ch = x.shape[1]
    x3 = x.resolve_conj().reshape(x.shape[0], n_ch, math.prod(x.shape[2:]))
    count = x3.shape[0] * x3.shape[2]
    rk = {"dtype": x.real.dtype, "device": x.device}
    if count:
        _, mean, cov = _moments(x3, n_ch, True)  # (1, C) complex, (1, C, 2, 2)
        mean, cov = torch.view_as_real(mean[0]), cov[0]
    else:  # an empty batch: weight 0 in the sums below, in x's graph (the backward's collective)
        zero = x3.sum().real * 0
        mean, cov = torch.zeros(n_ch, 2, **rk) + zero, torch.zeros(n_ch, 2, 2, **rk) + zero
    local = torch.cat([torch.full((n_ch, 1), float(count), **rk), mean, cov.flatten(1)], 1)
    every = _AllGather.apply(local, process_group)  # (W, C, 7)
    n, means, covs = every[..., :1], every[..., 1:3], every[..., 3:].unflatten(-1, (2, 2))
    total = n.sum(0)  # (C, 1)
    seen = total > 0  # every rank empty: no statistics, no update (as batch_norm)
    total = total.clamp_min(1)
    g_mean = (n * means).sum(0) / total  # (C, 2)
    d = means - g_mean
    g_cov = (n[..., None] * (covs + d[..., :, None] * d[..., None, :])).sum(0) / total[..., None]
    stats = (torch.view_as_complex(g_mean.contiguous())[None], g_cov[None])
    if running_mean is not None:
        momentum = torch.as_tensor(momentum, dtype=running_cov.dtype, device=x.device) * seen[0, 0]
        _update(running_mean, running_cov, stats[0].detach(), stats[1].detach(), total[0, 0],
                momentum)  # fmt: skip
    if not count:
        return x.clone() + every.sum() * 0  # joins the all-reduce of the gather's backward
    y = _whiten_composed(x3, weight, bias, n_ch, True, eps, stats)[0]
    return y.reshape(x.shape)
