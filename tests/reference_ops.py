"""Reference implementations of the layers that have hand-written fast paths in cplxnet.

These are the straightforward compositions of torch ops (autograd derives the backward) that
the library used before its contiguous-parts / hand-written-backward implementations; the tests
check the library against them in values and gradients, and ``benchmarks/layers.py`` times them
as the "previous implementation" rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from cplxnet._utils import as_complex


def _sq_modulus(c: torch.Tensor) -> torch.Tensor:
    """``|c|^2`` without the square root of ``abs`` (real, same shape)."""
    return torch.view_as_real(c).square().sum(-1)


def reference_whiten(
    c: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, eps: float
) -> torch.Tensor:
    r"""Whiten centred complex data ``c`` given its second moments: the closed-form 2x2
    inverse square root in :math:`m_1, m_2` (squares :math:`m_1`, so it overflows float32 for
    moduli around 1e10).

    Args:
        c: centred complex data.
        m1: :math:`E|c|^2` (real), broadcastable to ``c``.
        m2: :math:`E c^2` (complex pseudo-variance), broadcastable to ``c``.
        eps: added to both diagonal entries of the 2x2 covariance.
    """
    m1 = m1 + 2.0 * eps
    s = 0.5 * torch.sqrt((m1.square() - _sq_modulus(m2)).clamp_min(0.0))
    t = torch.sqrt(m1 + 2.0 * s)
    alpha = t / (2.0 * s)  # real
    beta = m2 * (-1.0 / (2.0 * s * t))  # complex
    return c * alpha + c.conj() * beta


def _reference_affine_2x2(
    w: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None
) -> torch.Tensor:
    r"""Apply a per-feature real 2x2 matrix ``weight`` (``(2, 2, *shape)``) and complex ``bias``.

    ``weight @ [x, y]`` equals the widely linear map :math:`\gamma_1 w + \gamma_2 \bar w` with
    :math:`\gamma_1 = ((g_{00} + g_{11}) + i(g_{10} - g_{01}))/2` and
    :math:`\gamma_2 = ((g_{00} - g_{11}) + i(g_{10} + g_{01}))/2`.
    """
    if weight is not None:
        g00, g01, g10, g11 = weight[0, 0], weight[0, 1], weight[1, 0], weight[1, 1]
        gamma1 = torch.complex(g00 + g11, g10 - g01) * 0.5
        gamma2 = torch.complex(g00 - g11, g10 + g01) * 0.5
        w = w * gamma1 + w.conj() * gamma2
    if bias is not None:
        w = w + bias
    return w


def reference_layer_norm(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    mode: str = "split",
) -> torch.Tensor:
    r"""Complex layer normalisation over the trailing ``normalized_shape`` dims.

    ``mode="split"``: the real and imaginary parts are normalised separately, each to zero mean
    and unit variance over the normalised dims, then scaled and shifted per part:
    :math:`y = w_0 \hat x + b_r + i (w_1 \hat y + b_i)` with ``weight`` real ``(2, *shape)`` and
    ``bias`` complex ``(*shape)`` -- the layer norm of the Complex Order code (Wang et al., ICLR
    2020), which applies a real LayerNorm to each part.

    ``mode="whiten"``: Trabelsi et al.'s 2x2 covariance whitening over the normalised dims
    (:func:`whiten`), then the per-feature real 2x2 ``weight`` ``(2, 2, *shape)`` and complex
    ``bias``.

    On a real ``x`` (``mode="split"`` only) this is ``F.layer_norm`` with real ``weight``/``bias``
    of shape ``normalized_shape``.
    """
    shape = tuple(normalized_shape)
    k = len(shape)
    if not x.is_complex():
        if mode != "split":
            raise ValueError(f"layer_norm: mode={mode!r} needs a complex input (use mode='split')")
        return F.layer_norm(x, shape, weight, bias, eps)
    if mode == "split":
        # (..., *shape, 2) -> (N, 2 * prod(shape)) ordered [part][features]: one copy, then torch's
        # fused GroupNorm with 2 groups = one normalisation per part, with the per-part affine
        # (per-channel weight/bias) fused in; measured ~0.6x the time of LayerNorm + affine ops.
        xt = torch.view_as_real(x).movedim(-1, -1 - k)  # (..., 2, *shape)
        lead = xt.shape[: -1 - k]
        flat = xt.reshape(-1, 2 * math.prod(shape))
        w = weight.reshape(-1) if weight is not None else None
        b = torch.view_as_real(bias).movedim(-1, 0).reshape(-1) if bias is not None else None
        if w is None and b is not None:
            w = torch.ones_like(b)
        y = F.group_norm(flat, 2, w, b, eps)
        return as_complex(y.reshape(*lead, 2, *shape).movedim(-1 - k, -1))
    if mode == "whiten":
        dims = tuple(range(-k, 0))
        c = x - x.mean(dim=dims, keepdim=True)
        m1 = _sq_modulus(c).mean(dim=dims, keepdim=True)
        m2 = (c * c).mean(dim=dims, keepdim=True)
        return _reference_affine_2x2(reference_whiten(c, m1, m2, eps), weight, bias)
    raise ValueError(f"layer_norm: unknown mode {mode!r}; valid modes are 'split', 'whiten'")


def _reference_channel_affine(w, weight, bias):
    """The per-channel 2x2 ``weight`` ``(2, 2, C)`` and complex ``bias`` ``(C,)`` on ``w``
    ``(N, C, *)``."""
    view = (-1,) + (1,) * (w.dim() - 2)  # channel parameters broadcast over the spatial dims
    if weight is not None:
        weight = weight.reshape(2, 2, *view)
    if bias is not None:
        bias = bias.reshape(view)
    return _reference_affine_2x2(w, weight, bias)


def _reference_running(x, mean, m1, m2, running_mean, running_cov, momentum, n):
    """``torch.nn.BatchNorm``'s running-statistics update with the unbiased covariance of the
    statistics over ``dims``, averaged over the batch when the batch is not among ``dims``."""
    with torch.no_grad():
        unbias = n / max(n - 1, 1)
        vrr = 0.5 * (m1 + m2.real) * unbias
        vii = 0.5 * (m1 - m2.real) * unbias
        vri = 0.5 * m2.imag * unbias
        channel_dims = tuple(d for d in range(x.dim()) if d != 1)  # mean over what is left
        cov = torch.stack([torch.stack([vrr, vri]), torch.stack([vri, vii])])
        cov = cov.mean(dim=tuple(d + 2 for d in channel_dims)).reshape(2, 2, -1)
        running_mean.lerp_(mean.mean(dim=channel_dims).to(running_mean.dtype), momentum)
        running_cov.lerp_(cov.to(running_cov.dtype), momentum)


def _reference_whitening(x, dims, running_mean, running_cov, weight, bias, update, momentum, eps):
    """Whitening of ``x`` ``(N, C, *)`` with statistics over ``dims`` (or the running ones when
    ``dims`` is None), then the per-channel affine."""
    if dims is None:
        view = (-1,) + (1,) * (x.dim() - 2)
        c = x - running_mean.reshape(view)
        vrr, vri, vii = running_cov[0, 0], running_cov[0, 1], running_cov[1, 1]
        m1 = (vrr + vii).reshape(view)
        m2 = torch.complex(vrr - vii, 2.0 * vri).reshape(view)
    else:
        mean = x.mean(dim=dims, keepdim=True)
        c = x - mean
        m1 = _sq_modulus(c).mean(dim=dims, keepdim=True)
        m2 = (c * c).mean(dim=dims, keepdim=True)
        if update and running_mean is not None:
            n = math.prod(x.shape[d] for d in dims)
            _reference_running(x, mean, m1, m2, running_mean, running_cov, momentum, n)
    return _reference_channel_affine(reference_whiten(c, m1, m2, eps), weight, bias)


def reference_batch_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_cov: torch.Tensor | None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    r"""Whitening batch normalisation of a complex ``(N, C, *)`` input, per channel.

    In training (or without running statistics) each channel is centred by its batch mean and
    whitened with its batch 2x2 covariance over the batch and spatial dims (biased estimate;
    :func:`reference_whiten`). When buffers are given and ``training`` is True they are updated
    in place as in ``torch.nn.BatchNorm1d``: ``running = (1 - momentum) * running + momentum *
    batch`` with the *unbiased* covariance (factor :math:`n/(n-1)`). In evaluation the running
    statistics are used.

    Args:
        running_mean: complex ``(C,)`` or None.
        running_cov: real ``(2, 2, C)`` covariance :math:`[[V_{rr}, V_{ri}], [V_{ri}, V_{ii}]]`
            or None.
        weight: real ``(2, 2, C)`` per-channel affine matrix or None; bias: complex ``(C,)``.
    """
    dims = (0, *range(2, x.dim()))
    if training or running_mean is None:
        n = x.numel() // x.shape[1]
        if n < 2 and training:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, "
                f"got input {tuple(x.shape)}"
            )
    else:
        dims = None
    return _reference_whitening(
        x, dims, running_mean, running_cov, weight, bias, training, momentum, eps
    )


def reference_instance_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor | None = None,
    running_cov: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Whitening instance normalisation of ``(N, C, *)``: statistics per sample and channel over
    the spatial dims; running statistics updated with their batch average (unbiased), or used
    when ``use_input_stats`` is False (torch's ``instance_norm`` semantics)."""
    dims = tuple(range(2, x.dim())) if use_input_stats else None
    return _reference_whitening(
        x, dims, running_mean, running_cov, weight, bias, True, momentum, eps
    )


def reference_group_norm(
    x: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Whitening group normalisation of ``(N, C, *)``: statistics per sample and group of
    ``C / num_groups`` channels over those channels and the spatial dims."""
    n, c = x.shape[:2]
    xg = x.reshape(n, num_groups, -1)
    w = _reference_whitening(xg, (2,), None, None, None, None, False, 0.0, eps)
    return _reference_channel_affine(w.reshape(x.shape), weight, bias)


def reference_modrelu(z: torch.Tensor, bias: torch.Tensor | float) -> torch.Tensor:
    r"""modReLU :math:`\mathrm{ReLU}(|z| + b)\, z / |z|` (Arjovsky et al., "Unitary Evolution
    Recurrent Neural Networks", ICML 2016, Eq. 8).

    The output keeps the phase of ``z`` and the modulus becomes :math:`\max(|z| + b, 0)`, so
    entries with :math:`|z| < -b` are zeroed. ``bias`` is real and broadcasts against ``z``.
    Computed as :math:`z \cdot \mathrm{ReLU}(|z| + b) / |z|` with the denominator replaced by 1
    where :math:`z = 0`, so output (0) and gradient (at most :math:`\max(b, 0)`) are finite at the
    origin; measured ~0.7x the time of the ``relu(|z| + b) * sgn(z)`` form (forward + backward).
    """
    mag = z.abs()
    return z * (F.relu(mag + bias) / torch.where(mag > 0, mag, 1.0))


def reference_cardioid(z: torch.Tensor) -> torch.Tensor:
    r"""Complex cardioid :math:`\tfrac12 (1 + \cos \arg z)\, z` (Virtue, Yu & Lustig, "Better than
    Real: Complex-valued Neural Nets for MRI Fingerprinting", ICIP 2017, Eq. 3).

    Uses :math:`\cos \arg z = \mathrm{Re}(\mathrm{sgn}\, z)` (one ``sgn`` instead of ``angle`` and
    ``cos``); output and gradient are finite everywhere (the gradient at ``z = 0`` is 0.5, the
    average over directions). On real inputs it equals ReLU.
    """
    if not z.is_complex():
        return F.relu(z)
    return z * (0.5 + 0.5 * torch.sgn(z).real)


#: Layouts of the complex-order tables for (batch 2, length 5, width 3) tokens: per word (one
#: value per token and feature), shared by all words and positions, per dimension (broadcast over
#: the features).
COMPLEX_ORDER_SHAPES = {"word": (2, 5, 3), "shared": (3,), "dimension": (2, 5, 1)}


def reference_complex_order(
    r: torch.Tensor, w: torch.Tensor | None, theta: torch.Tensor | None, pos: torch.Tensor
) -> torch.Tensor:
    r"""The complex-order map :math:`r\,e^{i(w\,pos + \theta)}` (Wang et al., ICLR 2020) through
    autograd of cos/sin (the readable form); ``None``: no frequency or no phase term."""
    angle = torch.zeros((), dtype=r.dtype)
    if w is not None:
        angle = angle + w * pos
    if theta is not None:
        angle = angle + theta
    return torch.complex(r * torch.cos(angle), r * torch.sin(angle))


#: moduli at which a complex64 modulus activation must still be right: squares of the parts
#: underflow (1e-20, 1e-30) or overflow (1e20, 1e30) float32 there, while |z| and 1/|z| do not
EXTREME_MODULI = (1e-30, 1e-20, 1.0, 1e20, 1e30)


def assert_close_to_complex128(fn, ref, z: torch.Tensor, *reals: torch.Tensor, rtol=1e-6) -> None:
    """``fn`` on complex64 ``z`` (and real ``reals``) against ``ref`` on complex128/float64
    copies, in values and the gradients of a fixed random projection, each relative to its
    largest entry (so a wrong or non-finite entry fails at any scale)."""
    leaves = [t.detach().requires_grad_() for t in (z, *reals)]
    wide = [t.detach().to(torch.complex128 if t.is_complex() else torch.float64) for t in leaves]
    wide = [t.requires_grad_() for t in wide]
    out, want = fn(*leaves), ref(*wide)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(0))
    got = (out, *torch.autograd.grad(out, leaves, g))
    exp = (want, *torch.autograd.grad(want, wide, g.to(want.dtype)))
    for a, b in zip(got, exp, strict=True):
        scale = b.abs().max().clamp_min(torch.finfo(torch.float64).tiny)
        assert torch.isfinite(torch.view_as_real(a) if a.is_complex() else a).all()
        assert ((a.to(b.dtype) - b).abs().max() / scale).item() < rtol
