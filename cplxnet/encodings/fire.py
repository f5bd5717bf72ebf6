r"""FIRE, functional interpolation for relative positions (Li, You, Bhojanapalli, Li, Rawat,
Reddi, Ye, Chern, Yu, Guo, Kumar, "Functional Interpolation for Relative Positions Improves Long
Context Transformers", ICLR 2024)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._utils import check_sizes, factory_kwargs, real_dtype
from ._common import check_bias_heads, query_positions, relative_index
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["FireEncoding"]


@register_encoding
class FireEncoding(PositionalEncoding):
    r"""``fire``: a learned MLP of the progressively interpolated log distance, one output per
    head, added to the logits.

    .. math::
        b_h(i, j) = f_\theta\!\left(\frac{\psi(i - j)}{\psi(\max(L_{thr}, i))}\right)_h,\qquad
        \psi(x) = \log(c\,|x| + 1),

    (Eq. 4 of the paper with the log transform of Section 3.2 and the learned threshold of its
    Appendix), :math:`f_\theta: \mathbb{R} \to \mathbb{R}^H` an MLP with one hidden ReLU layer
    (width ``hidden = 32``), :math:`c` learned (init 0.1), :math:`L_{thr} = |m|\, L_0` with a
    learned multiplier ``m`` (init 1) of the fixed ``L_0 = threshold`` (512), and
    :math:`\epsilon = 10^{-6}` added to the denominator, all as the paper's reference code. The
    MLP starts as torch's ``nn.Linear`` default.

    Causal attention (the paper's setting): ``i`` is the query position, the mask keeps
    ``j <= i``, so :math:`i - j \ge 0` and the normaliser :math:`\psi(\max(L_{thr}, i))` grows
    with the query position (progressive interpolation: the input of ``f`` stays in ``[0, 1]``
    at any length). Bidirectional attention: the same formula, which reads the distance
    :math:`|i - j|` (the reference code's ``abs``): a key after the query gets the bias of the
    same distance before it, and the normaliser is still that of the query position. The two
    agree on every key a causal mask keeps, so the encoding takes no ``causal`` flag. With
    ``Lq != Lk`` the queries are the last ``Lq`` positions (as
    :class:`~cplxnet.encodings.AlibiEncoding`).

    The bias depends on ``(i, j)``, not on ``q, k`` values: complex and real attention are
    identical. Memory: the MLP runs on the ``Lq x Lk`` normalised distances (its hidden layer
    is ``(Lq, Lk, hidden)``, with no batch or head dimension), then the ``(1, H, Lq, Lk)`` bias.

    Args:
        num_heads: number of heads ``H``.
        hidden: width of the MLP's hidden layer (32).
        init_c: initial ``c`` (0.1).
        threshold: ``L_0``, the fixed length the learned multiplier scales (512).
        eps: added to the normaliser (1e-6).
        device, dtype: model dtype; the parameters are real of its real dtype.

    Examples::

        >>> from cplxnet.encodings import create_encoding
        >>> enc = create_encoding("fire", d_model=8, num_heads=2, causal=True)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "fire"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True  # queries sit at the end of the keys (relative_index)

    def __init__(
        self,
        num_heads: int,
        hidden: int = 32,
        init_c: float = 0.1,
        threshold: float = 512.0,
        eps: float = 1e-6,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, num_heads=num_heads, hidden=hidden)
        for what, v in (("init_c", init_c), ("threshold", threshold), ("eps", eps)):
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not (math.isfinite(v) and v > 0)
            ):
                raise ValueError(f"{owner}: {what} must be a finite positive number, got {v!r}")
        self.num_heads, self.hidden = num_heads, hidden
        self.init_c, self.threshold, self.eps = float(init_c), float(threshold), float(eps)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        self.mlp = nn.Sequential(
            nn.Linear(1, hidden, **rk), nn.ReLU(), nn.Linear(hidden, num_heads, **rk)
        )
        self.c = nn.Parameter(torch.empty((), **rk))
        self.threshold_multiplier = nn.Parameter(torch.empty((), **rk))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for layer in (self.mlp[0], self.mlp[2]):
            layer.reset_parameters()
        with torch.no_grad():
            self.c.fill_(self.init_c)
            self.threshold_multiplier.fill_(1.0)

    def normalized_distance(
        self, lq: int, lk: int, dtype: torch.dtype, device=None
    ) -> torch.Tensor:
        r"""``(Lq, Lk)`` input of the MLP, :math:`\psi(i - j) / (\psi(\max(L_{thr}, i)) +
        \epsilon)`."""
        c = self.c.to(dtype)
        rel = relative_index(lq, lk, device, at_end=True).to(dtype)  # i - j
        i = query_positions(lq, lk, device).to(dtype)
        thr = (self.threshold_multiplier.to(dtype) * self.threshold).abs()
        num = torch.log((c * rel).abs() + 1)
        den = torch.log((c * torch.maximum(i, thr)).abs() + 1) + self.eps  # (Lq,)
        return num / den[:, None]

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_bias_heads(q, k, self.num_heads, type(self).__name__)
        x = self.normalized_distance(q.shape[-2], k.shape[-2], q.dtype, q.device)
        w1, b1 = self.mlp[0].weight.to(q.dtype), self.mlp[0].bias.to(q.dtype)
        w2, b2 = self.mlp[2].weight.to(q.dtype), self.mlp[2].bias.to(q.dtype)
        h = torch.relu(x[..., None] * w1[:, 0] + b1)  # (Lq, Lk, hidden)
        return (h @ w2.T + b2).permute(2, 0, 1).unsqueeze(0)  # (1, H, Lq, Lk)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, hidden={self.hidden}, init_c={self.init_c:g}, "
            f"threshold={self.threshold:g}, dtype={self.dtype}"
        )
