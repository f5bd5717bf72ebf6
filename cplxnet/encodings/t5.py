r"""T5 bucketed relative position bias (Raffel et al., "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", JMLR 2020)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._utils import check_sizes, factory_kwargs, real_dtype
from ._common import normal_, relative_index
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["T5Encoding", "relative_position_bucket"]


def relative_position_bucket(
    relative_position: torch.Tensor,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    r"""T5's bucket of ``relative_position = key position - query position``.

    Same formula as Mesh TensorFlow's ``_relative_position_bucket`` and HF ``T5Attention``: when
    bidirectional, half the buckets go to keys after the query (offset ``num_buckets/2``); of
    the ``n`` buckets per direction, distances ``< n/2`` get their own bucket and larger ones share
    logarithmically spaced buckets up to ``max_distance``,
    ``n/2 + floor(log(d/(n/2)) / log(max_distance/(n/2)) * (n/2))``, capped at ``n - 1``
    (computed in float32 as the reference implementations do).
    """
    n = num_buckets
    rel = relative_position.long()
    ret = torch.zeros_like(rel)
    if bidirectional:
        n //= 2
        ret = ret + (rel > 0).long() * n
        dist = rel.abs()
    else:
        dist = (-rel).clamp(min=0)
    max_exact = n // 2
    is_small = dist < max_exact
    large = (
        max_exact
        + (
            torch.log(dist.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (n - max_exact)
        ).long()
    )
    large = large.clamp(max=n - 1)
    return ret + torch.where(is_small, dist, large)


@register_encoding
class T5Encoding(PositionalEncoding):
    r"""``t5``: a learned scalar per head and relative-position bucket, added to the logits.

    .. math::
        A_{ij} = \frac{q_i \cdot k_j}{\sqrt{D_h}} + b_{h,\ \mathrm{bucket}(j - i)}

    with :func:`relative_position_bucket` (``num_buckets=32``, ``max_distance=128``,
    bidirectional in an encoder; unidirectional when the model is causal, as T5's decoder, where
    all 32 buckets measure distances to earlier keys). The bias is added raw, not scaled (T5
    adds it to unscaled logits and has no :math:`1/\sqrt{D_h}` at all; here the kernel keeps
    its content scale). One table ``(num_buckets, H)`` shared by every layer, as T5 computes it
    once in the first layer.
    Real parameters; the bias does not depend on ``q, k`` values, so complex and real attention
    are identical. Any length (distances beyond ``max_distance`` share the last bucket).

    Memory: buckets are computed for the ``Lq + Lk - 1`` distinct offsets and gathered into
    ``(1, H, Lq, Lk)``.

    Args:
        num_heads: number of heads.
        num_buckets: buckets (both directions together when bidirectional).
        max_distance: distance where the last (logarithmic) bucket starts.
        bidirectional: separate buckets for keys before and after the query (encoder); ``False``
            for causal attention (keys after the query share bucket 0). Default ``None``: ``not
            causal``.
        causal: the model's attention is causal (passed by language models through the
            registry's context); chooses the default of ``bidirectional``.
        std: initial standard deviation of the table.
        device, dtype: model dtype; the table is real of its real dtype.

    Examples::

        >>> enc = T5Encoding(num_heads=2, num_buckets=8, max_distance=16)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "t5"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True

    def __init__(
        self,
        num_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool | None = None,
        std: float = 0.02,
        causal: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, num_heads=num_heads, num_buckets=num_buckets, max_distance=max_distance)
        if bidirectional is None:
            bidirectional = not causal
        per_dir = num_buckets // 2 if bidirectional else num_buckets
        if per_dir < 2 or (bidirectional and num_buckets % 2):
            raise ValueError(
                f"{owner}: num_buckets must be >= 2 per direction (and even when bidirectional), "
                f"got {num_buckets}"
            )
        if max_distance <= per_dir // 2:
            raise ValueError(
                f"{owner}: max_distance ({max_distance}) must exceed the exact range "
                f"({per_dir // 2})"
            )
        self.num_heads, self.num_buckets, self.max_distance = num_heads, num_buckets, max_distance
        self.bidirectional, self.std = bool(bidirectional), std
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        self.weight = nn.Parameter(
            torch.empty(num_buckets, num_heads, device=fk["device"], dtype=real_dtype(fk["dtype"]))
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        normal_(self.weight, self.std)

    def buckets(self, lq: int, lk: int, device=None) -> torch.Tensor:
        """``(Lq, Lk)`` bucket of each (query, key) pair."""
        rel = -relative_index(lq, lk, device)  # j - i
        return relative_position_bucket(
            rel, self.bidirectional, self.num_buckets, self.max_distance
        )

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        Lq, Lk = q.shape[-2], k.shape[-2]
        if q.dim() != 4 or q.shape[1] != self.num_heads or k.shape[1] != self.num_heads:
            raise ValueError(
                f"{type(self).__name__}: expected q, k of shape (B, {self.num_heads}, L, P), got "
                f"{tuple(q.shape)}, {tuple(k.shape)}"
            )
        if Lq == 0 or Lk == 0:  # an empty sequence: no logits to bias
            return q.new_zeros(1, self.num_heads, Lq, Lk)
        # distinct offsets j - i (queries are the last Lq key positions: relative_index)
        rel = torch.arange(-(Lk - 1), Lq, device=q.device)
        b = relative_position_bucket(rel, self.bidirectional, self.num_buckets, self.max_distance)
        per_offset = self.weight.to(q.dtype)[b]  # (Lq+Lk-1, H)
        off = -relative_index(Lq, Lk, q.device) + (Lk - 1)  # (Lq, Lk): column of j - i
        return per_offset[off].permute(2, 0, 1).unsqueeze(0)  # (1, H, Lq, Lk)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}, "
            f"dtype={self.dtype}"
        )
