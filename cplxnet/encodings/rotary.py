r"""Rotary position embedding (Su et al., "RoFormer: Enhanced Transformer with Rotary Position
Embedding", 2021; Neurocomputing 2024) as one complex multiplication."""

from __future__ import annotations

import torch

from .._utils import check_choice, complex_dtype, factory_kwargs, pack, real_dtype
from ._common import (
    cached_rows,
    complex_features,
    complex_sinusoid,
    head_width,
    sinusoid_angles,
    sinusoid_frequencies,
    view_complex,
)
from .base import PositionalEncoding
from .registry import register_encoding

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

    Args:
        d_model: model width; head width ``d_model / num_heads``.
        num_heads: number of heads.
        base: frequency base (10000 in RoFormer).
        rotate_values: rotate ``v`` too.
        layout: ``"interleaved"`` or ``"half"`` (real heads only; complex heads are complex).
        max_len: initial length of the cached table (it grows on demand).
        device, dtype: model dtype (complex by default; real for a real twin).
    """

    name = "rotary"
    acts_on = frozenset({"qk"})

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        base: float = 10000.0,
        rotate_values: bool = False,
        layout: str = "interleaved",
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
        self.base, self.rotate_values = float(base), bool(rotate_values)
        self.layout = check_choice(layout, LAYOUTS, owner, "layout")
        self._dtype = fk["dtype"]
        self._half = self.layout == "half" and not self.complex_model
        n, dev = max(int(max_len), 1), fk["device"]
        if self._half:
            self.register_buffer("_cos", self._build_cos(n, dev), persistent=False)
            self.register_buffer("_sin", self._build_sin(n, dev), persistent=False)
        else:
            self.register_buffer("_freqs", self._build(n, dev), persistent=False)

    def _angles(self, n: int) -> torch.Tensor:
        return sinusoid_angles(torch.arange(n), sinusoid_frequencies(self.features, self.base))

    def _build(self, n: int, device) -> torch.Tensor:  # (n, Dh) complex e^{i m theta}
        freqs = sinusoid_frequencies(self.features, self.base)
        return complex_sinusoid(torch.arange(n), freqs, complex_dtype(self.dtype)).to(device)

    def _build_cos(self, n: int, device) -> torch.Tensor:
        return self._angles(n).cos().to(device=device, dtype=real_dtype(self.dtype))

    def _build_sin(self, n: int, device) -> torch.Tensor:
        return self._angles(n).sin().to(device=device, dtype=real_dtype(self.dtype))

    def reset_parameters(self) -> None:
        pass

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

    def rotate_one(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (..., L, Dh)`` by its positions ``0 .. L-1``."""
        L = x.shape[-2]
        if self._half:
            c = cached_rows(self, "_cos", L, self._build_cos).to(x.dtype)  # (L, Dh/2)
            s = cached_rows(self, "_sin", L, self._build_sin).to(x.dtype)
            x1, x2 = x[..., : self.features], x[..., self.features :]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        f = cached_rows(self, "_freqs", L, self._build)  # (L, Dh) complex
        if x.is_complex():
            return x * f.to(x.dtype)
        return pack(view_complex(x) * f.to(complex_dtype(x.dtype)))

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self._check(q, "q")
        self._check(k, "k")
        q, k = self.rotate_one(q), self.rotate_one(k)
        if self.rotate_values:
            self._check(v, "v")
            v = self.rotate_one(v)
        return q, k, v

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, base={self.base:g}, "
            f"rotate_values={self.rotate_values}, layout={self.layout!r}, dtype={self.dtype}"
        )
