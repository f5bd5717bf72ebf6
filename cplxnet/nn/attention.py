r"""Multi-head attention for complex (and real) sequences, with the positional-encoding hooks."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from .. import functional as CF
from .. import init as cinit
from .._utils import (
    HasDtype,
    check_choice,
    check_mask,
    check_sizes,
    factory_kwargs,
    pack,
    real_dtype,
    unpack,
)
from ..functional.attention import _check_broadcast
from .linear import WEIGHT_FIELDS, Linear

if TYPE_CHECKING:  # imported lazily at run time: encodings may themselves import cplxnet.nn
    from ..encodings.base import PositionalEncoding

__all__ = ["MultiheadAttention"]


def _xavier_uniform_(w: torch.Tensor) -> None:
    """Glorot-uniform for complex (variance-correct, :mod:`cplxnet.init`) or real tensors."""
    if w.is_complex():
        cinit.xavier_uniform_(w)
    else:
        nn.init.xavier_uniform_(w)


def _check_encoding(encoding: object, owner: str) -> None:
    from ..encodings.base import PositionalEncoding

    if not isinstance(encoding, PositionalEncoding):
        raise TypeError(
            f"{owner}: encoding must be a cplxnet.encodings.base.PositionalEncoding, got "
            f"{type(encoding).__name__}"
        )


class MultiheadAttention(HasDtype, nn.Module):
    r"""Multi-head scaled dot-product attention on complex (or real) sequences.

    .. math::
        \mathrm{MHA}(x) = \mathrm{concat}_h\big(\mathrm{softmax}(\mathrm{score}(q_h, k_h)\, s
        + \text{bias}_h + \text{mask})\, v_h\big) W_o^T + b_o,
        \quad q = x W_q^T + b_q,\ k = x_k W_k^T + b_k,\ v = x_v W_v^T + b_v

    with ``score="real"``: :math:`\mathrm{Re}(q_h k_h^H)` (Yang et al., "Complex Transformer",
    ICASSP 2020) computed by one fused real kernel on packed features, or ``score="modulus"``:
    :math:`|q_h k_h^T|` (Wang et al., ICLR 2020); :math:`s = 1/\sqrt{D_h}` times the encoding's
    ``logit_scale``. See :func:`cplxnet.functional.scaled_dot_product_attention`.

    Args:
        embed_dim: model width ``D`` (complex features for a complex dtype).
        num_heads: number of heads ``H``; ``D`` must be divisible by ``H`` (``Dh = D / H``).
        bias: learn biases in the input and output projections.
        dropout: dropout on the attention weights (training mode only).
        score: ``"real"`` or ``"modulus"``.
        projection: ``"complex"`` (default) or ``"real"``: the number field of the four
            projection weights (:class:`~cplxnet.nn.Linear`'s ``weight_field``). ``"real"`` applies
            one real matrix to the real and imaginary parts alike (:math:`W x_r + i W x_i`), the
            "shared projections" of the Complex Order paper's Table 4 ablation; biases stay
            complex. Ignored by a real-dtype layer (its weights are real anyway).
        device, dtype: factory kwargs. ``dtype`` defaults to the complex type of
            ``torch.get_default_dtype()``; a real floating dtype gives the real twin (plain real
            multi-head attention, same code path, same state_dict keys).

    Parameters follow :class:`torch.nn.MultiheadAttention` (``in_proj_weight (3D, D)``,
    ``in_proj_bias (3D)``, ``out_proj.weight``, ``out_proj.bias``), so with a real dtype the
    state_dict of a ``torch.nn.MultiheadAttention(D, H, batch_first=True)`` loads as is. Each of
    the three ``(D, D)`` input blocks and the output projection are Glorot-uniform
    (variance-correct for complex), biases zero.

    Masks follow :class:`torch.nn.MultiheadAttention`: ``key_padding_mask`` ``(B, Lk)`` bool,
    **True = padding** (masked out); ``attn_mask`` bool, **True = not allowed to attend**, or a
    real float mask added to the logits; it broadcasts to ``(B, H, Lq, Lk)`` (e.g. ``(Lq, Lk)``).
    (The functional kernel :func:`cplxnet.functional.scaled_dot_product_attention` keeps the
    convention of :func:`torch.nn.functional.scaled_dot_product_attention`, bool True = may
    attend, as torch's functional does.) ``is_causal`` restricts query ``i`` to keys ``j <= i``
    and combines with both masks. A query whose keys are all masked gets output zero (torch gives
    NaN).

    Encodings (:class:`cplxnet.encodings.base.PositionalEncoding`, owned by the model and not a
    submodule of this layer): ``forward`` calls ``q, k, v = encoding.rotate(q, k, v)`` on the
    ``(B, H, L, Dh)`` heads, adds ``encoding.logits_bias(pack(q), pack(k))`` to the scaled
    logits, multiplies the scale by ``encoding.logit_scale``, and, when
    ``encoding.has_value_term``, adds ``encoding.value_term(weights)`` to the packed output.

    Shape: ``(B, Lq, D)`` -> ``(B, Lq, D)``; optional ``key``/``value`` ``(B, Lk, D)``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        score: str = "real",
        projection: str = "complex",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, embed_dim=embed_dim, num_heads=num_heads)
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"{owner}: embed_dim ({embed_dim}) must be a positive multiple of num_heads "
                f"({num_heads})"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{owner}: dropout must be in [0, 1], got {dropout}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self._dtype = fk["dtype"]
        self.dropout = dropout
        self.score = check_choice(score, CF.SCORES, owner, "score")
        self.projection = check_choice(projection, WEIGHT_FIELDS, owner, "projection")
        real_weights = projection == "real" or not fk["dtype"].is_complex
        wk = {"device": device, "dtype": real_dtype(fk["dtype"])} if real_weights else fk
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim, **wk))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, **fk)) if bias else None
        if fk["dtype"].is_complex:
            self.out_proj = Linear(
                embed_dim, embed_dim, bias=bias, weight_field=projection, **fk
            )
        else:
            self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **fk)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        D = self.embed_dim
        with torch.no_grad():
            for i in range(3):
                _xavier_uniform_(self.in_proj_weight[i * D : (i + 1) * D])
            _xavier_uniform_(self.out_proj.weight)
            if self.in_proj_bias is not None:
                nn.init.zeros_(self.in_proj_bias)
            if self.out_proj.bias is not None:
                nn.init.zeros_(self.out_proj.bias)

    def _check_seq(self, x: torch.Tensor, name: str) -> None:
        owner = type(self).__name__
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype != self.dtype:
            kind = "complex" if self.dtype.is_complex else "real"
            raise TypeError(
                f"{owner}: {name} has dtype {x.dtype} but this {kind} layer has dtype "
                f"{self.dtype}; convert the input with .to({self.dtype}) or build the layer "
                f"with dtype={x.dtype}"
            )
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"{owner}: expected {name} of shape (B, L, {self.embed_dim}), got "
                f"{tuple(x.shape)}"
            )

    def forward(
        self,
        x: torch.Tensor,
        *,
        key_padding_mask: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        encoding: PositionalEncoding | None = None,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from ``x`` to ``key`` (default ``x``) and ``value`` (default ``key``).

        Everything after ``x`` is keyword-only: torch's ``forward(query, key, value,
        key_padding_mask, ...)`` puts other tensors in those positions, so a call ported from
        torch raises a TypeError instead of reading a key as a mask.

        Returns ``(B, Lq, D)``. Outputs of padded query positions are computed as any other
        (they never influence non-padded positions, since padded keys are masked).
        """
        owner = type(self).__name__
        self._check_seq(x, "x")
        if value is not None and key is None:
            raise ValueError(f"{owner}: value was given without key; pass key= as well")
        if key is not None:
            self._check_seq(key, "key")
            value = key if value is None else value
            self._check_seq(value, "value")
            if key.shape[:2] != value.shape[:2] or key.shape[0] != x.shape[0]:
                raise ValueError(
                    f"{owner}: x, key and value must share the batch size and key/value the "
                    f"length, got x={tuple(x.shape)}, key={tuple(key.shape)}, "
                    f"value={tuple(value.shape)}"
                )
        B, Lq, D = x.shape
        H, Dh = self.num_heads, self.head_dim
        Lk = Lq if key is None else key.shape[1]
        check_mask(key_padding_mask, (B, Lk), owner, "key_padding_mask")
        if encoding is not None:
            _check_encoding(encoding, owner)

        w, b = self.in_proj_weight, self.in_proj_bias
        if key is None:  # self-attention: one GEMM for q, k, v
            q, k, v = CF.linear(x, w, b).chunk(3, dim=-1)  # (B, L, D) each
        else:
            bq, bk, bv = (None, None, None) if b is None else b.chunk(3)
            wq, wk, wv = w.chunk(3)
            q, k, v = CF.linear(x, wq, bq), CF.linear(key, wk, bk), CF.linear(value, wv, bv)
        q = q.unflatten(-1, (H, Dh)).transpose(1, 2)  # (B, H, Lq, Dh)
        k = k.unflatten(-1, (H, Dh)).transpose(1, 2)  # (B, H, Lk, Dh)
        v = v.unflatten(-1, (H, Dh)).transpose(1, 2)  # (B, H, Lk, Dh)

        scale = 1.0 / math.sqrt(Dh)
        bias = None
        if encoding is not None:
            q, k, v = encoding.rotate(q, k, v)
            bias = encoding.logits_bias(pack(q), pack(k))  # (B|1, H|1, Lq, Lk) real
            scale = scale * encoding.logit_scale
        allowed = None  # bool, True = may attend: the kernel's convention
        if attn_mask is not None:
            if not isinstance(attn_mask, torch.Tensor) or not (
                attn_mask.dtype == torch.bool or attn_mask.is_floating_point()
            ):
                raise TypeError(
                    f"{owner}: attn_mask must be a bool (True = not allowed to attend, as "
                    f"torch.nn.MultiheadAttention) or real floating tensor (added to the logits), "
                    f"got {getattr(attn_mask, 'dtype', type(attn_mask).__name__)}"
                )
            _check_broadcast(attn_mask, (B, H, Lq, Lk), owner, "attn_mask")
            if attn_mask.dtype == torch.bool:
                allowed = ~attn_mask
            else:
                bias = attn_mask if bias is None else bias + attn_mask
        if key_padding_mask is not None:
            keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Lk)
            allowed = keep if allowed is None else allowed & keep
        p = self.dropout if self.training else 0.0

        if encoding is not None and encoding.has_value_term:
            weights = CF.attention_weights(  # (B, H, Lq, Lk) real
                q, k, allowed, is_causal, self.score, bias, scale
            )
            if p > 0.0:
                weights = F.dropout(weights, p)
            out = weights @ pack(v)  # (B, H, Lq, 2Dh) packed real (Dh for real)
            term = encoding.value_term(weights)
            if term is not None:
                out = out + term
            out = unpack(out, v)  # (B, H, Lq, Dh)
        else:
            out = CF.scaled_dot_product_attention(  # (B, H, Lq, Dh)
                q, k, v, allowed, is_causal, p, self.score, bias, scale
            )
        out = out.transpose(1, 2).reshape(B, Lq, D)  # (B, Lq, D)
        return self.out_proj(out)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
            f"bias={self.in_proj_bias is not None}, dropout={self.dropout}, "
            f"score={self.score!r}"
            + (f", projection={self.projection!r}" if self.projection != "complex" else "")
            + f", dtype={self.dtype}"
        )
