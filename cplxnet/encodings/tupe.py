r"""TUPE, untied positional encoding (Ke, He, Liu, "Rethinking Positional Encoding in Language
Pre-training", ICLR 2021)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import init as cinit
from .._utils import factory_kwargs, pack
from ._common import check_heads, head_width, normal_
from .base import PositionalEncoding
from .registry import register_encoding
from .t5 import T5Encoding

__all__ = ["TupeEncoding"]


@register_encoding
class TupeEncoding(PositionalEncoding):
    r"""``tupe``: the word and position correlations computed apart ("untied"),

    .. math::
        \alpha_{ij} = \frac{(x_i W^Q)(x_j W^K)^H}{\sqrt{2 D_h}}
        + \frac{(p_i U^Q)(p_j U^K)^H}{\sqrt{2 D_h}}
        \ \big[+\ b_{\mathrm{bucket}(j-i)}\big]

    (TUPE-A, Eq. 6 of the paper; with ``relative=True`` TUPE-R, Eq. 7). The first term is the
    kernel's content score: ``logit_scale = 1/sqrt(2)`` turns its :math:`1/\sqrt{D_h}` into
    :math:`1/\sqrt{2 D_h}`. The second depends on the positions only: one learned absolute table
    ``p`` (``max_len x d_model``, in the model dtype, never added to the word embeddings) and
    per-head projections ``U^Q, U^K`` (``d_model -> d_model``, head ``h`` the rows ``h Dh ..
    (h+1) Dh``), all shared by every layer (the paper's choice: "shared across layers"). In a
    complex model ``p`` and ``U`` are complex and the term is the real part
    :math:`\mathrm{Re}((p_i U^Q)(p_j U^K)^H)`, the same score the kernel takes of ``q, k``
    (computed packed, :func:`cplxnet._utils.pack`); a real model gives the paper's formula. The
    optional bias ``b`` is T5's bucketed relative bias (:class:`~cplxnet.encodings.T5Encoding`,
    its own ``(num_buckets, H)`` table, added unscaled; the paper's TUPE-R uses T5's bias).

    The positional term is recomputed at each attention call: it costs ``H L^2 Dh`` plus two
    ``L x d_model x d_model`` products, ``1/B`` of the content score, and a cache shared by the
    layers of one forward would have to know where a forward starts (a graph kept from an earlier
    forward cannot be backpropagated twice).

    Left out of the official code (``guolinke/TUPE``), so this is the paper's Eq. 6/7 and not
    that code: the untying of the ``[CLS]`` position (the paper's Eq. 8 replaces the ``[CLS]``
    row and column of the positional term by learned scalars; the zoo pools by mean and has no
    ``[CLS]``), the LayerNorm the code applies to ``p`` before the projections, and the biases
    of the code's ``U^Q``, ``U^K`` linear layers (here :math:`p U^Q`, :math:`p U^K` have no
    bias).

    Memory: ``(H, Lq, Dh)`` and ``(H, Lk, Dh)`` projected positions and the ``(1, H, Lq, Lk)``
    term; never ``(L, L, Dh)``. Lengths up to ``max_len`` (the rows of ``p``).

    Args:
        d_model: model width; head width ``Dh = d_model / num_heads``.
        num_heads: number of heads.
        max_len: rows of the absolute table ``p`` (longest input).
        relative: add T5's bucketed relative bias (TUPE-R).
        num_buckets, max_distance, bidirectional: options of that bias
            (:class:`~cplxnet.encodings.T5Encoding`; TUPE's code uses 32 and 128); by default
            ``bidirectional = not causal``.
        causal: the model's attention is causal (passed by language models through the
            registry's context): the relative bias uses T5's unidirectional buckets.
        std: initial standard deviation of ``p`` (total variance ``std**2`` when complex) and of
            the relative table; ``U^Q, U^K`` start Glorot-uniform (complex: total variance).
        device, dtype: model dtype (complex by default; real for a real twin); ``p`` and ``U``
            have that dtype.

    Examples::

        >>> enc = TupeEncoding(d_model=8, num_heads=2, max_len=16)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "tupe"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True
    logit_scale = 1.0 / math.sqrt(2.0)

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        max_len: int = 512,
        relative: bool = False,
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
        self.head_dim = head_width(d_model, num_heads, owner)
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
            raise ValueError(f"{owner}: max_len must be a positive int, got {max_len!r}")
        self.d_model, self.num_heads, self.max_len, self.std = d_model, num_heads, max_len, std
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        self.packed_width = 2 * self.head_dim if self.complex_model else self.head_dim
        self.position_embeddings = nn.Parameter(torch.empty(max_len, d_model, **fk))
        self.pos_query_proj = nn.Parameter(torch.empty(d_model, d_model, **fk))
        self.pos_key_proj = nn.Parameter(torch.empty(d_model, d_model, **fk))
        self.relative: T5Encoding | None = None
        if relative:
            self.relative = T5Encoding(
                num_heads, num_buckets, max_distance, bidirectional, std, causal=causal, **fk
            )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        normal_(self.position_embeddings, self.std)
        for w in (self.pos_query_proj, self.pos_key_proj):
            if w.is_complex():
                cinit.xavier_uniform_(w)
            else:
                nn.init.xavier_uniform_(w)
        if self.relative is not None:
            self.relative.reset_parameters()

    def _project(self, weight: torch.Tensor, length: int) -> torch.Tensor:
        """``p_{0..L-1} U`` split into heads and packed: ``(H, L, P)`` real."""
        pu = self.position_embeddings[:length] @ weight.T  # (L, d_model)
        return pack(pu.view(length, self.num_heads, self.head_dim).transpose(0, 1))

    def positional_logits(self, lq: int, lk: int) -> torch.Tensor:
        """The untied term :math:`\\mathrm{Re}((p_i U^Q)(p_j U^K)^H) / \\sqrt{2 D_h}`,
        ``(H, Lq, Lk)`` real (without the relative bias); ``Lq < Lk`` queries are the last
        ``Lq`` positions of the keys (a decoder's new tokens after its cached keys)."""
        longest = max(lq, lk)
        if longest > self.max_len:
            raise ValueError(
                f"{type(self).__name__}: input length {longest} exceeds max_len={self.max_len}, "
                f"the rows of the absolute position table; build the encoding with max_len >= "
                f"{longest}"
            )
        pq = self._project(self.pos_query_proj, longest)[:, longest - lq :]  # (H, Lq, P)
        pk = self._project(self.pos_key_proj, lk)  # (H, Lk, P)
        return (pq @ pk.transpose(-1, -2)) * self.content_scale(self.packed_width)

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_heads(q, k, self.num_heads, self.packed_width, type(self).__name__)
        bias = self.positional_logits(q.shape[-2], k.shape[-2]).to(q.dtype).unsqueeze(0)
        if self.relative is not None:
            bias = bias + self.relative.logits_bias(q, k)
        return bias  # (1, H, Lq, Lk)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, max_len={self.max_len}, "
            f"relative={self.relative is not None}, dtype={self.dtype}"
        )
