r"""KERPLE, kernelized relative positional embedding (Chi, Fan, Ramadge, Rudnicky, "KERPLE:
Kernelized Relative Positional Embedding for Length Extrapolation", NeurIPS 2022)."""

from __future__ import annotations

import torch
from torch import nn

from .._utils import check_choice, factory_kwargs, real_dtype
from ._common import check_bias_heads, distance
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["KerpleEncoding"]

KINDS = ("log", "power")


@register_encoding
class KerpleEncoding(PositionalEncoding):
    r"""``kerple``: a learned conditionally positive definite kernel of the distance, per head,
    added to the logits.

    .. math::
        A_{ij} = \frac{\mathrm{Re}(q_i k_j^H)}{\sqrt{D_h}} + b_h(i, j),\qquad
        b_h = -r_{1,h} \log\big(1 + r_{2,h}\, |i - j|\big)\ \ (\texttt{kind="log"}),\qquad
        b_h = -r_{1,h}\, |i - j|^{r_{2,h}}\ \ (\texttt{kind="power"},\ 0 < r_2 \le 2)

    (Eq. 9 and 8 of the paper; the logarithmic variant is the one the paper recommends). Learned
    positive :math:`r_1, r_2` per head, initialised as the reference code (``chijames/KERPLE``):
    log: :math:`r_1 \sim U(0, 2)`, :math:`r_2 \sim U(0, 1)`; power: :math:`r_1 \sim U(0, 1)`,
    exponent :math:`r_2 \sim U(0, 2)`.

    Positivity by clamping (the reference code's parametrisation): the bias uses
    :math:`r = \max(\rho, \epsilon)` of the raw parameters :math:`\rho` (``eps = 0.01``), and
    the power exponent :math:`\min(\rho_2, 2)`. The reference code clamps the stored values in
    place before each use; here the clamp is part of the forward (the stored value is left
    alone and receives no gradient while it is outside the bounds), which gives the same bias.

    Causal (``causal=True``, a language model): the distance is :math:`i - j` for the keys
    ``j <= i`` the mask keeps (0 for the masked ones, as the reference code's ``tril``).
    Bidirectional (default): :math:`|i - j|`, the kernel of the paper is a function of the
    distance. With ``Lq != Lk`` the queries are the last ``Lq`` positions, as
    :class:`~cplxnet.encodings.AlibiEncoding` (the reference code, which handles one query
    after a cache, uses the last row). The bias does not depend on ``q, k`` values, so complex
    and real attention are identical; memory: the ``(1, H, Lq, Lk)`` bias, never more.

    Args:
        num_heads: number of heads ``H``.
        kind: ``"log"`` (default) or ``"power"`` (``kerple:kind=power``).
        eps: lower bound of :math:`r_1, r_2` (0.01).
        causal: the model's attention is causal (passed by language models).
        device, dtype: model dtype; the parameters are real of its real dtype.

    Examples::

        >>> from cplxnet.encodings import create_encoding
        >>> enc = create_encoding("kerple", d_model=8, num_heads=2, causal=True)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "kerple"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True  # queries sit at the end of the keys (relative_index)

    def __init__(
        self,
        num_heads: int,
        kind: str = "log",
        eps: float = 0.01,
        causal: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"{owner}: num_heads must be a positive int, got {num_heads!r}")
        self.kind = check_choice(kind, KINDS, owner, "kind")
        if not (isinstance(eps, (int, float)) and 0 < eps < 1):
            raise ValueError(f"{owner}: eps must be a number in (0, 1), got {eps!r}")
        self.num_heads, self.eps, self.causal = num_heads, float(eps), bool(causal)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        #: raw r_1 (scale) and r_2 (log: rate, power: exponent), one per head
        self.r1 = nn.Parameter(torch.empty(num_heads, **rk))
        self.r2 = nn.Parameter(torch.empty(num_heads, **rk))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        high1, high2 = (2.0, 1.0) if self.kind == "log" else (1.0, 2.0)
        with torch.no_grad():
            self.r1.uniform_(0.0, high1)
            self.r2.uniform_(0.0, high2)

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The clamped ``(r_1, r_2)`` the bias uses, ``(H,)`` each."""
        r1 = self.r1.clamp(min=self.eps)
        r2 = self.r2.clamp(min=self.eps, max=2.0 if self.kind == "power" else None)
        return r1, r2

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_bias_heads(q, k, self.num_heads, type(self).__name__)
        d = distance(q.shape[-2], k.shape[-2], self.causal, q.device).to(q.dtype)  # (Lq, Lk)
        r1, r2 = (r.to(q.dtype)[:, None, None] for r in self.coefficients())  # (H, 1, 1)
        bias = -r1 * torch.log1p(r2 * d) if self.kind == "log" else -r1 * d.pow(r2)
        return bias.unsqueeze(0)  # (1, H, Lq, Lk)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, kind={self.kind!r}, eps={self.eps:g}, "
            f"causal={self.causal}, dtype={self.dtype}"
        )
