r"""Losses on complex outputs: real scalars with torch's ``reduction=`` convention.

Each loss is a real function of complex arguments, so ``backward()`` gives torch's gradient for
real-valued functions of complex tensors: :math:`\partial L / \partial x + i\, \partial L /
\partial y` for :math:`z = x + iy` (twice the conjugate Wirtinger derivative
:math:`\partial L / \partial \bar z`), the steepest-ascent direction that gradient descent in
torch follows. For :func:`mse_loss` that is :math:`2 (z - t) / N`, the same step the real loss
takes on the real and imaginary parts.

On real tensors every loss reduces to torch's (:func:`torch.nn.functional.mse_loss`,
:func:`~torch.nn.functional.l1_loss`, :func:`~torch.nn.functional.cross_entropy`), so a real twin
shares the code.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch.nn import _reduction

from .._utils import check_choice

__all__ = [
    "mse_loss",
    "l1_loss",
    "magnitude_loss",
    "phase_aware_loss",
    "cross_entropy",
    "complex_scores",
    "LOGIT_SCORES",
]

_REDUCTIONS = ("none", "mean", "sum")

#: Real scores of a complex logit read by :func:`cross_entropy`: ``"real"`` is
#: :math:`\mathrm{Re}\, z`, ``"magnitude"`` is :math:`|z|`.
LOGIT_SCORES = ("real", "magnitude")


def _reduction_of(size_average, reduce, reduction: str, owner: str) -> str:
    if size_average is not None or reduce is not None:
        return _reduction.legacy_get_string(size_average, reduce)
    return check_choice(reduction, _REDUCTIONS, owner, "reduction")


def _error(input: torch.Tensor, target: torch.Tensor, owner: str) -> torch.Tensor:
    """``input - target`` after torch's size warning (broadcasting is allowed, as torch's)."""
    for name, t in (("input", input), ("target", target)):
        if not isinstance(t, torch.Tensor) or not (t.is_complex() or t.is_floating_point()):
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(f"{owner}: {name} must be a complex or floating tensor, got {got}")
    if target.size() != input.size():
        warnings.warn(
            f"{owner}: target size {tuple(target.size())} differs from input size "
            f"{tuple(input.size())}; they are broadcast, which is rarely intended",
            stacklevel=3,
        )
    return input - target


def _reduce(
    values: torch.Tensor, input: torch.Tensor, reduction: str, weight, owner: str
) -> torch.Tensor:
    """torch's reduction of element losses, with the optional element ``weight`` (same size as
    ``input``; the weighted mean divides by the sum of the weights, as torch's)."""
    if weight is not None:
        if weight.size() != input.size():
            raise ValueError(
                f"{owner}: weight must have the input's size {tuple(input.size())}, "
                f"got {tuple(weight.size())}"
            )
        values = values * weight
        if reduction == "mean":
            return values.sum() / weight.sum()
    if reduction == "mean":
        return values.mean()
    return values.sum() if reduction == "sum" else values


def _abs2(e: torch.Tensor) -> torch.Tensor:
    """:math:`|e|^2` without a square root (real and imaginary parts squared and summed)."""
    return torch.view_as_real(e.resolve_conj()).square().sum(-1) if e.is_complex() else e.square()


