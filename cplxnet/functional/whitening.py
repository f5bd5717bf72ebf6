r"""Complex whitening normalisation over channels, one implementation for every rank: batch norm
(statistics per channel over the batch and the spatial dims; :func:`sync_batch_norm`: over the
batches of every data-parallel rank), instance norm (per sample and channel) and group norm (per
sample and group of channels).

Whitening (Trabelsi et al., "Deep Complex Networks", ICLR 2018, Sec. 3.5) treats each complex
value as the 2-vector :math:`(x, y)` of its parts: a group's values are centred by their mean
:math:`\mu` and mapped through :math:`W = (V + \epsilon I)^{-1/2}`, the inverse square root of
their 2x2 covariance :math:`V = [[V_{rr}, V_{ri}], [V_{ri}, V_{ii}]]` (biased estimate;
:func:`~cplxnet.functional.cov2x2.inv_sqrt_2x2`, finite for any covariance the dtype holds:
moduli up to about 1e19 in complex64, whose squares are computed in it), so the whitened
values have identity covariance: unit variance per part, parts uncorrelated. The affine map is
per channel: a real 2x2 ``weight`` :math:`A_c` and a complex ``bias`` :math:`b_c`,
:math:`y = A_c W (z - \mu) + b_c`. The modules initialise :math:`A_c = I / \sqrt 2`, so at
initialisation the output has covariance :math:`I / 2`: variance 0.5 per part and
:math:`E|y|^2 = 1` (the scale of complextorch's and torchcvnn's batch norms).

Layout (eager): the input ``(N, C, *)`` is read as ``(N, C, M)`` complex (``M`` the product of
the spatial dims) and never split into contiguous parts. The means are complex sums over the
last axis; the 2x2 moments :math:`\sum c c^T` and the per-channel 2x2 maps are batched matrix
products of the real view ``view_as_real(c)`` read as ``(N C, M / k, 2k)`` rows of ``k``
positions (:func:`_outer_sum`, :func:`_apply_2x2_into`: a Gram matrix whose diagonal 2x2 blocks
add up to the moments, and a block-diagonal matrix), not the widely linear
:math:`p c + q \bar c`, which loses all precision when a channel's imaginary part is zero (see
:func:`_apply_2x2`). A channels-last input (``torch.channels_last``, ``torch.channels_last_3d``)
is read as its ``(N, C, M)`` view with strides ``(M C, 1, C)``, not copied: the moments are
then one Gram product per sample (a broadcast product above ``_GRAM_MAX_CHANNELS`` channels)
and the 2x2 maps one block-diagonal product on the rows of ``2C`` interleaved values; in eager
mode the output and the input's gradient keep that layout. A non-finite input value makes its
channel's statistics, and so its whole output, non-finite in either layout; on the
channels-last rows (up to ``_GRAM_MAX_CHANNELS`` channels) it turns every channel's output
non-finite, since the block-diagonal product multiplies that channel's non-finite centred
values by zero. One autograd Function (:class:`_WhitenChannels`) holds the forward and a
backward written on the same layout; tracers, compilers and double backward see the same map
composed of differentiable ops (:func:`_whiten_composed`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist

from .._utils import function_output, grad_via_composed, is_tracing, runs_composed, without_autocast
from .cov2x2 import inv_sqrt_2x2_factors, inv_sqrt_2x2_from_factors, inv_sqrt_2x2_grad, xp

__all__ = ["batch_norm", "instance_norm", "group_norm", "sync_batch_norm"]


# ------------------------------------------------------------------------------------------------
# groups of channels: per-(sample, channel) partial sums -> per-group statistics and back
# (torch tensors or, for the per-channel 2x2 math of the eager CPU path, NumPy arrays)
# ------------------------------------------------------------------------------------------------
def _group_sum(t, groups: int, over_batch: bool):
    """Per-(sample, channel) ``t`` ``(N, C, *r)`` summed over each statistic's members:
    ``(1, G, *r)`` when the statistics span the batch, else ``(N, G, *r)``."""
    n, c = t.shape[:2]
    if groups != c:
        t = t.reshape(n, groups, c // groups, *t.shape[2:]).sum(2)
    return t.sum(0)[None] if over_batch else t


def _to_channels(t, channels: int):
    """Per-group ``t`` ``(S, G, *r)`` repeated for each channel of its group: ``(S, C, *r)``."""
    s, g = t.shape[:2]
    if g == channels:
        return t
    rest = t.shape[2:]
    full = xp(t).broadcast_to(t[:, :, None], (s, g, channels // g, *rest))
    return full.reshape(s, channels, *rest)


def _maps(factors, a, channels: int):
    """Per-channel maps ``(T, W)`` from the per-group :func:`inv_sqrt_2x2_factors`: the
    whitening ``W`` ``(S, C, 2, 2)`` of each channel's group and ``T = A W`` with the affine
    matrices ``a`` ``(C, 2, 2)`` (the ``weight`` ``(2, 2, C)`` permuted; ``T = W`` without
    it)."""
    w = _to_channels(inv_sqrt_2x2_from_factors(factors), channels)
    return (w if a is None else a @ w), w


def _matrices(weight: torch.Tensor | None) -> torch.Tensor | None:
    """The affine ``weight`` ``(2, 2, C)`` as per-channel matrices ``(C, 2, 2)`` (a view)."""
    return None if weight is None else weight.permute(2, 0, 1)


def _host_math(x: torch.Tensor) -> bool:
    """Whether the per-channel 2x2 math of a norm of ``x`` runs in NumPy (see the module
    docstring): an eager CPU complex64/complex128 input, a plain tensor with no dispatch mode
    active (a tracer such as ``make_fx`` or fake tensors see torch ops)."""
    return (
        type(x) is torch.Tensor
        and x.device.type == "cpu"
        and x.dtype in (torch.complex64, torch.complex128)
        and not runs_composed()
        and torch._C._len_torch_dispatch_stack() == 0
    )


def _host(t: torch.Tensor | None, host: bool):
    """``t`` as a NumPy array on the host path (no copy unless ``t`` has the negative bit),
    else ``t``; None stays None."""
    return t.detach().resolve_neg().numpy() if host and t is not None else t


def _tensor(a) -> torch.Tensor:
    """A host array as a tensor (no copy unless it is a read-only broadcast view); a tensor
    unchanged."""
    if not isinstance(a, np.ndarray):
        return a
    return torch.from_numpy(a if a.flags.writeable else a.copy())


_GRAM_MAX_CHANNELS = 64  # the channels-last moments as one Gram product up to this many channels
_CHUNK = 4  # positions per row of the standard layout's chunked products


def _chunk(m: int) -> int:
    """Positions per row of the chunked products on the standard layout: ``_CHUNK``, or the
    largest power of two below it that divides ``m``; 1 under a tracer (no guard on a dynamic
    ``m``)."""
    if is_tracing():
        return 1
    k = _CHUNK
    while m % k:
        k //= 2
    return k


def _outer_sum(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_m p_m q_m^T` per (sample, channel) of the real views ``p``, ``q``
    ``(N, C, M, 2)``: ``(N, C, 2, 2)``. On the standard layout each (sample, channel) is read as
    ``M / k`` rows of ``k`` positions (:func:`_chunk`): one batched product
    ``(2k, M/k) x (M/k, 2k)`` whose ``k`` diagonal 2x2 blocks add up to the sum (``k`` times the
    needed multiply-adds, on a shape the matrix kernels run at memory speed: 1.56 ms against
    2.20 ms for the ``(2, M) x (M, 2)`` product at ``(16, 64, 1024)``, complex64, one thread). On
    the channels-last one the ``(N, C)`` rows are interleaved and cannot be batched without a
    copy: the per-sample Gram matrix ``(2C, 2C)`` of the contiguous ``(M, 2C)`` rows is one
    product whose 2x2 diagonal blocks are the sums (``C`` times the needed multiply-adds, yet
    the whole norm ran 3.5x faster with it than with the broadcast product at 8 channels in a
    side run), and above
    ``_GRAM_MAX_CHANNELS`` a broadcast product summed over ``M``."""
    n, c, m = p.shape[:3]
    if p.is_contiguous() and q.is_contiguous():
        k = _chunk(m)
        pr, qr = p.reshape(n * c, m // k, 2 * k), q.reshape(n * c, m // k, 2 * k)
        gram = torch.bmm(pr.mT, qr).view(n, c, k, 2, k, 2)
        return torch.diagonal(gram, dim1=2, dim2=4).sum(-1)
    pt, qt = p.transpose(1, 2), q.transpose(1, 2)  # (N, M, C, 2)
    if c <= _GRAM_MAX_CHANNELS and pt.is_contiguous() and qt.is_contiguous():
        gram = torch.bmm(pt.reshape(n, m, 2 * c).mT, qt.reshape(n, m, 2 * c))  # (N, 2C, 2C)
        return torch.diagonal(gram.view(n, c, 2, c, 2), dim1=1, dim2=3).permute(0, 3, 1, 2)
    return (p.unsqueeze(-1) * q.unsqueeze(-2)).sum(2)


def _is_channels_last_view(z: torch.Tensor) -> bool:
    """Whether ``z`` ``(N, C, M)`` has the strides ``(M C, 1, C)`` of a channels-last input's
    view and is not also contiguous."""
    n, c, m = z.shape
    return z.stride() == (m * c, 1, c) and not z.is_contiguous()


def _dense(x3: torch.Tensor) -> torch.Tensor:
    """``x3`` ``(N, C, M)`` itself when it is contiguous or a channels-last view, else a
    contiguous copy."""
    return x3 if x3.is_contiguous() or _is_channels_last_view(x3) else x3.contiguous()


def _moments(x3: torch.Tensor, groups: int, over_batch: bool):
    """Centred data ``c`` ``(N, C, M)``, per-group mean ``(S, G)`` (complex) and biased 2x2
    covariance ``(S, G, 2, 2)`` of ``x3`` (differentiable torch ops)."""
    n_ch, m = x3.shape[1], x3.shape[2]
    count = m * (n_ch // groups) * (x3.shape[0] if over_batch else 1)
    mean = _group_sum(x3.sum(-1), groups, over_batch) / count
    c = x3 - _to_channels(mean, n_ch).unsqueeze(-1)
    cr = torch.view_as_real(c)
    cov = _group_sum(_outer_sum(cr, cr), groups, over_batch) / count
    return c, mean, cov


def _apply_2x2(t: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    r"""The real 2x2 maps ``t`` ``(S, C, 2, 2)`` applied to complex ``z`` ``(N, C, M)`` as
    :math:`(x, y)` vectors, on the real view. The widely linear form :math:`p z + q \bar z`
    computes the same map with fewer passes but cancels catastrophically when ``t`` is far from
    isotropic (a channel whose imaginary part is zero: :math:`p \approx -q`, errors of
    :math:`10^{-7} |p| |z|` in float32), so it is not used on the data. A channels-last ``z``
    (eager) keeps its layout: the rows of :func:`_apply_2x2_into`, differentiably (above
    ``_GRAM_MAX_CHANNELS`` channels the product, then one copy into that layout)."""
    if is_tracing():
        return torch.view_as_complex(torch.view_as_real(z) @ t.mT)
    if _rows_layout(z):
        return _apply_rows(t, z)
    y = torch.view_as_complex(torch.view_as_real(z) @ t.mT)
    if _is_channels_last_view(z):  # many channels: one copy back into the layout
        y = y.transpose(1, 2).contiguous().transpose(1, 2)
    return y


def _rows_layout(z: torch.Tensor) -> bool:
    """Whether ``z`` ``(N, C, M)`` is the channels-last view (strides ``(M C, 1, C)``, not also
    contiguous) with at most ``_GRAM_MAX_CHANNELS`` channels: the 2x2 maps run on its rows."""
    return z.shape[1] <= _GRAM_MAX_CHANNELS and _is_channels_last_view(z)


def _apply_rows(t, z: torch.Tensor) -> torch.Tensor:
    """The 2x2 maps ``t`` on the rows of channels-last ``z``: each position's ``2C`` interleaved
    values times the block-diagonal :func:`_block_diagonal` (``C`` times the needed
    multiply-adds on contiguous rows, faster than strided passes); the result channels-last."""
    n, c, m = z.shape
    rows = torch.view_as_real(z).transpose(1, 2).reshape(n, m, 2 * c)
    out = torch.matmul(rows, _tensor(_block_diagonal(t)))  # (S, 2C, 2C) broadcast over the batch
    return torch.view_as_complex(out.view(n, m, c, 2)).transpose(1, 2)


def _eye(k: int, like):
    """The ``k x k`` boolean identity in the namespace (and on the device) of ``like``."""
    if isinstance(like, np.ndarray):
        return np.eye(k, dtype=bool)
    return torch.eye(k, dtype=torch.bool, device=like.device)


def _block_diagonal(t):
    """The per-channel 2x2 maps ``t`` ``(S, C, 2, 2)`` as one block-diagonal ``(S, 2C, 2C)``
    matrix acting on row vectors of interleaved parts: ``(x @ B)[2c + i] = sum_j t[c, i, j]
    x[2c + j]``."""
    s, c = t.shape[:2]
    # (S, C, 2, C, 2); selected, not multiplied, so that a non-finite map stays in its block
    b = xp(t).where(_eye(c, t)[:, None, :, None], t.swapaxes(-1, -2)[:, :, :, None, :], 0)
    return b.reshape(s, 2 * c, 2 * c)


def _chunk_blocks(t, n: int, k: int) -> torch.Tensor:
    """The per-channel 2x2 maps ``t`` ``(S, C, 2, 2)`` as ``(N C, 2k, 2k)`` block-diagonal
    matrices acting on rows of ``k`` interleaved positions: ``(x @ B)[2j + i] = sum_l t[i, l]
    x[2j + l]`` for each of the ``k`` positions ``j``."""
    s, c = t.shape[:2]
    b = xp(t).where(_eye(k, t)[:, None, :, None], t.swapaxes(-1, -2)[:, :, None, :, None, :], 0)
    b = _tensor(b.reshape(s, c, 2 * k, 2 * k))
    return b.expand(n, c, 2 * k, 2 * k).reshape(n * c, 2 * k, 2 * k)


def _apply_2x2_into(t, z: torch.Tensor, add=None) -> torch.Tensor:
    """:func:`_apply_2x2` outside autograd, in the layout of ``z``; with ``add = (t2, z2)``
    (``z2`` of ``z``'s layout) the sum ``t z + t2 z2``. ``t`` is a tensor or a host array.
    Standard layout: each (sample, channel)
    as ``M / k`` rows of ``k`` interleaved positions (:func:`_chunk`) times a block-diagonal
    ``(2k, 2k)`` matrix, one batched product (the second term accumulated into it): ``k`` times
    the needed multiply-adds on a shape the matrix kernels run at memory speed (1.2 ms at
    ``(16, 64, 1024)``, complex64, one thread, against 9.0 ms for four strided real passes and
    3.2 ms for the ``(M, 2) x (2, 2)`` product); channels-last: :func:`_apply_rows`; any other
    layout: four strided real passes."""
    if _rows_layout(z):
        out = _apply_rows(t, z)
        return out if add is None else out.add_(_apply_rows(*add))
    if z.is_contiguous() and (add is None or add[1].is_contiguous()):
        n, c, m = z.shape
        k = _chunk(m)

        def rows(v):
            return torch.view_as_real(v).view(n * c, m // k, 2 * k)

        out = torch.bmm(rows(z), _chunk_blocks(t, n, k))
        if add is not None:
            out.baddbmm_(rows(add[1]), _chunk_blocks(add[0], n, k))
        return torch.view_as_complex(out.view(n, c, m, 2))
    t = _tensor(t)
    zr = torch.view_as_real(z)
    a, b = zr[..., 0], zr[..., 1]
    out = torch.empty_like(zr)
    for i in (0, 1):
        part = out[..., i]
        torch.mul(a, t[..., i, 0].unsqueeze(-1), out=part)
        part.addcmul_(b, t[..., i, 1].unsqueeze(-1))
    out = torch.view_as_complex(out)
    return out if add is None else out.add_(_apply_2x2_into(*add))


def _whiten_composed(x3, weight, bias, groups, over_batch, eps, stats=None):
    """The whitening of ``x3`` ``(N, C, M)`` composed of differentiable ops: batch statistics,
    or ``stats = (mean (S, C), cov (S, C, 2, 2))`` per channel. Returns ``(y, mean, cov)``."""
    if stats is None:
        c, mean, cov = _moments(x3, groups, over_batch)
    else:
        mean, cov = stats
        c = x3 - mean.unsqueeze(-1)
    t, _ = _maps(inv_sqrt_2x2_factors(cov, eps), _matrices(weight), x3.shape[1])
    y = _apply_2x2(t, c)
    return (y if bias is None else y + bias.unsqueeze(-1)), mean, cov


class _WhitenChannels(torch.autograd.Function):
    r"""Batch-statistics whitening and affine of complex ``x3`` ``(N, C, M)`` (see the module
    docstring) with a hand-written backward on the same layout.

    Backward, with :math:`c` the centred data, :math:`T = A W` per channel, :math:`g` the output
    gradient and :math:`n` the values per group: :math:`G = \sum_m g c^T` per (sample, channel)
    (batched 2x2 products of the real views), :math:`g_A = \sum_n G W`, :math:`g_W = \sum A^T G`
    over each group's members, :math:`g_V` from :math:`g_W` in closed form
    (:func:`~cplxnet.functional.cov2x2.inv_sqrt_2x2_grad`) on the small per-group tensors, and
    :math:`g_z = T^T g + S c - \frac1n \sum T^T \textstyle\sum_m g` with
    :math:`S = 2 g_V / n`; the 2x2 maps :math:`T^T` and :math:`S` act on the real view
    (:func:`_apply_2x2`). The per-channel 2x2 math of both directions runs in NumPy on an eager
    CPU input (:func:`_host_math`). Saved: the centred data, the per-channel maps :math:`T`,
    :math:`W` and the factors of the per-group inverse square roots. Double backward
    differentiates :func:`_whiten_composed`.
    """

    @staticmethod
    @np.errstate(all="ignore")  # degenerate statistics: torch's silent inf/nan
    def forward(ctx, x3, weight, bias, groups, over_batch, eps):  # noqa: D102
        n, n_ch, m = x3.shape
        count = m * (n_ch // groups) * (n if over_batch else 1)
        if groups == n_ch:  # per channel: one reduction, kept (S, C, 1) for the centring
            mean3 = x3.mean((0, 2) if over_batch else 2, keepdim=True)
            c, mean = x3 - mean3, mean3[..., 0]
        else:
            mean = _group_sum(x3.sum(-1), groups, over_batch) / count
            c = x3 - _to_channels(mean, n_ch).unsqueeze(-1)
        cr = torch.view_as_real(c)
        cov = _group_sum(_outer_sum(cr, cr), groups, over_batch) / count
        host = _host_math(x3) and cov.dtype in (torch.float32, torch.float64)  # not autocast
        eps = float(eps)  # a NumPy scalar would promote the float32 math
        factors = inv_sqrt_2x2_factors(_host(cov, host), eps)
        t, w = _maps(factors, _host(_matrices(weight), host), n_ch)
        y = _apply_2x2_into(t, c)
        if bias is not None:
            y.add_(bias.unsqueeze(-1))
        ctx.spec = (groups, over_batch, eps, host)
        saved = [_tensor(a) for a in (t, w, *factors)]
        ctx.save_for_backward(x3, weight, bias, c, *saved)
        ctx.mark_non_differentiable(mean, cov)
        return function_output(y, x3), mean, cov

    @staticmethod
    @np.errstate(all="ignore")
    def backward(ctx, grad, *_):  # noqa: D102
        x3, weight, bias, c, *saved = ctx.saved_tensors
        groups, over_batch, eps, host = ctx.spec
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            out = grad_via_composed(
                lambda x, w, b: _whiten_composed(x, w, b, groups, over_batch, eps)[0],
                (x3, weight, bias),
                ctx,
                grad,
            )
            return (*out[:3], None, None, None)
        t, w, *factors = (_host(a, host) for a in saved)
        n, n_ch, m = c.shape
        count = m * (n_ch // groups) * (n if over_batch else 1)
        g = grad.resolve_conj()
        if g.stride() != c.stride():  # the layout of the centred data
            g = torch.empty_like(c).copy_(g)
        g_sum = g.sum(-1)  # (N, C)
        gt = _host(_outer_sum(torch.view_as_real(g), torch.view_as_real(c)), host)  # sum g c^T
        g_weight = g_bias = None
        if weight is None:
            g_w = gt
        else:
            g_w = _host(_matrices(weight), host).swapaxes(-1, -2) @ gt
            if ctx.needs_input_grad[1]:
                g_weight = _tensor((gt @ w).sum(0)).permute(1, 2, 0)
        if bias is not None and ctx.needs_input_grad[2]:
            g_bias = g_sum.sum(0)
        g_a = inv_sqrt_2x2_grad(factors, _group_sum(g_w, groups, over_batch))
        s = _to_channels(g_a * (2.0 / count), n_ch)  # d/dc of <G_A, c c^T / n> is 2 G_A c / n
        # the mean's share: (1/n) sum over the group of T^T sum_m g, per channel
        t_t = t.swapaxes(-1, -2)
        k = (t_t @ _host(torch.view_as_real(g_sum), host)[..., None])[..., 0]
        k = _tensor(_to_channels(_group_sum(k, groups, over_batch) / count, n_ch))
        gz = _apply_2x2_into(t_t, g, add=(s, c)).sub_(torch.view_as_complex(k).unsqueeze(-1))
        return gz, g_weight, g_bias, None, None, None


@without_autocast
def _whiten(x, weight, bias, groups, over_batch, eps, stats=None):
    """Whitening of ``x`` ``(N, C, *)`` as ``(N, C, M)``: the fused Function when eager with
    batch statistics, else the composed form. Returns ``(y of x's shape, mean, cov)``; an empty
    ``x`` gives an empty ``y`` and no statistics (None), as torch's norms (no running update).
    Autocast is off inside (:func:`~cplxnet._utils.without_autocast`)."""
    if x.numel() == 0:
        return x.clone(), None, None
    x3 = x.resolve_conj().reshape(x.shape[0], x.shape[1], -1)
    if stats is not None or runs_composed():
        y, mean, cov = _whiten_composed(x3, weight, bias, groups, over_batch, eps, stats)
        return y.reshape(x.shape), mean.detach(), cov.detach()
    y, mean, cov = _WhitenChannels.apply(_dense(x3), weight, bias, groups, over_batch, eps)
    return y.reshape(x.shape), mean, cov


def _check_input(x: torch.Tensor, owner: str, weight=None, bias=None) -> None:
    if not x.is_complex():
        raise TypeError(f"{owner}: input must be a complex tensor, got {x.dtype}")
    if x.dim() < 2:
        raise ValueError(f"{owner}: expected an (N, C, *) input, got shape {tuple(x.shape)}")
    for name, t, want in (("weight", weight, x.real.dtype), ("bias", bias, x.dtype)):
        if t is not None and t.dtype != want:
            raise TypeError(
                f"{owner}: {name} must be {want} for a {x.dtype} input, got {t.dtype}; "
                f"convert it with .to({want})"
            )


def _running_stats(running_mean, running_cov):
    """Buffers ``(C,)`` complex, ``(2, 2, C)`` real as per-channel ``(1, C)``, ``(1, C, 2, 2)``."""
    return running_mean.unsqueeze(0), running_cov.permute(2, 0, 1).unsqueeze(0)


def _update(running_mean, running_cov, mean, cov, count, momentum):
    """``running = (1 - momentum) running + momentum * batch`` with the unbiased covariance
    (factor ``count / (count - 1)``, ``count`` a number or a 0-d tensor); ``mean (S, C)``,
    ``cov (S, C, 2, 2)`` averaged over ``S``."""
    with torch.no_grad():
        if isinstance(count, torch.Tensor):  # a device value: no host read
            unbias = count / (count - 1).clamp_min(1)
        else:
            unbias = count / max(count - 1, 1)
        mean, cov = (mean[0], cov[0]) if mean.shape[0] == 1 else (mean.mean(0), cov.mean(0))
        running_mean.lerp_(mean.to(running_mean.dtype), momentum)
        running_cov.lerp_((cov * unbias).permute(1, 2, 0).to(running_cov.dtype), momentum)


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
    r"""Whitening batch normalisation of a complex ``(N, C, *)`` input (``(N, C)``, ``(N, C, L)``,
    ``(N, C, H, W)``, ``(N, C, D, H, W)``), per channel (see the module docstring).

    In training (or without running statistics) each channel is centred by its batch mean and
    whitened with its batch 2x2 covariance over the batch and spatial dims (biased estimate).
    When buffers are given and ``training`` is True they are updated in place as
    ``torch.nn.BatchNorm*d`` does: ``running = (1 - momentum) * running + momentum * batch`` with
    the *unbiased* covariance (factor :math:`n/(n-1)`). In evaluation the running statistics are
    used.

    Args:
        running_mean: complex ``(C,)`` or None.
        running_cov: real ``(2, 2, C)`` covariance :math:`[[V_{rr}, V_{ri}], [V_{ri}, V_{ii}]]`
            or None.
        weight: real ``(2, 2, C)`` per-channel affine matrix or None; bias: complex ``(C,)``.
    """
    _check_input(x, "batch_norm", weight, bias)
    n_ch = x.shape[1]
    if training or running_mean is None:
        count = x.numel() // max(n_ch, 1)
        if count == 1 and training:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, "
                f"got input {tuple(x.shape)}"
            )
        y, mean, cov = _whiten(x, weight, bias, n_ch, True, eps)
        if training and running_mean is not None and mean is not None:
            _update(running_mean, running_cov, mean, cov, count, momentum)
        return y
    stats = _running_stats(running_mean, running_cov)
    return _whiten(x, weight, bias, n_ch, True, eps, stats)[0]


def instance_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor | None = None,
    running_cov: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    r"""Whitening instance normalisation of a complex ``(N, C, *)`` input: each sample's channel
    is centred and whitened with its own mean and 2x2 covariance over the spatial dims (see the
    module docstring), as ``torch.nn.functional.instance_norm`` (same argument order).

    With ``use_input_stats`` and running buffers, the buffers are updated with the per-instance
    statistics averaged over the batch (unbiased covariance), as torch's instance norm; without
    ``use_input_stats`` the running statistics ``running_mean`` complex ``(C,)`` and
    ``running_cov`` real ``(2, 2, C)`` are used. ``weight`` real ``(2, 2, C)``, ``bias`` complex
    ``(C,)``.
    """
    _check_input(x, "instance_norm", weight, bias)
    n_ch = x.shape[1]
    if use_input_stats:
        count = x.numel() // max(x.shape[0] * n_ch, 1)
        y, mean, cov = _whiten(x, weight, bias, n_ch, False, eps)
        if running_mean is not None and mean is not None:
            _update(running_mean, running_cov, mean, cov, count, momentum)
        return y
    stats = _running_stats(running_mean, running_cov)
    return _whiten(x, weight, bias, n_ch, True, eps, stats)[0]


def group_norm(
    x: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    r"""Whitening group normalisation of a complex ``(N, C, *)`` input: the channels of each
    sample are split into ``num_groups`` groups, each centred and whitened with its mean and 2x2
    covariance over its channels and spatial dims (see the module docstring); then the
    per-channel affine ``weight`` real ``(2, 2, C)`` and ``bias`` complex ``(C,)``. Arguments
    and the inputs refused (one value per group) are ``torch.nn.functional.group_norm``'s."""
    _check_input(x, "group_norm", weight, bias)
    if num_groups <= 0 or x.shape[1] % num_groups:
        raise ValueError(
            f"group_norm: expected the {x.shape[1]} channels of input {tuple(x.shape)} to be "
            f"divisible by num_groups={num_groups}"
        )
    if x.shape[0] * (x.shape[1] // num_groups) * math.prod(x.shape[2:]) == 1:  # torch's check
        raise ValueError(f"group_norm: expected more than 1 value per group, got input "
                         f"{tuple(x.shape)} with num_groups={num_groups}")  # fmt: skip
    return _whiten(x, weight, bias, num_groups, False, eps)[0]


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
    world), as ``torch.nn.SyncBatchNorm``. Each rank's count :math:`n_r`, mean :math:`\mu_r` and
    biased 2x2 covariance :math:`V_r` are all-gathered and combined exactly (Chan et al., 1979):
    :math:`N = \sum_r n_r`, :math:`\mu = \sum_r n_r \mu_r / N`,
    :math:`V = \sum_r n_r (V_r + (\mu_r - \mu)(\mu_r - \mu)^T) / N`, the global batch's
    statistics; the all-gather's backward all-reduces, so the gradients are the global batch's.
    The buffers, when given, take the global statistics (unbiased over all :math:`N` values), as
    :func:`batch_norm` with one batch. A rank's batch may be empty (it contributes nothing, gets
    an empty output and joins the backward); all empty leaves the buffers. One value per channel
    in all gives the bias (the count is not read on the host to refuse it, as torch's does).
    Needs an initialised ``torch.distributed``; a collective: every rank calls it. The module:
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
    if not count:  # in the graphs of the gather and of the affine parameters: an empty rank's
        # backward runs the others' collectives (the gather's all-reduce, DDP's)
        return x.clone() + sum(t.sum() * 0 for t in (every, weight, bias) if t is not None)
    y = _whiten_composed(x3, weight, bias, n_ch, True, eps, stats)[0]
    return y.reshape(x.shape)
