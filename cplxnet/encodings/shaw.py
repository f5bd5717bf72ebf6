r"""Relative position representations (Shaw, Uszkoreit, Vaswani, "Self-Attention with Relative
Position Representations", NAACL 2018)."""

from __future__ import annotations

import torch
from torch import nn

from .._utils import factory_kwargs, real_dtype
from ._common import check_heads, glorot_, head_width, relative_index
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["ShawEncoding"]


@register_encoding
class ShawEncoding(PositionalEncoding):
    r"""``shaw``: learned relative embeddings added to the keys and to the values.

    .. math::
        e_{ij} = \frac{q_i \cdot (k_j + a^K_{ij})}{\sqrt{D_h}},\qquad
        z_i = \sum_j \alpha_{ij} (v_j + a^V_{ij}),\qquad
        a^{K,V}_{ij} = w^{K,V}_{\mathrm{clip}(j - i, -k, k)}

    with tables :math:`w^K, w^V` of ``2k+1`` rows, shared by all heads and layers (as in the
    paper: shared across heads). Rows are packed real vectors of the head width (``2 Dh`` for
    complex heads, so :math:`q \cdot w` is :math:`\mathrm{Re}(q\, w^H)`).

    Memory: never forms an ``(L, L, Dh)`` tensor. Logits: ``q @ w^K^T`` is ``(B, H, Lq, 2k+1)``,
    then gathered into ``(B, H, Lq, Lk)`` by the clipped offset. Values: the weights are summed per
    relative offset (``scatter_add`` into ``(B, H, Lq, 2k+1)``), then multiplied by ``w^V``.

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        max_relative_position: clipping distance ``k`` (default 16, the paper's setting).
        values: also add ``a^V`` to the values (the "values" site); ``False`` keeps the logits
            term only (the paper's ablation without ``a^V``).
        device, dtype: model dtype (complex by default; real for a real twin). Parameters are
            real of the packed width.

    Examples::

        >>> enc = ShawEncoding(d_model=8, num_heads=2, max_relative_position=4)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "shaw"
    acts_on = frozenset({"logits", "values"})
    supports_kv_cache = True

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        max_relative_position: int = 16,
        values: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        if max_relative_position < 0:
            raise ValueError(f"{owner}: max_relative_position must be >= 0")
        self.d_model, self.num_heads = d_model, num_heads
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        dh = head_width(d_model, num_heads, owner)
        self.packed_width = 2 * dh if self.complex_model else dh
        self.max_relative_position = k = int(max_relative_position)
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        self.rel_keys = nn.Parameter(torch.empty(2 * k + 1, self.packed_width, **rk))
        if values:
            self.rel_values = nn.Parameter(torch.empty(2 * k + 1, self.packed_width, **rk))
        else:
            self.register_parameter("rel_values", None)
            self.acts_on = frozenset({"logits"})
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot_(self.rel_keys)
        if self.rel_values is not None:
            glorot_(self.rel_values)

    def relative_index(self, lq: int, lk: int, device=None) -> torch.Tensor:
        """``(Lq, Lk)`` row of the table for each pair: ``clip(j - i, -k, k) + k``."""
        k = self.max_relative_position
        return (-relative_index(lq, lk, device)).clamp(-k, k) + k

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_heads(q, k, self.num_heads, self.packed_width, type(self).__name__)
        B, H, Lq, _ = q.shape
        Lk = k.shape[-2]
        idx = self.relative_index(Lq, Lk, q.device)  # (Lq, Lk)
        qr = q @ self.rel_keys.to(q.dtype).T  # (B, H, Lq, 2k+1)
        bias = qr.gather(-1, idx.expand(B, H, Lq, Lk))  # (B, H, Lq, Lk)
        return bias * self.content_scale(self.packed_width)

    def value_term(self, weights: torch.Tensor) -> torch.Tensor | None:
        if self.rel_values is None:
            return None
        B, H, Lq, Lk = weights.shape
        idx = self.relative_index(Lq, Lk, weights.device).expand(B, H, Lq, Lk)
        binned = weights.new_zeros(B, H, Lq, self.rel_values.shape[0])
        binned = binned.scatter_add(-1, idx, weights)  # (B, H, Lq, 2k+1): weight per offset
        return binned @ self.rel_values.to(weights.dtype)  # (B, H, Lq, P)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"max_relative_position={self.max_relative_position}, "
            f"values={self.rel_values is not None}, dtype={self.dtype}"
        )
