r"""ALiBi, attention with linear biases (Press et al., "Train Short, Test Long: Attention with
Linear Biases Enables Input Length Extrapolation", ICLR 2022)."""

from __future__ import annotations

import torch

from .._utils import factory_kwargs, real_dtype
from ._common import relative_index
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["AlibiEncoding", "alibi_slopes"]


def alibi_slopes(num_heads: int) -> list[float]:
    r"""The paper's head slopes :math:`m_1 .. m_H`.

    For ``H`` a power of two, :math:`m_h = 2^{-8h/H}`, ``h = 1..H`` (a geometric sequence starting
    at and with ratio :math:`2^{-8/H}`). Otherwise, with ``P`` the largest power of two below
    ``H``: the ``P`` slopes of ``P`` heads, then every other slope of ``2P`` heads
    (:math:`2^{-8h/(2P)}` for ``h = 1, 3, 5, ...``), ``H - P`` of them (the reference
    ``get_slopes``).
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"alibi_slopes: num_heads must be a positive int, got {num_heads!r}")
    p = 1 << (num_heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * h / p) for h in range(1, p + 1)]
    slopes += [2.0 ** (-8.0 * h / (2 * p)) for h in range(1, 2 * (num_heads - p), 2)]
    return slopes


@register_encoding
class AlibiEncoding(PositionalEncoding):
    r"""``alibi``: a fixed linear penalty of the distance, per head, added to the logits.

    .. math::
        A_{ij} = \frac{\mathrm{Re}(q_i k_j^H)}{\sqrt{D_h}} - m_h\, |i - j|
        \ \text{(bidirectional)}, \qquad
        A_{ij} = \frac{\mathrm{Re}(q_i k_j^H)}{\sqrt{D_h}} - m_h\, (i - j) \ \text{(causal)}

    with the slopes :func:`alibi_slopes`. Causal (``causal=True``, passed by language models
    through the registry's context): the paper's bias, where the model's causal mask removes the
    keys ``j > i`` (for ``j <= i`` both forms agree; ALiBi's reference code adds the equivalent
    :math:`m_h j`, which differs by :math:`m_h i`, a constant per row that the softmax ignores).
    Bidirectional (default): the symmetric :math:`-m_h |i - j|`, the usual encoder form.

    Queries and keys of different lengths (``Lq != Lk``): the queries are the *last* ``Lq``
    positions, ``i = Lk - Lq .. Lk - 1`` (x-transformers' convention, what a decoder with a key
    cache needs: one new query after ``Lk - 1`` cached keys sits at position ``Lk - 1``). Press
    et al.'s code only ever sees ``Lq == Lk``, where both conventions agree.

    Added after the content scale, as the reference implementation (fairseq adds it to the
    scaled scores). No parameters; the bias does not depend on ``q, k`` values, so complex and
    real attention are identical. Any length; memory: one ``(1, H, Lq, Lk)`` bias, never more.

    Args:
        num_heads: number of heads ``H``.
        causal: the model's attention is causal (``-m_h (i - j)``); default bidirectional.
        device, dtype: model dtype; the slopes are real of its real dtype.

    Examples::

        >>> enc = AlibiEncoding(num_heads=2, causal=True)
        >>> q = torch.randn(1, 2, 5, 8)  # packed real (B, H, L, 2 Dh)
        >>> enc.logits_bias(q, q).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "alibi"
    acts_on = frozenset({"logits"})
    supports_kv_cache = True

    def __init__(
        self,
        num_heads: int,
        causal: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"{owner}: num_heads must be a positive int, got {num_heads!r}")
        self.num_heads, self.causal = num_heads, bool(causal)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        self.register_table("slopes", "_build_slopes", num_heads, fk["device"])

    def _build_slopes(self, n: int, device) -> torch.Tensor:  # (num_heads,) real
        slopes = torch.tensor(alibi_slopes(self.num_heads), dtype=torch.float64)
        return slopes.to(device=device, dtype=real_dtype(self.dtype))

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        if (
            q.dim() != 4
            or k.dim() != 4
            or q.shape[1] != self.num_heads
            or (k.shape[1] != self.num_heads)
        ):
            raise ValueError(
                f"{type(self).__name__}: expected q, k of shape (B, {self.num_heads}, L, P), got "
                f"{tuple(q.shape)}, {tuple(k.shape)}"
            )
        rel = relative_index(q.shape[-2], k.shape[-2], q.device, at_end=True)  # i - j
        dist = rel if self.causal else rel.abs()
        slopes = self.slopes.to(device=q.device, dtype=q.dtype)
        return (-slopes[:, None, None] * dist.to(q.dtype)).unsqueeze(0)  # (1, H, Lq, Lk)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, causal={self.causal}, dtype={self.dtype}"
