r"""Transformer-XL relative attention (Dai et al., "Transformer-XL: Attentive Language Models
Beyond a Fixed-Length Context", ACL 2019; also XLNet, Yang et al., NeurIPS 2019)."""

from __future__ import annotations

import torch
from torch import nn

from .._utils import factory_kwargs, pack, real_dtype
from ._common import (
    cached_rows,
    check_base,
    check_heads,
    complex_features,
    complex_sinusoid,
    glorot_,
    head_width,
    normal_,
    relative_index,
    sinusoid_frequencies,
    table_positions,
)
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["XLEncoding"]


@register_encoding
class XLEncoding(PositionalEncoding):
    r"""``xl``: the Transformer-XL decomposition of the logits.

    .. math::
        A_{ij} = \underbrace{q_i \cdot k_j}_{(a)} + \underbrace{q_i \cdot W_{K,R} R_{i-j}}_{(b)}
        + \underbrace{u \cdot k_j}_{(c)} + \underbrace{v \cdot W_{K,R} R_{i-j}}_{(d)},
        \qquad \text{all over } \sqrt{D_h}

    Term (a) is the kernel's content score; this encoding returns (b) + (c) + (d) scaled by
    :meth:`content_scale`. :math:`R_r` is the fixed sinusoid of relative position ``r``, in this
    package's complex algebra :math:`R_r = e^{i r w}` with ``n`` complex features (``n = d_model``
    complex, ``d_model/2`` for a real model), packed to ``2n`` reals; :math:`W_{K,R}` (its own
    projection, per head) maps it to the packed head width; ``u`` and ``v`` are learned global
    vectors per head. All parameters are shared by the layers using this encoding (the paper
    learns ``W_{K,R}`` per layer and shares ``u, v``). No value term.

    Memory: never forms ``(L, L, Dh)``: the ``Lq + Lk - 1`` sinusoids are projected once
    (``(H, Lq+Lk-1, P)``), ``(q_i + v)`` is multiplied by them (``(B, H, Lq, Lq+Lk-1)``) and the
    result is gathered at ``i - j`` (equivalent to the paper's "relative shift"). With fewer
    queries than keys the queries are the last ``Lq`` key positions (Transformer-XL's segment
    memory before them, a decoder's cache: :func:`~cplxnet.encodings._common.relative_index`).

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        base: sinusoid frequency base.
        std: initial standard deviation of ``u`` and ``v``.
        device, dtype: model dtype (complex by default; real for a real twin). Parameters are
            real (packed widths).

    Examples::

        >>> enc = XLEncoding(d_model=8, num_heads=2)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "xl"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        base: float = 10000.0,
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.d_model, self.num_heads, self.std = d_model, num_heads, std
        self.base = check_base(base, owner)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        dh = head_width(d_model, num_heads, owner)
        self.packed_width = P = 2 * dh if self.complex_model else dh
        self.features = complex_features(d_model, self.complex_model, owner)
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        self.rel_proj = nn.Parameter(torch.empty(num_heads * P, 2 * self.features, **rk))
        self.u = nn.Parameter(torch.empty(num_heads, P, **rk))
        self.v = nn.Parameter(torch.empty(num_heads, P, **rk))
        self.register_table("_table", "_build", 128, fk["device"])
        self.reset_parameters()

    def _build(self, n: int, device) -> torch.Tensor:  # (n, features) e^{i r w}, r = 0..n-1
        # angles in float64, the table in complex64 (complex128 for a float64 model): a device
        # without float64 holds it
        kind = torch.complex128 if real_dtype(self.dtype) == torch.float64 else torch.complex64
        freqs = sinusoid_frequencies(self.features, self.base)
        return complex_sinusoid(table_positions(n, device), freqs, kind).to(device)

    def reset_parameters(self) -> None:
        self.reset_tables()
        glorot_(self.rel_proj)
        normal_(self.u, self.std)
        normal_(self.v, self.std)

    def relative_embeddings(self, lq: int, lk: int, dtype: torch.dtype) -> torch.Tensor:
        """Packed sinusoids :math:`R_r` for ``r = -(Lq-1) .. Lk-1`` (every query-minus-key
        offset with the queries at the end of the keys): ``(Lq+Lk-1, 2n)`` real.

        From a cached table of ``e^{i r w}``, ``r >= 0`` (non-persistent buffer, extended on
        demand); negative offsets are its conjugates."""
        table = cached_rows(self, "_table", max(lq, lk), self._build)  # (max(Lq, Lk), n)
        R = torch.cat((table[1:lq].flip(0).conj(), table[:lk]), dim=0)  # r = -(Lq-1)..Lk-1
        return pack(R).to(dtype)

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_heads(q, k, self.num_heads, self.packed_width, type(self).__name__)
        B, H, Lq, P = q.shape
        Lk = k.shape[-2]
        R = self.relative_embeddings(Lq, Lk, q.dtype)  # (Lq+Lk-1, 2n)
        Rk = (R @ self.rel_proj.to(q.dtype).T).view(-1, H, P).transpose(0, 1)  # (H, Nr, P)
        u, v = self.u.to(q.dtype), self.v.to(q.dtype)
        bd = (q + v[:, None, :]) @ Rk.transpose(-1, -2)  # (B, H, Lq, Nr): terms (b) + (d)
        column = relative_index(Lq, Lk, q.device) + (Lq - 1)  # r = i - j sits at r + Lq - 1
        bd = bd.gather(-1, column.expand(B, H, Lq, Lk))  # (B, H, Lq, Lk)
        c = torch.einsum("hp,bhjp->bhj", u, k)[:, :, None, :]  # (B, H, 1, Lk): term (c)
        return (bd + c) * self.content_scale(P)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, base={self.base:g}, "
            f"dtype={self.dtype}"
        )
