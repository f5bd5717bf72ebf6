r"""xPos (Sun et al., "A Length-Extrapolatable Transformer", ACL 2023): rotary with a complex
frequency, as one complex multiplication."""

from __future__ import annotations

import math

import torch

from .._utils import real_dtype
from .registry import register_encoding
from .rotary import RotaryEncoding

__all__ = ["XPosEncoding", "xpos_zeta"]


def xpos_zeta(features: int, gamma: float = 0.4) -> torch.Tensor:
    r""":math:`\zeta_j = (j / n + \gamma) / (1 + \gamma)`, ``j < n`` complex features, float64.

    With ``n = D/2`` for a real head of width ``D`` this is the published
    :math:`(2j/D + 0.4)/1.4` (torchscale's ``(arange(0, D, 2) + 0.4 D) / (1.4 D)``).
    """
    return (torch.arange(features, dtype=torch.float64) / features + gamma) / (1 + gamma)


@register_encoding
class XPosEncoding(RotaryEncoding):
    r"""``xpos``: queries :math:`q_m w^m`, keys :math:`k_n (1/\bar w)^n`, per complex feature

    .. math::
        w_j = \zeta_j^{1/B} e^{i \theta_j}, \qquad
        \zeta_j = \frac{j/n + \gamma}{1 + \gamma}\ (= \tfrac{2j/D + 0.4}{1.4}), \qquad
        \theta_j = \text{base}^{-j/n},

    ``n`` complex features per head (``D = 2n`` reals), scale base ``B = 512``, ``gamma = 0.4``.

    Derivation. Rotary multiplies by :math:`e^{i m \theta_j}`, a "frequency" :math:`i\theta_j` on
    the unit circle. xPos gives it a real part, :math:`\log w_j = \ln(\zeta_j)/B + i \theta_j`.
    The key factor is :math:`(1/\bar w)^n = \zeta^{-n/B} e^{i n \theta}`, so

    .. math::
        \mathrm{Re}\big(q_m w^m\, \overline{k_n (1/\bar w)^n}\big)
        = \mathrm{Re}\big(q_m \bar k_n\, w^m\, w^{-n}\big)
        = \mathrm{Re}\big(\textstyle\sum_j q_{m,j} \bar k_{n,j}\, \zeta_j^{(m-n)/B}
          e^{i (m-n) \theta_j}\big):

    the score depends on ``m - n`` only, and for a key before the query (``n < m``) the factor
    :math:`\zeta_j^{(m-n)/B} < 1` decays with the distance, fastest in the high-frequency
    features. Rotary is the special case :math:`|w_j| = 1` (``scale_base=inf``). The real
    rotate-and-scale form of the paper is the same product read on interleaved pairs.

    The decay is meant for causal attention: for a key after the query (``n > m``) the factor
    :math:`\zeta^{(m-n)/B}` *grows* with the distance. In bidirectional attention use it knowing
    this (the paper evaluates xPos on causal language models).

    Centring, as the published implementation (torchscale ``XPOS``): the modulus uses the
    positions ``m - c`` with ``c = ceil(L/2)`` (``L`` the longer of the query and key lengths),
    i.e. queries get the extra constant :math:`\zeta^{-c/B}` and keys :math:`\zeta^{c/B}`. They
    cancel in every score and keep both factors near 1 for long inputs (no overflow of
    :math:`\zeta^{-n/B}`). The rotation uses the positions ``0 .. L-1``.

    Combined with a relative encoding that reads ``q`` or ``k`` alone (``xpos+shaw``, ``xl``,
    ``deberta``, ``cope``), the centring would reach that term (it does not cancel there, and
    ``c`` depends on the window length): :meth:`logits_operands` gives those terms the rotated
    queries and keys *without* the modulus (as ``rotary+shaw``), so a causal decoder's logits at
    ``t`` do not depend on the window length. The content score keeps the decay.

    Rotary scaling (``scaling``, ``factor``, ...) changes :math:`\theta_j` and multiplies q and k by
    the attention factor exactly as for :class:`RotaryEncoding`; the decay :math:`\zeta` is kept.
    Values are not rotated. Real heads are complex numbers through the layout, as rotary.

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        base: rotation frequency base (10000).
        scale_base: ``B``, the decay length scale (512; ``inf`` disables the decay: rotary).
        gamma: the offset in :math:`\zeta_j` (0.4).
        layout, scaling, factor, beta_fast, beta_slow, original_max_len, truncate, mscale,
            mscale_all_dim, attention_factor, max_len: as for :class:`RotaryEncoding`.
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = XPosEncoding(d_model=8, num_heads=2)
        >>> q = torch.randn(1, 2, 5, 4, dtype=torch.cfloat)  # complex heads (B, H, L, Dh)
        >>> q2, k2, v2 = enc.rotate(q, q, q)  # the rotary turn times a per-position scale
        >>> q2.shape, k2.shape
        (torch.Size([1, 2, 5, 4]), torch.Size([1, 2, 5, 4]))
    """

    name = "xpos"
    infinite_options = frozenset({"scale_base"})
    #: the scale is centred on the window, so a grown window changes every logit
    supports_kv_cache = False
    acts_on = frozenset({"qk"})

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        base: float = 10000.0,
        scale_base: float = 512.0,
        gamma: float = 0.4,
        layout: str = "interleaved",
        scaling: str | None = None,
        factor: float = 1.0,
        beta_fast: float | None = None,
        beta_slow: float | None = None,
        original_max_len: int | None = None,
        truncate: bool | None = None,
        mscale: float | None = None,
        mscale_all_dim: float | None = None,
        attention_factor: float | None = None,
        max_len: int = 512,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        if not (isinstance(scale_base, (int, float)) and scale_base > 0):
            raise ValueError(f"{owner}: scale_base must be a positive number, got {scale_base!r}")
        if not (isinstance(gamma, (int, float)) and math.isfinite(gamma) and gamma > 0):
            raise ValueError(f"{owner}: gamma must be a finite positive number, got {gamma!r}")
        super().__init__(
            d_model,
            num_heads,
            base=base,
            layout=layout,
            scaling=scaling,
            factor=factor,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            original_max_len=original_max_len,
            truncate=truncate,
            mscale=mscale,
            mscale_all_dim=mscale_all_dim,
            attention_factor=attention_factor,
            max_len=max_len,
            device=device,
            dtype=dtype,
        )
        self.scale_base, self.gamma = float(scale_base), float(gamma)
        #: (features,) ln(zeta_j) / B, the real part of the complex frequency log w_j, in the
        #: model's real dtype (non-persistent buffer: follows ``.to(device)``).
        self.register_table("decay", "_build_decay", self.features, device)

    def _build_decay(self, n: int, device) -> torch.Tensor:
        decay = xpos_zeta(self.features, self.gamma).log() / self.scale_base
        return decay.to(device=device, dtype=real_dtype(self.dtype))

    def modulus(self, length: int, centre: int) -> torch.Tensor:
        r"""``(length, features)`` real :math:`\zeta_j^{(m - c)/B}`, ``m < length``, computed on
        the buffer's device in the model's real dtype."""
        m = torch.arange(length, device=self.decay.device, dtype=self.decay.dtype) - centre
        return torch.exp(m[:, None] * self.decay)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self._check(q, "q")
        self._check(k, "k")
        lq, lk = q.shape[-2], k.shape[-2]
        c = (max(lq, lk) + 1) // 2
        mod = self.modulus(max(lq, lk), c)
        a = self.attention_factor
        return self.rotate_one(q, mod[:lq] * a), self.rotate_one(k, a / mod[:lk]), v

    def _packed_modulus(self, length: int, centre: int) -> torch.Tensor:
        """``(length, P)`` modulus of each packed real entry: each complex feature's twice
        (interleaved ``re, im``), or the feature row twice over (real heads, ``half`` layout)."""
        mod = self.modulus(length, centre)
        return torch.cat((mod, mod), -1) if self._half else mod.repeat_interleave(2, -1)

    def logits_operands(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The packed rotated ``q, k`` without the window-centred modulus (see the class
        docstring): ``q / zeta^{(m-c)/B}``, ``k * zeta^{(n-c)/B}``."""
        lq, lk = q.shape[-2], k.shape[-2]
        mod = self._packed_modulus(max(lq, lk), (max(lq, lk) + 1) // 2).to(q.dtype)
        return q / mod[:lq], k * mod[:lk]

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, base={self.base:g}, "
            f"scale_base={self.scale_base:g}, gamma={self.gamma:g}, layout={self.layout!r}"
            f"{self._scaling_repr()}, dtype={self.dtype}"
        )
