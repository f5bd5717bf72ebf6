"""Learned absolute positions (BERT, Devlin et al. 2019; GPT, Radford et al. 2018), and the one
implementation of their hierarchical extension beyond the trained length (Su 2020)."""

from __future__ import annotations

import torch
from torch import nn

from .._utils import check_choice, check_sizes, factory_kwargs
from ._common import Positions, check_offset, check_sequence, normal_, rows_at
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["TrainableEncoding", "hierarchical_positions"]

EXTRAPOLATE = ("error", "hierarchical")


def hierarchical_positions(table: torch.Tensor, length: int, alpha: float = 0.4) -> torch.Tensor:
    r"""Positions ``0 .. length-1`` from an ``(n, D)`` table, up to ``n**2`` positions.

    Su Jianlin, "层次分解位置编码，让BERT可以处理超长文本" (Hierarchical decomposition of position
    embeddings lets BERT process very long text), kexue.fm/archives/7947, Dec 2020; bert4keras's
    ``hierarchical_position`` of ``PositionEmbedding``:

    .. math::
        u_i = \frac{p_i - \alpha p_0}{1 - \alpha},\qquad
        q_{i n + j} = \alpha\, u_i + (1 - \alpha)\, u_j \quad (0 \le i, j < n)

    (0-based; Su writes ``p_1`` for our ``p_0``). Since ``u_0 = p_0``, ``q_j = p_j`` for ``j < n``:
    the trained positions are unchanged (returned exactly, not recomputed); position ``i n + j``
    is "block ``i``, offset ``j``", with ``alpha`` weighting the block. This is the only
    implementation: the ``hierarchical`` encoding and ``trainable`` with
    ``extrapolate="hierarchical"`` both call it.
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
class TrainableEncoding(PositionalEncoding):
    r"""``trainable``: a learned table :math:`P \in \mathbb{C}^{\text{max\_len} \times D}` added
    to the input, :math:`x_k \mapsto x_k + P_k` (BERT/GPT absolute position embeddings).

    Lengths beyond ``max_len`` have no trained row: by default that is a ValueError.
    ``extrapolate="hierarchical"`` is how a trained ``trainable`` table is extended: positions
    ``max_len .. max_len**2 - 1`` come from the ``hierarchical`` decomposition of the table
    (:func:`hierarchical_positions`, Su 2020), the first ``max_len`` positions unchanged. The
    ``hierarchical`` encoding (:class:`~cplxnet.encodings.HierarchicalEncoding`) is this class
    with the option always on; ``hierarchical`` is the name of the scheme.

    Args:
        d_model: model width.
        max_len: rows of the table (longest input).
        extrapolate: ``"error"`` or ``"hierarchical"``.
        alpha: block weight of the hierarchical extension.
        std: initial standard deviation (BERT's 0.02; total variance ``std**2`` for complex).
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = TrainableEncoding(d_model=4, max_len=16)
        >>> enc.encode_input(torch.zeros(2, 5, 4, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 4])
    """

    name = "trainable"
    acts_on = frozenset({"input"})
    supports_kv_cache = True

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        extrapolate: str = "error",
        alpha: float = 0.4,
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, d_model=d_model, max_len=max_len)
        self.extrapolate = check_choice(extrapolate, EXTRAPOLATE, owner, "extrapolate")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"{owner}: alpha must be in (0, 1), got {alpha}")
        self.d_model, self.max_len, self.alpha, self.std = d_model, max_len, float(alpha), std
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        self.weight = nn.Parameter(torch.empty(max_len, d_model, **fk))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        normal_(self.weight, self.std)

    def table(self, length: int) -> torch.Tensor:
        """Positions ``0 .. length-1``, ``(length, d_model)``."""
        owner = type(self).__name__
        if length <= self.max_len:
            return self.weight[:length]
        if self.extrapolate == "error":
            raise ValueError(
                f"{owner}: input length {length} exceeds max_len={self.max_len}, the number of "
                f"trained positions; build the encoding with max_len >= {length}, or pass "
                f"extrapolate='hierarchical' to serve up to max_len**2 positions"
            )
        if length > self.max_len**2:
            raise ValueError(
                f"{owner}: input length {length} exceeds max_len**2 = {self.max_len**2} "
                f"(max_len={self.max_len}), the reach of the hierarchical decomposition; build "
                "the encoding with a larger max_len"
            )
        return hierarchical_positions(self.weight, length, self.alpha)

    def encode_input(
        self, x: torch.Tensor, offset: int = 0, *, positions: Positions | None = None
    ) -> torch.Tensor:  # (B, L, D) -> (B, L, D)
        """``x + p`` at positions ``offset .. offset+L-1`` (or the keyword-only ``positions``)."""
        check_sequence(x, self.d_model, self.complex_model, type(self).__name__)
        check_offset(offset, type(self).__name__)
        return x + rows_at(self.table, x.shape[1], positions, offset)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, max_len={self.max_len}, extrapolate={self.extrapolate!r}, "
            f"dtype={self.dtype}"
        )
