r"""Multiplicative position encoding: :math:`x_k \odot p_k` instead of :math:`x_k + p_k`."""

from __future__ import annotations

import torch
from torch import nn

from .._utils import check_choice, complex_dtype, factory_kwargs, pack
from ._common import (
    cached_rows,
    check_base,
    check_offset,
    check_sequence,
    complex_features,
    complex_sinusoid,
    sinusoid_frequencies,
    table_positions,
    view_complex,
)
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["MultiplicativeEncoding"]

KINDS = ("sinusoidal", "trainable")


@register_encoding
class MultiplicativeEncoding(PositionalEncoding):
    r"""``multiplicative``: :math:`x_k \mapsto x_k \odot p_k` (element-wise).

    ``kind="sinusoidal"``: :math:`(p_k)_j = e^{i k w_j}`, :math:`w_j = \text{base}^{-j/n}`: each
    complex feature is *rotated* by an angle proportional to its position, so
    :math:`\langle x_a p_a, y_b p_b \rangle` depends on the positions only through ``a - b``
    (the input-level analogue of rotary, and the complex-order embedding with the word's own
    frequencies replaced by fixed ones; cf. Wang et al., ICLR 2020, who show the sinusoidal
    encoding is the additive special case of their complex embedding). For a real model of width
    ``D`` the features are viewed as ``D/2`` complex numbers (adjacent pairs), i.e. each pair is
    rotated: the real twin of the same map. No parameters, any length.

    ``kind="trainable"``: a learned table ``(max_len, D)`` in the model dtype, initialised near
    one (:math:`1 + \epsilon`, :math:`\epsilon \sim \mathcal{N}(0, \text{std}^2)`) so the input
    starts almost unchanged; lengths up to ``max_len``.

    Args:
        d_model: model width.
        kind: ``"sinusoidal"`` or ``"trainable"``.
        max_len: rows of the trainable table.
        base: sinusoid frequency base.
        std: spread of the trainable table around one.
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = MultiplicativeEncoding(d_model=4)
        >>> enc.encode_input(torch.ones(2, 5, 4, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 4])
    """

    name = "multiplicative"
    acts_on = frozenset({"input"})
    supports_kv_cache = True

    def __init__(
        self,
        d_model: int,
        kind: str = "sinusoidal",
        max_len: int = 512,
        base: float = 10000.0,
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.kind = check_choice(kind, KINDS, owner, "kind")
        self.d_model, self.max_len, self.std = d_model, max_len, std
        self.base = check_base(base, owner)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        self.features = complex_features(d_model, self.complex_model, owner)
        if self.kind == "trainable":
            self.weight = nn.Parameter(torch.empty(max_len, d_model, **fk))
        else:
            self.register_parameter("weight", None)
            self.register_table("_table", "_build", 128, fk["device"])
        self.reset_parameters()

    def _build(self, n: int, device) -> torch.Tensor:  # (n, features) complex
        freqs = sinusoid_frequencies(self.features, self.base)
        positions = table_positions(n, device)
        return complex_sinusoid(positions, freqs, complex_dtype(self.dtype)).to(device)

    def reset_parameters(self) -> None:
        self.reset_tables()
        if self.weight is not None:
            with torch.no_grad():
                noise = torch.randn(self.weight.shape, dtype=self.weight.dtype) * self.std
                self.weight.copy_(1.0 + noise.to(self.weight.device))

    def table(self, length: int) -> torch.Tensor:
        """``p_0 .. p_{length-1}``: ``(length, D)`` (trainable) or ``(length, D or D/2)``
        complex rotations (sinusoidal)."""
        if self.weight is None:
            return cached_rows(self, "_table", length, self._build)
        if length > self.max_len:
            raise ValueError(
                f"{type(self).__name__}: input length {length} exceeds max_len={self.max_len} "
                f"of the trainable table; build with max_len >= {length} or kind='sinusoidal'"
            )
        return self.weight[:length]

    def encode_input(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:  # (B, L, D)
        check_sequence(x, self.d_model, self.complex_model, type(self).__name__)
        check_offset(offset, type(self).__name__)
        p = self.table(offset + x.shape[1])[offset:]
        if self.weight is not None or x.is_complex():
            return x * p.to(x.dtype)
        return pack(view_complex(x) * p.to(complex_dtype(x.dtype))).to(x.dtype)  # each pair

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kind={self.kind!r}, dtype={self.dtype}"
