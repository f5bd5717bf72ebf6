r"""``hierarchical``: an absolute position table extended by Su's hierarchical decomposition.

Su Jianlin, "层次分解位置编码，让BERT可以处理超长文本" (Hierarchical decomposition of position
embeddings lets BERT process very long text), kexue.fm/archives/7947, Dec 2020; implemented in
bert4keras as ``hierarchical_position`` of ``PositionEmbedding``. The decomposition itself is
:func:`hierarchical_positions` (one implementation, in :mod:`cplxnet.encodings.trainable`): this
encoding is the ``trainable`` table with ``extrapolate="hierarchical"`` always on.
"""

from __future__ import annotations

import torch

from .base import PositionalEncoding
from .registry import register_encoding
from .trainable import TrainableEncoding, hierarchical_positions

__all__ = ["HierarchicalEncoding", "hierarchical_positions"]


@register_encoding
class HierarchicalEncoding(TrainableEncoding):
    r"""``hierarchical``: an absolute table of ``n = max_len`` rows serving ``n**2`` positions.

    Adds :math:`q_k` of :func:`hierarchical_positions` to the input: ``x_k + q_k`` with
    :math:`q_{in+j} = \alpha u_i + (1-\alpha) u_j`, :math:`u_i = (p_i - \alpha p_0)/(1-\alpha)`
    (Su Jianlin 2020, "hierarchical position embedding" of bert4keras). The first ``n``
    positions are the table itself. It is :class:`~cplxnet.encodings.TrainableEncoding` with
    ``extrapolate="hierarchical"`` (same parameters, same code); that option is how an already
    trained ``trainable`` table is extended, and :meth:`from_trained` copies such a table into
    this encoding.

    Args:
        d_model: model width.
        max_len: rows ``n`` of the base table (lengths up to ``n**2`` are served).
        alpha: block weight in ``(0, 1)`` (Su's choice 0.4).
        std: standard deviation of the initial table (total variance ``std**2`` for complex).
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = HierarchicalEncoding(d_model=4, max_len=16)
        >>> enc.encode_input(torch.zeros(2, 5, 4, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 4])
    """

    name = "hierarchical"

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        alpha: float = 0.4,
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            d_model,
            max_len,
            extrapolate="hierarchical",
            alpha=alpha,
            std=std,
            device=device,
            dtype=dtype,
        )

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

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, max_len={self.max_len} (serves {self.max_len**2}), "
            f"alpha={self.alpha}, dtype={self.dtype}"
        )
