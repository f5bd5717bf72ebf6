r"""Scaled dot-product attention for complex (and real) queries, keys and values.

Two scores are provided (shapes: ``q`` ``(B, H, Lq, Dh)``, ``k`` ``(B, H, Lk, Dh)``, ``v``
``(B, H, Lk, Dv)``; ``B, H`` may be any matching leading dimensions):

``score="real"``
    :math:`\mathrm{softmax}(\mathrm{Re}(q k^H)\, s + \text{bias} + \text{mask})\, v`, the
    real-part score of the complex Transformer (Yang et al., "Complex Transformer", ICASSP 2020;
    Eilers & Jiang, "Building Blocks for a Complex-Valued Transformer Architecture", ICASSP 2023).
    Since :math:`\mathrm{Re}(q k^H) = q_r k_r^T + q_i k_i^T` is the plain real dot product of the
    packed vectors :func:`cplxnet._utils.pack` (``[re0, im0, re1, im1, ...]``), the whole
    attention runs as ONE call of torch's fused real
    :func:`torch.nn.functional.scaled_dot_product_attention` on zero-copy packed views of ``q``,
    ``k``, ``v`` (head width ``2 Dh``), with ``scale`` passed explicitly and the output viewed
    back as complex. The weights are real, so :math:`\sum_j a_{ij} v_j` acts on the real and
    imaginary parts of ``v`` alike, which is what the packed real product computes.

``score="modulus"``
    :math:`\mathrm{softmax}(|q k^T|\, s + \text{bias} + \text{mask})\, v`, the score of the
    Transformer in the code of Wang et al., "Encoding word order in complex embeddings" (ICLR
    2020), which forms the complex product :math:`q k^T` **without conjugating** ``k`` (real part
    :math:`q_r k_r^T - q_i k_i^T`, imaginary part :math:`q_r k_i^T + q_i k_r^T`) and takes its
    modulus. Computed by explicit matmuls (no fused kernel exists for it).

The default scale is :math:`s = 1/\sqrt{D_h}` with :math:`D_h` the *complex* head width (the
packed real width is :math:`2 D_h`). Real ``q, k, v`` give plain real attention through the same
code, so a real twin of a complex model shares it.

Masks follow :func:`torch.nn.functional.scaled_dot_product_attention`: a bool ``attn_mask`` marks
with True the pairs that may attend, a float ``attn_mask`` is added to the logits; both broadcast
to ``(B, H, Lq, Lk)``. ``bias`` (real) is added to the logits after scaling. ``is_causal`` lets
query ``i`` attend to keys ``j <= i`` (top-left aligned, as torch) and combines with ``attn_mask``.
A query whose keys are all masked gets output **zero** (and zero weights, zero gradients), on every
torch version and backend.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._utils import check_choice, is_transformed, pack, real_dtype, unpack, without_autocast

__all__ = [
    "SCORES",
    "scaled_dot_product_attention",
    "attention_weights",
    "attention_reference",
]

SCORES = ("real", "modulus")
_OWNER = "scaled_dot_product_attention"


# --------------------------------------------------------------------------------------------
# validation and mask assembly
# --------------------------------------------------------------------------------------------


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, owner: str) -> None:
    # Fast path (the common case costs a few attribute reads); diagnose only on failure.
    vv = k if v is None else v
    if (
        isinstance(q, torch.Tensor)
        and isinstance(k, torch.Tensor)
        and isinstance(vv, torch.Tensor)
        and q.dtype == k.dtype == vv.dtype
        and (q.is_complex() or q.is_floating_point())
        and q.dim() >= 2
        and q.shape[-1] == k.shape[-1]
        and q.shape[:-2] == k.shape[:-2] == vv.shape[:-2]
        and vv.shape[-2] == k.shape[-2]
    ):
        return
    _diagnose_qkv(q, k, v, owner)


def _diagnose_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, owner: str) -> None:
    named = [("q", q), ("k", k)] + ([("v", v)] if v is not None else [])
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if not (t.is_complex() or t.is_floating_point()):
            raise TypeError(f"{owner}: {name} must be a complex or floating tensor, got {t.dtype}")
        if t.dim() < 2:
            raise ValueError(f"{owner}: {name} must have shape (B, H, L, Dh), got {tuple(t.shape)}")
    desc = ", ".join(f"{n}={t.dtype}" for n, t in named)
    if len({t.is_complex() for _, t in named}) > 1:
        raise TypeError(
            f"{owner}: q, k and v must all be complex or all be real, got {desc}. Convert the "
            "real ones with x.to(torch.cfloat) (or keep the whole model real)."
        )
    if len({t.dtype for _, t in named}) > 1:
        raise TypeError(f"{owner}: q, k and v must have the same dtype, got {desc}")
    shapes = ", ".join(f"{n}={tuple(t.shape)}" for n, t in named)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{owner}: q and k must have the same head width (last dim), got {shapes}")
    if len({tuple(t.shape[:-2]) for _, t in named}) > 1:
        raise ValueError(
            f"{owner}: q, k and v must have the same leading (batch, head) dims, got {shapes}"
        )
    raise ValueError(f"{owner}: k and v must have the same length (dim -2), got {shapes}")


def check_broadcast(t: torch.Tensor, target: tuple[int, ...], owner: str, name: str) -> None:
    shape = t.shape
    # plain-Python test: torch.broadcast_shapes costs tens of microseconds per call
    if len(shape) > len(target) or any(
        s != 1 and s != n for s, n in zip(reversed(shape), reversed(target))
    ):
        raise ValueError(
            f"{owner}: {name} of shape {tuple(shape)} does not broadcast to the logits shape "
            f"{target} (B, H, Lq, Lk)"
        )


def _assemble_mask(
    q: torch.Tensor,
    k: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    bias: torch.Tensor | None,
    owner: str,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Combine ``attn_mask``, ``is_causal`` and ``bias`` into one logits mask.

    Returns ``(mask, valid)``: ``mask`` is ``None``, a bool mask (True = attend) or a float mask
    (added to the scaled logits) in the real dtype of ``q``; ``valid`` is ``None`` when every
    query has at least one key, else a bool ``(..., Lq, 1)`` tensor marking the queries that do
    (the others have had their mask row opened so the softmax stays finite; the caller zeroes
    their outputs).
    """
    rdtype = real_dtype(q.dtype)
    target = tuple(q.shape[:-1]) + (k.shape[-2],)
    Lq, Lk = q.shape[-2], k.shape[-2]
    bool_mask: torch.Tensor | None = None
    float_mask: torch.Tensor | None = None
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(
                f"{owner}: attn_mask must be a torch.Tensor, got {type(attn_mask).__name__}"
            )
        if attn_mask.dtype == torch.bool:
            bool_mask = attn_mask
        elif attn_mask.is_floating_point():
            float_mask = attn_mask.to(rdtype)
        else:
            raise TypeError(
                f"{owner}: attn_mask must be a bool tensor (True = may attend) or a real floating "
                f"tensor added to the logits, got {attn_mask.dtype}"
            )
        check_broadcast(attn_mask, target, owner, "attn_mask")
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
            got = bias.dtype if isinstance(bias, torch.Tensor) else type(bias).__name__
            raise TypeError(f"{owner}: bias must be a real floating tensor, got {got}")
        check_broadcast(bias, target, owner, "bias")
        float_mask = bias.to(rdtype) if float_mask is None else float_mask + bias.to(rdtype)
    if is_causal:
        causal = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril()
        bool_mask = causal if bool_mask is None else bool_mask & causal
    if float_mask is None and bool_mask is None:
        return None, None
    if float_mask is None:
        mask: torch.Tensor = bool_mask
        valid = bool_mask.any(-1, keepdim=True)
    else:
        mask = float_mask
        if bool_mask is not None:
            mask = mask.masked_fill(~bool_mask, -math.inf)
        valid = (mask != -math.inf).any(-1, keepdim=True)
    # Open the rows without any key so the softmax is finite; outputs there are zeroed later
    # (always: skipping this when every row has a key would read ``valid`` on the host).
    mask = mask | ~valid if mask.dtype == torch.bool else mask.masked_fill(~valid, 0.0)
    return mask, valid


