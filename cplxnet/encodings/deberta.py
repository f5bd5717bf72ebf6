r"""DeBERTa disentangled attention (He, Liu, Gao, Chen, "DeBERTa: Decoding-enhanced BERT with
Disentangled Attention", ICLR 2021; log buckets from DeBERTa-v2)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._utils import check_choice, factory_kwargs, real_dtype
from ._common import check_heads, check_sequence, glorot_, head_width, normal_, relative_index
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["DebertaEncoding", "make_log_bucket_position"]

P2C_INDEX = ("code", "paper")


def make_log_bucket_position(
    relative_pos: torch.Tensor, bucket_size: int, max_position: int
) -> torch.Tensor:
    r"""DeBERTa-v2's log buckets of relative positions (odd in ``relative_pos``).

    Offsets with ``|r| <= bucket_size/2`` are kept; larger ones map to
    ``sign(r) * (mid + ceil(log(|r|/mid) / log((max_position-1)/mid) * (mid-1)))``,
    ``mid = bucket_size // 2`` (computed in float64, as the official numpy code).
    """
    rel = relative_pos.long()
    mid = bucket_size // 2
    sign = torch.sign(rel)
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.full_like(rel, mid - 1), rel.abs())
    log_pos = (
        torch.ceil(
            torch.log(abs_pos.double() / mid) / math.log((max_position - 1) / mid) * (mid - 1)
        )
        + mid
    )
    return torch.where(abs_pos <= mid, rel, (log_pos * sign).long())


@register_encoding
class DebertaEncoding(PositionalEncoding):
    r"""``deberta``: disentangled content/position attention.

    .. math::
        A_{ij} = \frac{q_i \cdot k_j + q_i \cdot K^r_{\delta(i,j)}
        + k_j \cdot Q^r_{\delta_{pc}(i,j)}}{\sqrt{3 D_h}},\qquad
        K^r = P W_{k,r}^T,\ Q^r = P W_{q,r}^T + b_{q,r},

    :math:`\delta(i,j) = \mathrm{clamp}(i - j + k, 0, 2k-1)`; :math:`P` ``(2k, packed d_model)``
    is the relative table shared by all layers, with its own projections to the packed head width
    of every head. ``logit_scale = 1/sqrt(3)`` puts all three terms over :math:`\sqrt{3 D_h}`
    (the kernel scales the content term; this encoding scales its two).

    Position-to-content index: the paper's Eq. 4 writes :math:`Q^r_{\delta(j,i)}`, but its
    Algorithm 1 and the released code (microsoft/DeBERTa, HF ``modeling_deberta``) index with
    :math:`\delta(i,j)`, the same offset as content-to-position (see microsoft/DeBERTa issue
    #162). ``p2c_index="code"`` (default) follows the code; ``"paper"`` uses Eq. 4's
    :math:`\delta(j,i) = \mathrm{clamp}(j - i + k, 0, 2k-1)`.

    ``position_buckets > 0`` uses DeBERTa-v2's log buckets (:func:`make_log_bucket_position`
    with ``bucket_size = position_buckets``, ``max_position = max_relative_positions``) and a table
    of ``2 * position_buckets`` rows; otherwise ``k = max_relative_positions`` and the table has
    ``2k`` rows. Distances beyond the table share its end rows: any length.

    ``absolute_layers > 0``: a trainable absolute table ``(max_len, d_model)`` is added to the input
    of the last ``absolute_layers`` Transformer layers through the ``layer_input`` hook. This is a
    simplification of the paper's enhanced mask decoder (EMD), which feeds absolute positions (plus
    the hidden states) as the *queries* of extra decoding layers before the MLM softmax; here they
    are added to the whole layer input (queries, keys and values) of the last layers.

    Memory: never forms ``(L, L, Dh)``: ``q`` (and ``k``) are multiplied by the rows of the table
    that occur (at most ``2k``), giving ``(B, H, L, <=2k)``, then gathered into ``(B, H, Lq, Lk)``.

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        max_relative_positions: ``k`` (without buckets) or the log-bucket ``max_position``.
        position_buckets: DeBERTa-v2 log buckets (0 = off).
        absolute_layers: number of last layers that get absolute positions (0 = off).
        max_len: rows of the absolute table (with ``absolute_layers > 0``).
        p2c_index: ``"code"`` or ``"paper"`` (see above).
        std: initial standard deviation of the tables (DeBERTa's ``initializer_range``).
        device, dtype: model dtype (complex by default; real for a real twin). Relative
            parameters are real (packed widths); the absolute table is in the model dtype.

    Examples::

        >>> enc = DebertaEncoding(d_model=8, num_heads=2, max_relative_positions=4)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "deberta"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True  # queries sit at the end of the keys (relative_index)
    logit_scale = 1.0 / math.sqrt(3.0)

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        max_relative_positions: int = 128,
        position_buckets: int = 0,
        absolute_layers: int = 0,
        max_len: int = 512,
        p2c_index: str = "code",
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        if max_relative_positions < 1:
            raise ValueError(f"{owner}: max_relative_positions must be >= 1")
        if position_buckets < 0 or absolute_layers < 0:
            raise ValueError(f"{owner}: position_buckets and absolute_layers must be >= 0")
        if position_buckets > 0 and not (
            position_buckets >= 2 and max_relative_positions - 1 > position_buckets // 2
        ):
            raise ValueError(
                f"{owner}: log buckets need position_buckets >= 2 and max_relative_positions - 1 "
                f"> position_buckets // 2, got {position_buckets}, {max_relative_positions}"
            )
        self.p2c_index = check_choice(p2c_index, P2C_INDEX, owner, "p2c_index")
        self.d_model, self.num_heads, self.std = d_model, num_heads, std
        self.max_relative_positions = max_relative_positions
        self.position_buckets = position_buckets
        self.span = position_buckets if position_buckets > 0 else max_relative_positions
        self.absolute_layers, self.max_len = absolute_layers, max_len
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        dh = head_width(d_model, num_heads, owner)
        self.packed_width = P = 2 * dh if self.complex_model else dh
        width = 2 * d_model if self.complex_model else d_model
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        self.rel_embeddings = nn.Parameter(torch.empty(2 * self.span, width, **rk))
        self.pos_key_proj = nn.Parameter(torch.empty(num_heads * P, width, **rk))
        self.pos_query_proj = nn.Parameter(torch.empty(num_heads * P, width, **rk))
        self.pos_query_bias = nn.Parameter(torch.empty(num_heads * P, **rk))
        if absolute_layers > 0:
            self.abs_embeddings = nn.Parameter(torch.empty(max_len, d_model, **fk))
            self.acts_on = frozenset({"logits", "layer"})
        else:
            self.register_parameter("abs_embeddings", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        normal_(self.rel_embeddings, self.std)
        glorot_(self.pos_key_proj)
        glorot_(self.pos_query_proj)
        nn.init.zeros_(self.pos_query_bias)
        if self.abs_embeddings is not None:
            normal_(self.abs_embeddings, self.std)

    def relative_positions(self, lq: int, lk: int, device=None) -> torch.Tensor:
        """``(Lq, Lk)`` relative position ``i - j``, log-bucketed when ``position_buckets > 0``."""
        return self._bucketed(relative_index(lq, lk, device))

    def _bucketed(self, rel: torch.Tensor) -> torch.Tensor:
        if self.position_buckets > 0:
            rel = make_log_bucket_position(rel, self.position_buckets, self.max_relative_positions)
        return rel

    def _rows(self, rel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.span
        c2p = (rel + k).clamp(0, 2 * k - 1)
        p2c = c2p if self.p2c_index == "code" else (k - rel).clamp(0, 2 * k - 1)
        return c2p, p2c

    def indices(self, lq: int, lk: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Table rows ``(c2p, p2c)``, each ``(Lq, Lk)``: :math:`\\delta(i,j)` and the p2c row."""
        return self._rows(self.relative_positions(lq, lk, device))

    def row_range(self, lq: int, lk: int) -> tuple[int, int]:
        """The first and last table rows :meth:`indices` reads, computed on the host (no read of
        device data): with the queries at the end of the keys, ``i - j`` runs from ``1 - lq`` to
        ``lk - 1`` and both row maps (log buckets, clamping) are monotone in it, so their extremes
        are the rows of those two offsets."""
        c2p, p2c = self._rows(self._bucketed(torch.tensor([1 - lq, lk - 1])))
        rows = torch.cat([c2p, p2c])
        return int(rows.min()), int(rows.max())

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_heads(q, k, self.num_heads, self.packed_width, type(self).__name__)
        B, H, Lq, P = q.shape
        Lk = k.shape[-2]
        c2p_idx, p2c_idx = self.indices(Lq, Lk, q.device)
        lo, hi = self.row_range(Lq, Lk)
        rows = self.rel_embeddings[lo : hi + 1].to(q.dtype)  # (Nr, W): only the rows used
        Kr = (rows @ self.pos_key_proj.to(q.dtype).T).view(-1, H, P).transpose(0, 1)
        Qr = rows @ self.pos_query_proj.to(q.dtype).T + self.pos_query_bias.to(q.dtype)
        Qr = Qr.view(-1, H, P).transpose(0, 1)  # (H, Nr, P)
        c2p = (q @ Kr.transpose(-1, -2)).gather(-1, (c2p_idx - lo).expand(B, H, Lq, Lk))
        p2c = (
            (k @ Qr.transpose(-1, -2))
            .gather(  # (B, H, Lk, Lq) -> (B, H, Lq, Lk)
                -1, (p2c_idx - lo).T.expand(B, H, Lk, Lq)
            )
            .transpose(-1, -2)
        )
        return (c2p + p2c) * self.content_scale(P)

    def layer_input(self, x: torch.Tensor, layer: int, num_layers: int) -> torch.Tensor:
        if self.abs_embeddings is None or layer < num_layers - self.absolute_layers:
            return x
        owner = type(self).__name__
        check_sequence(x, self.d_model, self.complex_model, owner)
        L = x.shape[1]
        if self.max_len < L:
            raise ValueError(
                f"{owner}: input length {L} exceeds max_len={self.max_len} of the absolute table "
                f"(absolute_layers={self.absolute_layers}); build with max_len >= {L}"
            )
        return x + self.abs_embeddings[:L]

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"max_relative_positions={self.max_relative_positions}, "
            f"position_buckets={self.position_buckets}, absolute_layers={self.absolute_layers}, "
            f"p2c_index={self.p2c_index!r}, dtype={self.dtype}"
        )
