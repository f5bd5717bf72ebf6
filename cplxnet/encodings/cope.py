r"""CoPE, contextual position encoding (Golovneva, Wang, Weston, Sukhbaatar, "Contextual Position
Encoding: Learning to Count What's Important", 2024)."""

from __future__ import annotations

import torch
from torch import nn

from .._utils import check_sizes, factory_kwargs, real_dtype
from ._common import check_heads, head_width, query_positions
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["CopeEncoding"]


@register_encoding
class CopeEncoding(PositionalEncoding):
    r"""``cope``: positions counted by gates on the context, interpolated embeddings of them
    added to the logits.

    .. math::
        g_{ij} = \sigma\Big(\frac{q_i \cdot k_j}{\sqrt{D_h}}\Big),\qquad
        p_{ij} = \sum_{t=j}^{i} g_{it},\qquad
        A_{ij} = \frac{q_i \cdot k_j}{\sqrt{D_h}} + q_i \cdot e[p_{ij}],\qquad
        e[p] = (\lceil p \rceil - p)\, e_{\lfloor p \rfloor} + (p - \lfloor p \rfloor)\,
        e_{\lceil p \rceil}

    (Eq. 3-5 of the paper and its Appendix B code), ``j <= i`` (causal), :math:`p_{ij}` clamped
    to ``npos_max - 1``, ``npos_max`` learned vectors :math:`e_0, ...` of the packed head width
    (initialised to zero, as the paper's code). As that code, the term
    :math:`q_i \cdot e[p_{ij}]` is computed as ``q @ E^T`` at the integer positions and
    interpolated, and it is added unscaled to the scaled logits; the gates read the scaled
    content score (the other logits terms of a combination do not enter them).

    Complex queries: :math:`q \cdot k` is :math:`\mathrm{Re}(q\, k^H)`, the score the kernel
    takes (cplxnet's packed real dot product, :func:`cplxnet._utils.pack`), and :math:`e_p` are
    packed complex vectors, so :math:`q \cdot e_p = \mathrm{Re}(q\, e_p^H)`.

    One table ``E`` shared by every head and layer (the paper learns one per layer, shared by
    the heads). Causal (``causal=True``, a language model; the paper's definition): keys after
    the query have no gate. Bidirectional (default, cplxnet's extension: the paper defines CoPE
    for decoders only): :math:`p_{ij} = \sum_{t=i}^{j} g_{it}` for keys after the query, the
    same count of the tokens between the two. With ``Lq != Lk`` the queries are the last ``Lq``
    keys' positions.

    Memory: CoPE necessarily builds the ``(B, H, Lq, Lk)`` gates and positions (a per-head
    quantity of the content, like the attention weights) and the ``(B, H, Lq, npos_max)``
    products ``q @ E^T``; never an ``(Lq, Lk, D_h)`` tensor.

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        npos_max: number of position embeddings (the largest counted position + 1).
        causal: the model's attention is causal (passed by language models).
        device, dtype: model dtype (complex by default; real for a real twin); ``E`` is real of
            the packed head width.

    Examples::

        >>> from cplxnet.encodings import create_encoding
        >>> enc = create_encoding("cope", d_model=8, num_heads=2, causal=True)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "cope"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True  # queries sit at the end of the keys (relative_index)

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        npos_max: int = 64,
        causal: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, npos_max=npos_max)
        self.d_model, self.num_heads, self.npos_max = d_model, num_heads, npos_max
        self.causal = bool(causal)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        dh = head_width(d_model, num_heads, owner)
        self.packed_width = 2 * dh if self.complex_model else dh
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        self.pos_emb = nn.Parameter(torch.empty(npos_max, self.packed_width, **rk))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.pos_emb.zero_()

    def positions(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``(B, H, Lq, Lk)`` contextual positions :math:`p_{ij}` (before clamping)."""
        Lq, Lk = q.shape[-2], k.shape[-2]
        gates = torch.sigmoid((q @ k.transpose(-1, -2)) * self.content_scale(q.shape[-1]))
        i = query_positions(Lq, Lk, q.device)[:, None]
        j = torch.arange(Lk, device=q.device)[None, :]
        upto = j <= i  # (Lq, Lk): keys up to the query
        left = gates.masked_fill(~upto, 0).flip(-1).cumsum(-1).flip(-1)  # sum_{t=j..i}
        if self.causal:
            return left
        right = gates.masked_fill(j < i, 0).cumsum(-1)  # sum_{t=i..j}
        return torch.where(upto, left, right)

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_heads(q, k, self.num_heads, self.packed_width, type(self).__name__)
        pos = self.positions(q, k).clamp(max=self.npos_max - 1)
        at_int = q @ self.pos_emb.to(q.dtype).T  # (B, H, Lq, npos_max): q . e_p
        lo = pos.floor()
        w = pos - lo
        lo = lo.long()
        hi = pos.ceil().long()
        return at_int.gather(-1, hi) * w + at_int.gather(-1, lo) * (1 - w)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, npos_max={self.npos_max}, "
            f"causal={self.causal}, dtype={self.dtype}"
        )
