r"""Multi-head attention for complex (and real) sequences, with the positional-encoding hooks."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from .. import functional as CF
from .. import init as cinit
from .._utils import (
    HasDtype,
    check_choice,
    check_sizes,
    factory_kwargs,
    pack,
    real_dtype,
    unpack,
    without_autocast,
)
from ..functional.attention import check_broadcast
from .kv_cache import KVCache
from .linear import WEIGHT_FIELDS, Linear

if TYPE_CHECKING:  # imported lazily at run time: encodings may themselves import cplxnet.nn
    from ..encodings.base import PositionalEncoding

__all__ = ["MultiheadAttention", "ATTENTION_SITES", "check_score"]


def _xavier_uniform_(w: torch.Tensor) -> None:
    """Glorot-uniform for complex (variance-correct, :mod:`cplxnet.init`) or real tensors."""
    if w.is_complex():
        cinit.xavier_uniform_(w)
    else:
        nn.init.xavier_uniform_(w)


def check_encoding(encoding: object, owner: str, applied: frozenset[str] | None = None) -> None:
    """Raise unless ``encoding`` is a :class:`PositionalEncoding` acting on at least one of the
    sites ``owner`` applies (an encoding without sites, ``none``, is accepted anywhere)."""
    from ..encodings.base import PositionalEncoding

    if not isinstance(encoding, PositionalEncoding):
        raise TypeError(
            f"{owner}: encoding must be a cplxnet.encodings.base.PositionalEncoding, got "
            f"{type(encoding).__name__}"
        )
    if applied is None or not encoding.acts_on or encoding.acts_on & applied:
        return
    where = {
        "token": "'token' is applied by encoding.embed(ids), which replaces the word embedding",
        "input": "'input' by x = encoding.encode_input(x) on the embeddings before the layers",
    }
    advice = "; ".join(where[s] for s in sorted(encoding.acts_on) if s in where)
    raise ValueError(
        f"{owner}: encoding {encoding.name or type(encoding).__name__!r} acts on "
        f"{sorted(encoding.acts_on)}, none of which {owner} applies (it applies "
        f"{sorted(applied)}), so passing it here would do nothing. Apply it where it acts"
        + (f": {advice}" if advice else "")
        + " (the cplxnet.models classifiers do both), and pass encoding= only for sites the "
        "layer applies."
    )


def check_score(score: str, encoding: object, owner: str) -> None:
    """Raise if ``score="modulus"`` meets an encoding that rotates queries and keys (site
    "qk": rotary, xpos): :math:`|q k^T|` does not conjugate ``k``, so the rotations
    :math:`e^{im\theta}`, :math:`e^{in\theta}` combine to :math:`e^{i(m+n)\theta}` and the
    score would depend on absolute positions instead of :math:`m - n`."""
    if score == "modulus" and "qk" in getattr(encoding, "acts_on", ()):
        name = getattr(encoding, "name", "") or type(encoding).__name__
        raise ValueError(
            f"{owner}: encoding {name!r} rotates q and k, and score='modulus' (|q k^T|, k not "
            "conjugated) would make the score depend on m + n instead of m - n; use "
            "score='real' or an encoding that does not act on 'qk'"
        )


#: sites whose hooks :class:`MultiheadAttention` calls
ATTENTION_SITES = frozenset({"qk", "logits", "values"})


class MultiheadAttention(HasDtype, nn.Module):
    r"""Multi-head scaled dot-product attention on complex (or real) sequences, a drop-in for
    :class:`torch.nn.MultiheadAttention` (same arguments in the same order, same parameters, same
    ``forward`` and return value).

    .. math::
        \mathrm{MHA}(q, k, v) = \mathrm{concat}_h\big(\mathrm{softmax}(\mathrm{score}(q_h, k_h)
        \, s + \text{bias}_h + \text{mask})\, v_h\big) W_o^T + b_o,
        \quad q_h = (q W_q^T + b_q)_h,\ k_h = (k W_k^T + b_k)_h,\ v_h = (v W_v^T + b_v)_h

    with ``score="real"``: :math:`\mathrm{Re}(q_h k_h^H)` (Yang et al., "Complex Transformer",
    ICASSP 2020) computed by one fused real kernel on packed features, or ``score="modulus"``:
    :math:`|q_h k_h^T|` (Wang et al., ICLR 2020); :math:`s = 1/\sqrt{D_h}` times the encoding's
    ``logit_scale``. See :func:`cplxnet.functional.scaled_dot_product_attention`. The weights
    :math:`a_{ij}` are real; with a real ``dtype`` this is exactly torch's attention.

    Args (torch's, in torch's order):
        embed_dim: model width ``D`` (complex features for a complex dtype).
        num_heads: number of heads ``H``; ``D`` must be divisible by ``H`` (``Dh = D / H``).
        dropout: dropout on the attention weights (training mode only).
        bias: learn biases in the input and output projections.
        add_bias_kv: append a learned key and value (``bias_k``, ``bias_v`` ``(1, 1, D)``) to
            the keys and values, as torch.
        add_zero_attn: append a zero key and value to every head, as torch.
        kdim, vdim: feature sizes of ``key`` and ``value`` (default ``D``); when they differ from
            ``D`` the projections are stored separately as ``q_proj_weight``, ``k_proj_weight``,
            ``v_proj_weight`` (torch's names) instead of ``in_proj_weight``.
        batch_first: inputs ``(B, L, D)`` (``True``) or ``(L, B, D)`` (``False``, torch's default,
            kept so that a layer ported from torch reads its inputs the same way).
        device, dtype: factory kwargs. ``dtype`` defaults to the complex type of
            ``torch.get_default_dtype()``; a real floating dtype gives plain real attention
            (same code path, same state_dict keys as torch).

    Keyword-only (torch has no counterpart):
        score: ``"real"`` or ``"modulus"``.
        projection: ``"complex"`` (default) or ``"real"``: the number field of the projection
            weights (:class:`~cplxnet.nn.Linear`'s ``weight_field``). ``"real"`` applies one real
            matrix to the real and imaginary parts alike (:math:`W x_r + i W x_i`), the "shared
            projections" of the Complex Order paper's Table 4 ablation; biases stay complex.
            Ignored by a real-dtype layer (its weights are real anyway).

    Parameters follow :class:`torch.nn.MultiheadAttention`, so with a real dtype a torch state_dict
    loads as is (and ``batch_first`` only changes the input layout). Each ``(D, D)`` block of the
    input projection and the output projection are Glorot-uniform (variance-correct for complex),
    biases zero, ``bias_k``/``bias_v`` Glorot-normal.

    Masks follow :class:`torch.nn.MultiheadAttention`: ``key_padding_mask`` ``(B, Lk)``, bool
    **True = padding** (masked out) or float (added to the logits); ``attn_mask`` bool **True = not
    allowed to attend** or a real float mask added to the logits, of shape ``(Lq, Lk)``,
    ``(B * H, Lq, Lk)`` (torch's 3-D form: entry ``b * H + h`` is batch ``b``, head ``h``) or
    anything broadcasting to ``(B, H, Lq, Lk)``. ``is_causal=True`` restricts query ``i`` to keys
    ``j <= i`` and combines with both masks (torch requires ``attn_mask`` with it and treats it as
    a hint; here it also works alone). A query whose keys are all masked gets output zero (torch
    gives NaN). (The functional kernel :func:`cplxnet.functional.scaled_dot_product_attention`
    keeps the convention of :func:`torch.nn.functional.scaled_dot_product_attention`, bool True =
    may attend.)

    Encodings (:class:`cplxnet.encodings.base.PositionalEncoding`, owned by the model and not a
    submodule of this layer) act on the sites ``"qk"``, ``"logits"`` and ``"values"``:
    ``forward(..., encoding=enc)`` calls ``q, k, v = enc.rotate(q, k, v)`` on the
    ``(B, H, L, Dh)`` heads, adds ``enc.logits_bias(pack(q), pack(k))`` to the scaled logits,
    multiplies the scale by ``enc.logit_scale`` and, when ``enc.has_value_term``, adds
    ``enc.value_term(weights)`` to the packed output. An encoding acting on none of these sites
    (sinusoidal, trainable, complex-order: "input"/"token") raises a ValueError saying where to
    apply it.

    Examples::

        >>> attn = MultiheadAttention(16, 4, batch_first=True)
        >>> x = torch.randn(2, 5, 16, dtype=torch.cfloat)
        >>> out, weights = attn(x, x, x)
        >>> out.shape, weights.shape
        (torch.Size([2, 5, 16]), torch.Size([2, 5, 5]))
    """

    #: the encoding sites whose hooks ``forward`` calls
    sites: ClassVar[frozenset[str]] = ATTENTION_SITES

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        score: str = "real",
        projection: str = "complex",
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        check_sizes(owner, embed_dim=embed_dim, num_heads=num_heads, kdim=kdim, vdim=vdim)
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"{owner}: embed_dim ({embed_dim}) must be a positive multiple of num_heads "
                f"({num_heads})"
            )
        if isinstance(dropout, bool) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{owner}: dropout must be a number in [0, 1], got {dropout!r}")
        for name, flag in (
            ("bias", bias),
            ("add_bias_kv", add_bias_kv),
            ("add_zero_attn", add_zero_attn),
            ("batch_first", batch_first),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{owner}: {name} must be a bool, got {flag!r}")
        self.embed_dim = embed_dim
        self.kdim, self.vdim = kdim, vdim
        self._qkv_same_embed_dim = kdim == embed_dim and vdim == embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self._dtype = fk["dtype"]
        self.dropout = float(dropout)
        self.batch_first = batch_first
        self.add_zero_attn = add_zero_attn
        self.score = check_choice(score, CF.SCORES, owner, "score")
        self.projection = check_choice(projection, WEIGHT_FIELDS, owner, "projection")
        real_weights = projection == "real" or not fk["dtype"].is_complex
        wk = {"device": device, "dtype": real_dtype(fk["dtype"])} if real_weights else fk
        D = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * D, D, **wk))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(D, D, **wk))
            self.k_proj_weight = nn.Parameter(torch.empty(D, kdim, **wk))
            self.v_proj_weight = nn.Parameter(torch.empty(D, vdim, **wk))
            self.register_parameter("in_proj_weight", None)
        self.in_proj_bias = nn.Parameter(torch.empty(3 * D, **fk)) if bias else None
        if fk["dtype"].is_complex:
            self.out_proj = Linear(D, D, bias=bias, weight_field=projection, **fk)
        else:
            self.out_proj = nn.Linear(D, D, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, D, **fk))
            self.bias_v = nn.Parameter(torch.empty(1, 1, D, **fk))
        else:
            self.bias_k = self.bias_v = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        D = self.embed_dim
        with torch.no_grad():
            if self._qkv_same_embed_dim:
                for i in range(3):
                    _xavier_uniform_(self.in_proj_weight[i * D : (i + 1) * D])
            else:
                for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                    _xavier_uniform_(w)
            _xavier_uniform_(self.out_proj.weight)
            if self.in_proj_bias is not None:
                nn.init.zeros_(self.in_proj_bias)
            if self.out_proj.bias is not None:
                nn.init.zeros_(self.out_proj.bias)
            for b in (self.bias_k, self.bias_v):
                if b is not None:
                    (cinit.xavier_normal_ if b.is_complex() else nn.init.xavier_normal_)(b)

    def _check_seq(self, x: torch.Tensor, name: str, width: int, batched: bool) -> None:
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
        layout = ("(B, L, " if self.batch_first else "(L, B, ") if batched else "(L, "
        if x.dim() != (3 if batched else 2) or x.shape[-1] != width:
            raise ValueError(
                f"{owner}: expected {name} of shape {layout}{width})"
                + (" (or unbatched (L, D), as query)" if batched else "")
                + f", got {tuple(x.shape)}"
            )

    def _project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, self_attention: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The three input projections, ``(B, L, D)`` each (one GEMM for self-attention)."""
        b = self.in_proj_bias
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if self_attention:
                return CF.linear(query, w, b).chunk(3, dim=-1)
            wq, wk, wv = w.chunk(3)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        bq, bk, bv = (None, None, None) if b is None else b.chunk(3)
        return CF.linear(query, wq, bq), CF.linear(key, wk, bk), CF.linear(value, wv, bv)

    @without_autocast
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        *,
        encoding: PositionalEncoding | None = None,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key`` and ``value``, as :class:`torch.nn.MultiheadAttention`.

        Args:
            query: ``(B, Lq, D)`` (``(Lq, B, D)`` when ``batch_first=False``), or unbatched
                ``(Lq, D)``.
            key: ``(B, Lk, kdim)`` in the same layout; ``None``: ``query`` (self-attention).
            value: ``(B, Lk, vdim)``; ``None``: ``key``.
            key_padding_mask: ``(B, Lk)`` (``(Lk,)`` unbatched), bool **True = padding** or float
                added to the logits.
            need_weights: also return the attention weights (computed explicitly; ``False``
                lets self-attention run on torch's fused kernel).
            attn_mask: ``(Lq, Lk)``, ``(B * H, Lq, Lk)`` or broadcasting to ``(B, H, Lq, Lk)``;
                bool **True = not allowed to attend**, or real float added to the logits.
            average_attn_weights: average the returned weights over the heads.
            is_causal: query ``i`` attends only to keys ``j <= i`` (with or without
                ``attn_mask``).
            encoding: the model's positional encoding (keyword-only), acting on "qk", "logits"
                or "values".
            cache: a :class:`~cplxnet.nn.KVCache` (keyword-only, self-attention only, without
                masks): the rows of ``query`` are the positions after the cached ones; their
                keys and values are appended and the queries attend to every cached key (with
                ``is_causal``, to the keys up to their own position).

        Returns:
            ``(output, weights)``: ``output`` ``(B, Lq, D)`` in the layout of ``query``;
            ``weights`` real, ``(B, Lq, Lk)`` averaged over the heads or ``(B, H, Lq, Lk)``
            (without ``B`` for unbatched input; ``Lk`` counts the keys added by
            ``add_bias_kv``/``add_zero_attn``), or ``None`` when ``need_weights=False``. Padded
            query positions are computed as any other (padded keys never influence them).
        """
        owner = type(self).__name__
        if not isinstance(query, torch.Tensor):
            raise TypeError(f"{owner}: query must be a torch.Tensor, got {type(query).__name__}")
        batched = query.dim() != 2
        self_attention = key is None or (key is query and (value is None or value is query))
        if value is not None and key is None:
            raise ValueError(f"{owner}: value was given without key; pass key as well")
        key = query if key is None else key
        value = key if value is None else value
        self._check_seq(query, "query", self.embed_dim, batched)
        if not self_attention:
            self._check_seq(key, "key", self.kdim, batched)
            self._check_seq(value, "value", self.vdim, batched)
        if not batched:
            query, key, value = query[None], key[None], value[None]
            if key_padding_mask is not None and isinstance(key_padding_mask, torch.Tensor):
                key_padding_mask = key_padding_mask[None]
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                f"{owner}: query, key and value must share the batch size and key/value the "
                f"length, got query={tuple(query.shape)}, key={tuple(key.shape)}, "
                f"value={tuple(value.shape)} (batch first)"
            )
        B, Lq, D = query.shape
        H, Dh = self.num_heads, self.head_dim
        Lk = key.shape[1]
        if encoding is not None:
            check_encoding(encoding, owner, self.sites)
            check_score(self.score, encoding, owner)
            if self.bias_k is not None or self.add_zero_attn:
                raise ValueError(
                    f"{owner}: a positional encoding cannot be combined with add_bias_kv or "
                    "add_zero_attn (the appended keys have no position)"
                )

        if cache is not None:
            self._check_cache(cache, self_attention, key_padding_mask, attn_mask, encoding)
        q, k, v = self._project(query, key, value, self_attention)  # (B, L, D) each
        bias = _padding_bias(key_padding_mask, (B, Lk), q, owner)
        allowed = (
            None
            if bias is not None or key_padding_mask is None
            else (
                ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Lk) bool, True = may attend
            )
        )
        if attn_mask is not None:
            attn_mask = _attn_mask_4d(attn_mask, (B, H, Lq, Lk), owner)
        extra = 0
        if self.bias_k is not None:
            k = torch.cat([k, self.bias_k.expand(B, 1, D)], dim=1)
            v = torch.cat([v, self.bias_v.expand(B, 1, D)], dim=1)
            extra += 1
        q = q.unflatten(-1, (H, Dh)).transpose(1, 2)  # (B, H, Lq, Dh)
        k = k.unflatten(-1, (H, Dh)).transpose(1, 2)  # (B, H, Lk', Dh)
        v = v.unflatten(-1, (H, Dh)).transpose(1, 2)  # (B, H, Lk', Dh)
        if self.add_zero_attn:
            k = torch.cat([k, k.new_zeros(B, H, 1, Dh)], dim=2)
            v = torch.cat([v, v.new_zeros(B, H, 1, Dh)], dim=2)
            extra += 1
        if extra:  # the appended keys are never masked (as torch), is_causal included
            if is_causal:  # causal over the given Lk keys only
                causal = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril()
                allowed = causal if allowed is None else allowed & causal
                is_causal = False
            allowed = _append_keys(allowed, Lk, extra, True)  # True = may attend
            bias = _append_keys(bias, Lk, extra, False)
            attn_mask = _append_keys(attn_mask, Lk, extra, False)  # False = not banned

        scale = 1.0 / math.sqrt(Dh)
        offset = {} if cache is None else {"offset": len(cache)}  # position of the first query
        if encoding is not None:
            q, k, v = encoding.rotate(q, k, v, **offset)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, t + Lq, Dh): queries are the last Lq positions
            if is_causal and offset["offset"] > 0:
                is_causal = False  # the mask aligns the queries with the end of the keys
                if Lq > 1:
                    allowed = torch.ones(Lq, k.shape[-2], dtype=torch.bool, device=q.device).tril(
                        offset["offset"])  # fmt: skip
        if encoding is not None:
            term = encoding.logits_bias(pack(q), pack(k))  # (B|1, H|1, Lq, Lk) real
            if term is not None:
                bias = term if bias is None else bias + term
            scale = scale * encoding.logit_scale
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                ok = ~attn_mask
                allowed = ok if allowed is None else allowed & ok
            else:
                bias = attn_mask if bias is None else bias + attn_mask
        p = self.dropout if self.training else 0.0

        value_term = encoding is not None and encoding.has_value_term
        weights = None
        if need_weights or value_term:
            weights = CF.attention_weights(  # (B, H, Lq, Lk) real
                q, k, allowed, is_causal, self.score, bias, scale
            )
            if p > 0.0:
                weights = F.dropout(weights, p)
            out = weights @ pack(v)  # (B, H, Lq, 2Dh) packed real (Dh for real)
            if value_term:
                term = encoding.value_term(weights)
                if term is not None:
                    out = out + term
            out = unpack(out, v)  # (B, H, Lq, Dh)
        else:
            out = CF.scaled_dot_product_attention(  # (B, H, Lq, Dh)
                q, k, v, allowed, p, is_causal, scale=scale, score=self.score, bias=bias
            )
        out = self.out_proj(out.transpose(1, 2).reshape(B, Lq, D))  # (B, Lq, D)
        if not need_weights:
            weights = None
        elif average_attn_weights:
            weights = weights.mean(dim=1)  # (B, Lq, Lk)
        if not batched:
            return out[0], None if weights is None else weights[0]
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _check_cache(
        self, cache: object, self_attention: bool, key_padding_mask: object, attn_mask: object,
        encoding: PositionalEncoding | None,
    ) -> None:  # fmt: skip
        owner = type(self).__name__
        if not isinstance(cache, KVCache):
            raise TypeError(f"{owner}: cache must be a cplxnet.nn.KVCache, got "
                            f"{type(cache).__name__}")  # fmt: skip
        if not self_attention or key_padding_mask is not None or attn_mask is not None:
            raise ValueError(
                f"{owner}: a KVCache serves self-attention without key_padding_mask or "
                "attn_mask (incremental decoding); drop them or call without cache"
            )
        if self.bias_k is not None or self.add_zero_attn:
            raise ValueError(f"{owner}: a KVCache cannot be combined with add_bias_kv or "
                             "add_zero_attn")  # fmt: skip
        if encoding is not None and not encoding.supports_kv_cache:
            raise ValueError(
                f"{owner}: encoding {encoding.name or type(encoding).__name__!r} cannot be "
                "cached (its logits change as the window grows); recompute the window instead"
            )

    def extra_repr(self) -> str:
        s = (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
            f"bias={self.in_proj_bias is not None}"
        )
        if self.bias_k is not None:
            s += ", add_bias_kv=True"
        if self.add_zero_attn:
            s += ", add_zero_attn=True"
        if not self._qkv_same_embed_dim:
            s += f", kdim={self.kdim}, vdim={self.vdim}"
        if self.batch_first:
            s += ", batch_first=True"
        s += f", score={self.score!r}"
        if self.projection != "complex":
            s += f", projection={self.projection!r}"
        return s + f", dtype={self.dtype}"


def _append_keys(mask: torch.Tensor | None, lk: int, extra: int, fill: bool) -> torch.Tensor | None:
    """``mask`` ``(..., Lk)`` (last dim 1 or ``lk``) with ``extra`` key columns of ``fill``
    appended (0.0 for a float mask)."""
    if mask is None:
        return None
    fill = fill if mask.dtype == torch.bool else 0.0
    cols = mask.new_full((*mask.shape[:-1], extra), fill)
    return torch.cat([mask.expand(*mask.shape[:-1], lk), cols], dim=-1)


def _padding_bias(
    key_padding_mask: torch.Tensor | None, shape: tuple[int, int], like: torch.Tensor, owner: str
) -> torch.Tensor | None:
    """Check ``key_padding_mask`` ``(B, Lk)``; a float one becomes the logits bias
    ``(B, 1, 1, Lk)`` (as torch adds it), a bool one is returned as ``None`` (used as a mask)."""
    if key_padding_mask is None:
        return None
    if not isinstance(key_padding_mask, torch.Tensor) or not (
        key_padding_mask.dtype == torch.bool or key_padding_mask.is_floating_point()
    ):
        got = getattr(key_padding_mask, "dtype", type(key_padding_mask).__name__)
        raise TypeError(
            f"{owner}: key_padding_mask must be a bool (True = padding) or real floating tensor "
            f"(added to the logits), got {got}"
        )
    if tuple(key_padding_mask.shape) != shape:
        raise ValueError(
            f"{owner}: key_padding_mask must have shape {shape} (B, Lk), got "
            f"{tuple(key_padding_mask.shape)}"
        )
    if key_padding_mask.dtype == torch.bool:
        return None
    return key_padding_mask.to(real_dtype(like.dtype))[:, None, None, :]


def _attn_mask_4d(
    attn_mask: torch.Tensor, logits_shape: tuple[int, int, int, int], owner: str
) -> torch.Tensor:
    """``attn_mask`` as a tensor broadcasting to ``(B, H, Lq, Lk)``: torch's 3-D
    ``(B * H, Lq, Lk)`` is viewed as ``(B, H, Lq, Lk)``; other shapes must broadcast."""
    if not isinstance(attn_mask, torch.Tensor) or not (
        attn_mask.dtype == torch.bool or attn_mask.is_floating_point()
    ):
        raise TypeError(
            f"{owner}: attn_mask must be a bool (True = not allowed to attend, as "
            f"torch.nn.MultiheadAttention) or real floating tensor (added to the logits), "
            f"got {getattr(attn_mask, 'dtype', type(attn_mask).__name__)}"
        )
    b, h = logits_shape[:2]
    if attn_mask.dim() == 3 and attn_mask.shape[0] == b * h and b * h > 1:
        attn_mask = attn_mask.unflatten(0, (b, h))
    check_broadcast(attn_mask, logits_shape, owner, "attn_mask")
    return attn_mask
