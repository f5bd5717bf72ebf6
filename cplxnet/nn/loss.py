"""Loss modules for complex outputs, with torch's ``reduction=`` convention (see
:mod:`cplxnet.functional.loss` for the formulas and the gradient convention).

``MSELoss``, ``L1Loss`` and ``CrossEntropyLoss`` take ``torch.nn``'s arguments in torch's order
(legacy ``size_average``/``reduce`` included) and equal torch's losses on real tensors.
"""

from __future__ import annotations

import math

import torch
from torch.nn.modules.loss import _Loss

from .. import functional as CF
from .._utils import check_choice

__all__ = ["MSELoss", "L1Loss", "MagnitudeLoss", "PhaseAwareLoss", "CrossEntropyLoss"]


class _ReducedLoss(_Loss):
    """torch's ``_Loss`` (legacy ``size_average``/``reduce`` resolved into ``reduction``) with the
    reduction checked and shown in the repr."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        check_choice(self.reduction, ("none", "mean", "sum"), type(self).__name__, "reduction")

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MSELoss(_ReducedLoss):
    r"""Mean squared modulus of the error :math:`\frac1N \sum_n |z_n - t_n|^2`
    (:func:`cplxnet.functional.mse_loss`); ``torch.nn.MSELoss``'s arguments.

    Examples::

        >>> loss = cplxnet.nn.MSELoss()
        >>> loss(torch.tensor([1 + 1j]), torch.tensor([0 + 0j]))
        tensor(2.)
    """

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``input``, ``target`` ``(*)`` complex or real -> a real scalar (``'none'``: ``(*)``)."""
        return CF.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_ReducedLoss):
    r"""Mean modulus of the error :math:`\frac1N \sum_n |z_n - t_n|`
    (:func:`cplxnet.functional.l1_loss`); ``torch.nn.L1Loss``'s arguments.

    Examples::

        >>> cplxnet.nn.L1Loss()(torch.tensor([3 + 4j]), torch.tensor([0j]))
        tensor(5.)
    """

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``input``, ``target`` ``(*)`` complex or real -> a real scalar (``'none'``: ``(*)``)."""
        return CF.l1_loss(input, target, reduction=self.reduction)


class MagnitudeLoss(_ReducedLoss):
    r"""Squared error of the moduli :math:`\frac1N \sum_n (|z_n| - |t_n|)^2`, blind to phase
    (:func:`cplxnet.functional.magnitude_loss`).

    Examples::

        >>> cplxnet.nn.MagnitudeLoss()(torch.tensor([3 + 4j]), torch.tensor([-5 + 0j]))
        tensor(0.)
    """

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``input``, ``target`` ``(*)`` complex or real -> a real scalar (``'none'``: ``(*)``)."""
        return CF.magnitude_loss(input, target, self.reduction)


class PhaseAwareLoss(_ReducedLoss):
    r"""Compressed complex spectral loss of speech enhancement (Wilson et al. 2018; Braun & Tashev
    2021): :math:`\alpha |\tilde z - \tilde t|^2 + (1 - \alpha)(|z|^c - |t|^c)^2` averaged, with
    :math:`\tilde z = |z|^c e^{i \arg z}` (:func:`cplxnet.functional.phase_aware_loss`).

    Args:
        reduction: ``'mean'`` (default), ``'sum'`` or ``'none'``.
        power: compression exponent :math:`c` (0.3).
        alpha: weight of the phase-aware (complex) term (0.3).
        eps: added to :math:`|z|^2` under the powers (finite gradient at the origin).

    Examples::

        >>> loss = cplxnet.nn.PhaseAwareLoss(power=1.0, alpha=1.0, eps=0.0)  # plain complex MSE
        >>> loss(torch.tensor([1 + 1j]), torch.tensor([0 + 0j]))
        tensor(2.)
    """

    def __init__(
        self,
        reduction: str = "mean",
        *,
        power: float = 0.3,
        alpha: float = 0.3,
        eps: float = 1e-12,
    ) -> None:
        super().__init__(reduction=reduction)
        if not 0.0 <= alpha <= 1.0 or power <= 0 or not 0.0 <= eps < math.inf:
            raise ValueError(
                f"PhaseAwareLoss: alpha must be in [0, 1], power > 0 and eps >= 0 (finite), got "
                f"alpha={alpha}, power={power}, eps={eps}"
            )
        self.power = float(power)
        self.alpha = float(alpha)
        self.eps = float(eps)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``input``, ``target`` ``(*)`` complex -> a real scalar (``'none'``: ``(*)``)."""
        return CF.phase_aware_loss(
            input, target, self.reduction, power=self.power, alpha=self.alpha, eps=self.eps
        )

    def extra_repr(self) -> str:
        return (
            f"reduction={self.reduction!r}, power={self.power}, alpha={self.alpha}, eps={self.eps}"
        )


class CrossEntropyLoss(_ReducedLoss):
    r"""Cross-entropy of complex logits read through a real score (``score="real"``:
    :math:`\mathrm{Re}\, z`, default; ``"magnitude"``: :math:`|z|`), then torch's
    cross-entropy (:func:`cplxnet.functional.cross_entropy`). ``torch.nn.CrossEntropyLoss``'s
    arguments in torch's order; ``score`` is keyword-only.

    Examples::

        >>> loss = cplxnet.nn.CrossEntropyLoss(score="magnitude")
        >>> logits = torch.randn(4, 3, dtype=torch.cfloat, requires_grad=True)
        >>> loss(logits, torch.tensor([0, 2, 1, 0])).backward()
    """

    def __init__(
        self,
        weight: torch.Tensor | None = None,
        size_average=None,
        ignore_index: int = -100,
        reduce=None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        *,
        score: str = "real",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.score = check_choice(score, CF.LOGIT_SCORES, type(self).__name__, "score")

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C)`` or ``(B, C, *)`` complex logits, ``target`` class indices
        ``(B, *)`` or probabilities ``(B, C, *)`` -> a real scalar (``'none'``: ``(B, *)``)."""
        return CF.cross_entropy(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            score=self.score,
        )

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, score={self.score!r}"