def mse_loss(
    input: torch.Tensor,
    target: torch.Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Mean squared modulus of the error, :math:`\frac1N \sum_n |z_n - t_n|^2` (``reduction``
    ``'mean'``; ``'sum'`` and ``'none'`` as torch). Equals torch's real MSE on
    ``view_as_real`` parts times 2 (torch averages over the 2N real numbers). Arguments as
    :func:`torch.nn.functional.mse_loss`."""
    reduction = _reduction_of(size_average, reduce, reduction, "mse_loss")
    if not (input.is_complex() or target.is_complex()):
        return F.mse_loss(input, target, reduction=reduction, weight=weight)
    return _reduce(_abs2(_error(input, target, "mse_loss")), input, reduction, weight, "mse_loss")


def l1_loss(
    input: torch.Tensor,
    target: torch.Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Mean modulus of the error, :math:`\frac1N \sum_n |z_n - t_n|`. The gradient at a zero
    error is 0 (``abs``'s subgradient, as torch's real L1). Arguments as
    :func:`torch.nn.functional.l1_loss`."""
    reduction = _reduction_of(size_average, reduce, reduction, "l1_loss")
    if not (input.is_complex() or target.is_complex()):
        return F.l1_loss(input, target, reduction=reduction, weight=weight)
    return _reduce(_error(input, target, "l1_loss").abs(), input, reduction, weight, "l1_loss")


def magnitude_loss(
    input: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    r"""Squared error of the moduli, :math:`\frac1N \sum_n (|z_n| - |t_n|)^2`: phase-blind, the
    spectral-magnitude loss of magnitude-only enhancement (e.g. Xu et al., "A regression approach
    to speech enhancement based on deep neural networks", IEEE/ACM TASLP 2015, on log spectra).
    """
    reduction = check_choice(reduction, _REDUCTIONS, "magnitude_loss", "reduction")
    _error(input, target, "magnitude_loss")
    return _reduce((input.abs() - target.abs()).square(), input, reduction, None, "magnitude_loss")


def _compress(z: torch.Tensor, power: float, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(z rho^{c-1}, rho^c)`` with :math:`\\rho = \\sqrt{|z|^2 + \\epsilon}` (``hypot``: no
    overflow of :math:`|z|^2`), so the gradient stays finite at :math:`z = 0`; with
    :math:`\\epsilon = 0` an exact zero gives 0 (with a zero gradient for :math:`c < 1`, where
    the true one is infinite)."""
    r = z.abs()
    rho = torch.hypot(r, torch.full_like(r, math.sqrt(eps))) if eps > 0 else r
    positive = rho > 0
    safe = torch.where(positive, rho, torch.ones_like(rho))
    at0 = 1.0 if power == 1 else 0.0  # rho^(c-1) at 0: its limit for c >= 1, 0 below
    scale = torch.where(positive, safe.pow(power - 1), torch.full_like(rho, at0))
    return z * scale, torch.where(positive, safe.pow(power), torch.zeros_like(rho))


def phase_aware_loss(
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: str = "mean",
    *,
    power: float = 0.3,
    alpha: float = 0.3,
    eps: float = 1e-12,
) -> torch.Tensor:
    r"""Compressed complex spectral loss, the phase-aware loss of speech enhancement
    (Wilson et al., "Exploring tradeoffs in models for low-latency speech enhancement", IWAENC
    2018; Braun & Tashev, "A consolidated view of loss functions for supervised deep
    learning-based speech enhancement", TSP 2021, Eq. 6):

    .. math::
        L = \frac1N \sum_n \alpha \bigl| |z_n|^c e^{i\varphi_{z_n}} - |t_n|^c e^{i\varphi_{t_n}}
        \bigr|^2 + (1 - \alpha) \bigl(|z_n|^c - |t_n|^c\bigr)^2

    with the compression ``power`` :math:`c` and the weight ``alpha`` of the phase-aware term
    (both 0.3 as in the papers). :math:`c = 1, \alpha = 1` is :func:`mse_loss`; :math:`\alpha = 0`
    is the compressed magnitude loss. ``eps`` is added to :math:`|z|^2` under the powers so the
    gradient is finite at the origin; an exact zero then counts as :math:`\\epsilon^{c/2}`
    (0.016 at the defaults). ``eps=0``: an exact zero gives 0, with a zero gradient for
    :math:`c < 1` (where the true one is infinite) and the limit for :math:`c \\ge 1`.
    """
    reduction = check_choice(reduction, _REDUCTIONS, "phase_aware_loss", "reduction")
    if not 0.0 <= alpha <= 1.0 or power <= 0 or not 0.0 <= eps < math.inf:
        raise ValueError(
            f"phase_aware_loss: alpha must be in [0, 1], power > 0 and eps >= 0 (finite), got "
            f"alpha={alpha}, power={power}, eps={eps}"
        )
    _error(input, target, "phase_aware_loss")
    zc, zm = _compress(input, power, eps)
    tc, tm = _compress(target, power, eps)
    values = alpha * _abs2(zc - tc) + (1 - alpha) * (zm - tm).square()
    return _reduce(values, input, reduction, None, "phase_aware_loss")


def complex_scores(input: torch.Tensor, score: str = "real") -> torch.Tensor:
    """The real scores :func:`cross_entropy` reads from logits (one of :data:`LOGIT_SCORES`):
    on real logits ``"real"`` is the identity (torch's cross-entropy) and ``"magnitude"`` the
    absolute value, the restrictions of the complex scores to the real line."""
    check_choice(score, LOGIT_SCORES, "cross_entropy", "score")
    if score == "magnitude":
        return input.abs()
    return input.real if input.is_complex() else input


def cross_entropy(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    *,
    score: str = "real",
) -> torch.Tensor:
    r"""Cross-entropy of complex logits through the real score ``score``:
    :math:`\mathrm{Re}\, z` (``"real"``, the default: the logit of a complex linear head) or
    :math:`|z|` (``"magnitude"``; Trabelsi et al.'s classifiers instead feed
    :math:`[\mathrm{Re}\, z, \mathrm{Im}\, z]` to a real softmax layer:
    :class:`cplxnet.nn.ConcatRealImag` then a real head), then
    :func:`torch.nn.functional.cross_entropy` with torch's arguments (class indices or
    probabilities as ``target``)."""
    reduction = _reduction_of(size_average, reduce, reduction, "cross_entropy")
    return F.cross_entropy(
        complex_scores(input, score),
        target,
        weight=weight,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )
