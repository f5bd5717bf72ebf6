r"""Rotary position embedding (Su et al., "RoFormer: Enhanced Transformer with Rotary Position
Embedding", 2021; Neurocomputing 2024) as one complex multiplication."""

from __future__ import annotations

import torch

from .._utils import check_choice, complex_dtype, factory_kwargs, pack, real_dtype
from ._common import (
    Positions,
    cached_rows,
    check_base,
    check_offset,
    complex_features,
    complex_sinusoid,
    head_width,
    rows_at,
    sinusoid_angles,
    table_positions,
    view_complex,
)
from .base import PositionalEncoding
from .registry import register_encoding
from .rope_scaling import rope_frequencies

__all__ = ["RotaryEncoding"]

LAYOUTS = ("interleaved", "half")


@register_encoding
class RotaryEncoding(PositionalEncoding):
    r"""``rotary``: :math:`q_m \mapsto q_m \odot e^{i m \theta}`, :math:`k_n \mapsto k_n \odot
    e^{i n \theta}` on every head, so that

    .. math::
        \mathrm{Re}\big((q_m e^{i m\theta}) (k_n e^{i n\theta})^H\big)
        = \mathrm{Re}\big(\textstyle\sum_j q_{m,j}\, \bar k_{n,j}\, e^{i (m-n)\theta_j}\big)

    depends on the positions only through ``m - n`` (RoPE, Su et al. 2021). Frequencies
    :math:`\theta_j = \text{base}^{-j/D_h}`, ``j < Dh``, for complex heads of width ``Dh``
    (= :math:`\text{base}^{-2j/d}` for real heads of width ``d = 2 Dh``).

    One complex multiplication by a precomputed :math:`e^{i m \theta}` table (non-persistent
    buffer, extended when a longer input arrives; no cos/sin recomputation or concatenation per
    call). Real heads (a real twin) are handled as complex numbers:

    * ``layout="interleaved"`` (default): adjacent pairs ``(x_{2j}, x_{2j+1})`` are the complex
      feature ``j`` (zero-copy view, :func:`cplxnet._utils.pack` order; GPT-J / LLaMA style);
    * ``layout="half"``: ``(x_j, x_{j+d/2})`` is the complex feature ``j`` (the ``rotate_half``
      layout of GPT-NeoX / HF), computed as ``[x_1 c - x_2 s, x_2 c + x_1 s]`` with cached
      ``c = cos m\theta``, ``s = sin m\theta``. It equals the interleaved result after the
      permutation ``perm = [0, d/2, 1, d/2+1, ...]`` of features: ``half(x)[..., perm] =
      interleaved(x[..., perm])``.

    ``rotate_values=True`` also rotates ``v`` by its key position; the attention output
    :math:`\sum_n a_{mn} v_n e^{i n\theta}` then carries the absolute positions of the values
    (not only relative ones).

    Scaling past the training length (Hugging Face ``rope_scaling`` semantics,
    :mod:`cplxnet.encodings.rope_scaling`): ``scaling="linear"`` (position interpolation),
    ``"ntk"`` (base :math:`\cdot s^{D/(D-2)}`: the static NTK-aware change of base; Hugging
    Face's NTK type, ``"dynamic"``, recomputes the base per length and equals this at one
    length only) or ``"yarn"`` (NTK-by-parts between ``beta_fast``
    and ``beta_slow`` turns over the training length ``original_max_len``, default ``max_len``)
    with ``factor=s`` change the frequencies :math:`\theta_j`; yarn's attention factor
    :math:`0.1 \ln s + 1` multiplies the rotated queries and keys (the logits by its square),
    as Hugging Face multiplies ``cos`` and ``sin`` by it. ``D = 2 Dh`` is the rotary width in
    real numbers.

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        base: frequency base (10000 in RoFormer).
        rotate_values: rotate ``v`` too.
        layout: ``"interleaved"`` or ``"half"`` (real heads only; complex heads are complex).
        scaling: ``None``, ``"linear"``, ``"ntk"`` or ``"yarn"``.
        factor: scaling factor ``s`` (context extension ratio); 1 without scaling.
        beta_fast, beta_slow: yarn's ramp bounds in turns (default 32 and 1).
        original_max_len: yarn's training length (default ``max_len``).
        truncate, mscale, mscale_all_dim, attention_factor: yarn's Hugging Face options
            (:func:`~cplxnet.encodings.rope_scaling.yarn_rope`; default: rounded ramp bounds,
            factor :math:`0.1 \ln s + 1`).
        max_len: the model's length: initial length of the cached table (it grows on demand),
            and yarn's default training length.
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = RotaryEncoding(d_model=8, num_heads=2)
        >>> q = torch.randn(1, 2, 5, 4, dtype=torch.cfloat)  # complex heads (B, H, L, Dh)
        >>> q2, k2, v2 = enc.rotate(q, q, q)  # position t turns q_t by e^{i t theta}
        >>> q2.shape, torch.allclose(q2.abs(), q.abs()), v2 is q
        (torch.Size([1, 2, 5, 4]), True, True)
    """

    name = "rotary"
    acts_on = frozenset({"qk"})
    supports_kv_cache = True

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        base: float = 10000.0,
        rotate_values: bool = False,
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
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        self.head_dim = head_width(d_model, num_heads, owner)
        self.complex_model = fk["dtype"].is_complex
        self.features = complex_features(self.head_dim, self.complex_model, owner, "head width")
        self.base, self.rotate_values = check_base(base, owner), bool(rotate_values)
        self.layout = check_choice(layout, LAYOUTS, owner, "layout")
        given = dict(
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            original_max_len=original_max_len,
            truncate=truncate,
            mscale=mscale,
            mscale_all_dim=mscale_all_dim,
            attention_factor=attention_factor,
        )
        self.scaling_options = {n: v for n, v in given.items() if v is not None}
        #: float64 (features,) rotation frequencies theta_j, and the factor multiplying q and k.
        self.frequencies, self.attention_factor = rope_frequencies(
            scaling,
            2 * self.features,
            self.base,
            factor,
            max_len=int(max_len),
            owner=owner,
            **self.scaling_options,
        )
        self.scaling, self.factor = scaling, float(factor)
        self._dtype = fk["dtype"]
        self._half = self.layout == "half" and not self.complex_model
        n, dev = max(int(max_len), 1), fk["device"]
        if self._half:
            self.register_table("_cos", "_build_cos", n, dev)
            self.register_table("_sin", "_build_sin", n, dev)
        else:
            self.register_table("_freqs", "_build", n, dev)

    def _angles(self, n: int, device) -> torch.Tensor:
        return sinusoid_angles(table_positions(n, device), self.frequencies)

    def _build(self, n: int, device) -> torch.Tensor:  # (n, Dh) complex e^{i m theta}
        positions = table_positions(n, device)
        table = complex_sinusoid(positions, self.frequencies, complex_dtype(self.dtype))
        return table.to(device)

    def _build_cos(self, n: int, device) -> torch.Tensor:
        return self._angles(n, device).cos().to(device=device, dtype=real_dtype(self.dtype))

    def _build_sin(self, n: int, device) -> torch.Tensor:
        return self._angles(n, device).sin().to(device=device, dtype=real_dtype(self.dtype))

    def _check(self, x: torch.Tensor, name: str) -> None:
        owner = type(self).__name__
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
        if x.is_complex() != self.complex_model:
            kind = "complex" if self.complex_model else "real"
            raise TypeError(
                f"{owner}: built for {kind} heads but {name} has dtype {x.dtype}; build the "
                f"encoding with dtype={x.dtype}"
            )
        if x.dim() != 4 or x.shape[-1] != self.head_dim:
            raise ValueError(
                f"{owner}: expected {name} of shape (B, H, L, {self.head_dim}), got "
                f"{tuple(x.shape)}"
            )

    def rotate_one(
        self,
        x: torch.Tensor,
        scale: torch.Tensor | float | None = None,
        positions: Positions | None = None,
        offset: int = 0,
    ) -> torch.Tensor:
        """Rotate ``x (..., L, Dh)`` by its positions ``m``: ``x * e^{i m theta} * scale``.

        ``scale`` is a real ``(L, features)`` tensor or a number multiplying each complex
        feature (its modulus; ``None``: 1). The positions are ``offset .. offset+L-1``, or
        ``positions`` (:class:`~cplxnet.encodings._common.Positions`).
        """
        L = x.shape[-2]
        check_offset(offset, type(self).__name__)
        if self._half:
            c = rows_at(
                lambda n: cached_rows(self, "_cos", n, self._build_cos), L, positions, offset
            )
            s = rows_at(
                lambda n: cached_rows(self, "_sin", n, self._build_sin), L, positions, offset
            )
            c, s = c.to(x.dtype), s.to(x.dtype)  # (L, Dh/2)
            if scale is not None:
                c, s = c * scale, s * scale
            x1, x2 = x[..., : self.features], x[..., self.features :]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        f = rows_at(lambda n: cached_rows(self, "_freqs", n, self._build), L, positions, offset)
        if scale is not None:
            f = f * scale
        if x.is_complex():
            return x * f.to(x.dtype)
        return pack(view_complex(x) * f.to(complex_dtype(x.dtype))).to(x.dtype)

    def _attention_scale(self) -> float | None:
        return None if self.attention_factor == 1.0 else self.attention_factor

    def rotate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        offset: int = 0,
        *,
        positions: Positions | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rotate ``q``, ``k`` (and ``v`` with ``rotate_values``) by their positions, ``offset ..
        offset+L-1`` or the keyword-only ``positions`` of the queries and keys alike
        (self-attention)."""
        self._check(q, "q")
        self._check(k, "k")
        a = self._attention_scale()
        q, k = self.rotate_one(q, a, positions, offset), self.rotate_one(k, a, positions, offset)
        if self.rotate_values:
            self._check(v, "v")
            v = self.rotate_one(v, None, positions, offset)
        return q, k, v

    def _scaling_repr(self) -> str:
        if self.scaling is None:
            return ""
        opts = "".join(
            f", {n}={v}" if isinstance(v, bool) else f", {n}={v:g}"
            for n, v in self.scaling_options.items()
        )
        return f", scaling={self.scaling!r}, factor={self.factor:g}{opts}"

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, base={self.base:g}, "
            f"rotate_values={self.rotate_values}, layout={self.layout!r}"
            f"{self._scaling_repr()}, dtype={self.dtype}"
        )
