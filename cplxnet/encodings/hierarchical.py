r"""Hierarchical decomposition of a trained absolute position table (Su Jianlin, 2020).

Su Jianlin, "层次分解位置编码，让BERT可以处理超长文本" (Hierarchical decomposition of position
embeddings lets BERT process very long text), kexue.fm/archives/7947, Dec 2020; implemented in
bert4keras as ``hierarchical_position`` of ``PositionEmbedding``.
"""

from __future__ import annotations

import torch
from torch import nn

from .._utils import check_sizes, factory_kwargs
from ._common import check_sequence, normal_
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["HierarchicalEncoding", "hierarchical_positions"]


def hierarchical_positions(table: torch.Tensor, length: int, alpha: float = 0.4) -> torch.Tensor:
    r"""Positions ``0 .. length-1`` from an ``(n, D)`` table, up to ``n**2`` positions.

    .. math::
        u_i = \frac{p_i - \alpha p_0}{1 - \alpha},\qquad
        q_{i n + j} = \alpha\, u_i + (1 - \alpha)\, u_j \quad (0 \le i, j < n)

    (0-based; Su writes ``p_1`` for our ``p_0``). Since ``u_0 = p_0``, ``q_j = p_j`` for ``j < n``:
    the trained positions are unchanged (returned exactly, not recomputed); position ``i n + j``
    is "block ``i``, offset ``j``", with ``alpha`` weighting the block.
    """
    n = table.shape[0]
    if length <= n:
        return table[:length]
    if length > n * n:
        raise ValueError(
            f"hierarchical_positions: a table of {n} positions serves at most {n}**2 = {n * n} "
            f"positions, got length {length}"
        )
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"hierarchical_positions: alpha must be in (0, 1), got {alpha}")
    u = (table - alpha * table[:1]) / (1.0 - alpha)  # (n, D)
    k = torch.arange(n, length, device=table.device)
    extra = alpha * u[k // n] + (1.0 - alpha) * u[k % n]  # (length - n, D)
    return torch.cat((table, extra), dim=0)


@register_encoding
class HierarchicalEncoding(PositionalEncoding):
    r"""``hierarchical``: an absolute table of ``n = max_len`` rows serving ``n**2`` positions.

    Adds :math:`q_k` of :func:`hierarchical_positions` to the input: ``x_k + q_k`` with
    :math:`q_{in+j} = \alpha u_i + (1-\alpha) u_j`, :math:`u_i = (p_i - \alpha p_0)/(1-\alpha)`
    (Su Jianlin 2020, "hierarchical position embedding" of bert4keras). The first ``n``
    positions are the table itself, so a table trained on ``n`` positions (e.g. a ``trainable``
    encoding, :meth:`from_trained`) keeps its behaviour there and extends to ``n**2``.

    Args:
        d_model: model width.
        max_len: rows ``n`` of the base table (lengths up to ``n**2`` are served).
        alpha: block weight in ``(0, 1)`` (Su's choice 0.4).
        std: standard deviation of the initial table (total variance ``std**2`` for complex).
        device, dtype: model dtype (complex by default; real for a real twin).
    """

    name = "hierarchical"
    acts_on = frozenset({"input"})

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        alpha: float = 0.4,
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"{owner}: alpha must be in (0, 1), got {alpha}")
        check_sizes(owner, d_model=d_model, max_len=max_len)
        self.d_model, self.max_len, self.alpha, self.std = d_model, max_len, float(alpha), std
        self.complex_model = fk["dtype"].is_complex
        self.weight = nn.Parameter(torch.empty(max_len, d_model, **fk))
        self.reset_parameters()

    @classmethod
    def from_trained(cls, encoding: PositionalEncoding, alpha: float = 0.4) -> HierarchicalEncoding:
        """A hierarchical encoding whose base table is a copy of a trained ``trainable`` (or
        ``hierarchical``) encoding's table: identical on its ``max_len`` positions."""
        weight = getattr(encoding, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise TypeError(
                f"HierarchicalEncoding.from_trained: expected a trainable encoding with an "
                f"absolute table 'weight', got {type(encoding).__name__}"
            )
        n, d = weight.shape
        new = cls(d, max_len=n, alpha=alpha, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            new.weight.copy_(weight)
        return new

    def reset_parameters(self) -> None:
        normal_(self.weight, self.std)

    def table(self, length: int) -> torch.Tensor:
        """Positions ``0 .. length-1``, ``(length, d_model)``."""
        if length > self.max_len**2:
            raise ValueError(
                f"{type(self).__name__}: input length {length} exceeds max_len**2 = "
                f"{self.max_len**2} (max_len={self.max_len}); build with a larger max_len"
            )
        return hierarchical_positions(self.weight, length, self.alpha)

    def encode_input(self, x: torch.Tensor) -> torch.Tensor:  # (B, L, D) -> (B, L, D)
        check_sequence(x, self.d_model, self.complex_model, type(self).__name__)
        return x + self.table(x.shape[1])

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, max_len={self.max_len} (serves {self.max_len**2}), "
            f"alpha={self.alpha}, dtype={self.weight.dtype}"
        )