def _default_scale(q: torch.Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def _masked_softmax(
    logits: torch.Tensor, mask: torch.Tensor | None, valid: torch.Tensor | None
) -> torch.Tensor:
    if mask is not None:
        logits = logits.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else logits + mask
    weights = torch.softmax(logits, dim=-1)
    if valid is not None:
        weights = weights * valid
    return weights


# --------------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------------


@without_autocast
def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    score: str = "real",
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    r"""Attention weights :math:`a = \mathrm{softmax}(\text{score}(q, k)\, s + \text{bias} +
    \text{mask})`, real, shape ``(B, H, Lq, Lk)``.

    Used where the weights themselves are needed, e.g. by encodings with a value term (Shaw et
    al. 2018): ``out = a @ pack(v) + encoding.value_term(a)``. Rows of queries without any key are
    zero. Arguments as :func:`scaled_dot_product_attention` (no dropout: apply it to the result).
    """
    _check_qkv(q, k, None, "attention_weights")
    check_choice(score, SCORES, "attention_weights", "score")
    mask, valid = _assemble_mask(q, k, attn_mask, is_causal, bias, "attention_weights")
    s = _default_scale(q, scale)
    if score == "real":
        logits = pack(q) @ pack(k).transpose(-2, -1)  # (B, H, Lq, Lk) = Re(q k^H)
    else:
        logits = (q @ k.transpose(-2, -1)).abs()  # (B, H, Lq, Lk) = |q k^T|
    return _masked_softmax(logits * s, mask, valid)


@without_autocast
def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    score: str = "real",
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Complex (or real) scaled dot-product attention; see the module docstring for the math.
    Arguments as ``torch.nn.functional.scaled_dot_product_attention``'s (``scale`` and
    ``enable_gqa`` keyword-only there too), then cplxnet's ``score`` and ``bias``.

    Args:
        q: ``(B, H, Lq, Dh)``, complex or real.
        k: ``(B, H, Lk, Dh)``, same dtype as ``q``.
        v: ``(B, H, Lk, Dv)``, same dtype as ``q``.
        attn_mask: bool (True = may attend) or real float (added to the logits), broadcastable to
            ``(B, H, Lq, Lk)``.
        dropout_p: dropout probability on the attention weights (pass 0 in eval mode).
        is_causal: query ``i`` attends only to keys ``j <= i``; combined with ``attn_mask``.
        scale: logits scale; default :math:`1/\sqrt{D_h}` (complex head width).
        enable_gqa: grouped-query attention as torch's: ``k`` and ``v`` may have ``Hkv`` heads
            with ``H % Hkv == 0``, key/value head ``j`` serving query heads ``j*H/Hkv`` to
            ``(j+1)*H/Hkv - 1``.
        score: (keyword-only) ``"real"`` (:math:`\mathrm{Re}(q k^H)`, fused) or ``"modulus"``
            (:math:`|q k^T|`).
        bias: (keyword-only) real tensor broadcastable to ``(B, H, Lq, Lk)`` added to the logits
            after scaling.

    Returns:
        ``(B, H, Lq, Dv)`` in the dtype of ``v``; zero for queries whose keys are all masked.
    """
    if enable_gqa:
        k, v = _expand_kv_heads(q, k, v)
    _check_qkv(q, k, v, _OWNER)
    check_choice(score, SCORES, _OWNER, "score")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{_OWNER}: dropout_p must be in [0, 1], got {dropout_p}")
    s = _default_scale(q, scale)
    if score == "modulus":
        weights = attention_weights(q, k, attn_mask, is_causal, score, bias, s)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p)
        return unpack(weights @ pack(v), v)  # (B, H, Lq, Dv)
    if attn_mask is None and bias is None:
        # Fast path: nothing to combine, let torch apply the causal mask itself.
        out = _sdpa(pack(q), pack(k), pack(v), dropout_p=dropout_p, is_causal=is_causal, scale=s)
        return unpack(out, v)
    mask, valid = _assemble_mask(q, k, attn_mask, is_causal, bias, _OWNER)
    out = _sdpa(pack(q), pack(k), pack(v), attn_mask=mask, dropout_p=dropout_p, scale=s)
    if valid is not None:
        out = out * valid
    return unpack(out, v)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> torch.Tensor:
    """Torch's real ``scaled_dot_product_attention``; inside ``torch.func`` transforms and
    forward-mode AD its math backend, since the fused CPU kernels have no forward-mode rule."""
    if is_transformed():
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
    return F.scaled_dot_product_attention(q, k, v, **kwargs)


def _expand_kv_heads(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped-query attention: repeat each key/value head over its group of query heads."""
    if q.dim() < 3 or k.dim() < 3 or k.shape[-3] != v.shape[-3]:
        raise ValueError(
            f"{_OWNER}: enable_gqa needs (..., H, L, D) inputs with as many key as value heads, "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    h, hkv = q.shape[-3], k.shape[-3]
    if h % hkv:
        raise ValueError(
            f"{_OWNER}: enable_gqa needs the query heads ({h}) to be a multiple of the key/value "
            f"heads ({hkv})"
        )
    if h == hkv:
        return k, v
    return k.repeat_interleave(h // hkv, dim=-3), v.repeat_interleave(h // hkv, dim=-3)


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    score: str = "real",
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Plain reference of :func:`scaled_dot_product_attention`: returns ``(output, weights)``.

    Computes the scores with explicit complex matmuls (``(q @ k^H).real`` or ``|q @ k^T|``, no
    packing), builds the additive mask explicitly, applies ``softmax`` and multiplies the
    (dropped-out) weights, cast to ``v``'s dtype, with ``v``. Slow; for tests and for reading.
    """
    _check_qkv(q, k, v, "attention_reference")
    check_choice(score, SCORES, "attention_reference", "score")
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if score == "real":
        logits = torch.real(q @ k.conj().transpose(-2, -1)) * s
    else:
        logits = (q @ k.transpose(-2, -1)).abs() * s
    Lq, Lk = logits.shape[-2:]
    allowed = torch.ones_like(logits, dtype=torch.bool)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            allowed = allowed & attn_mask
        else:
            logits = logits + attn_mask.to(logits.dtype)
    if bias is not None:
        logits = logits + bias.to(logits.dtype)
    if is_causal:
        allowed = allowed & torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril()
    allowed = allowed & (logits != -math.inf)
    has_key = allowed.any(-1, keepdim=True)
    logits = torch.where(allowed, logits, torch.full_like(logits, -math.inf))
    logits = torch.where(has_key, logits, torch.zeros_like(logits))
    weights = torch.softmax(logits, dim=-1) * has_key
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0.0 else weights
    return dropped.to(v.dtype) @ v, weights
