r"""Fixed sinusoidal positions (Vaswani et al., "Attention is all you need", NeurIPS 2017)."""

from __future__ import annotations

import torch

from .._utils import factory_kwargs
from ._common import (
    Positions,
    cached_rows,
    check_base,
    check_offset,
    check_sequence,
    complex_features,
    complex_sinusoid,
    rows_at,
    sinusoid_angles,
    sinusoid_frequencies,
    table_positions,
)
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["SinusoidalEncoding"]


@register_encoding
class SinusoidalEncoding(PositionalEncoding):
    r"""``sinusoidal``: adds the fixed sinusoid of Vaswani et al. to the input, as the complex
    :math:`p_k = e^{i k w}` in a complex model.

    .. math::
        x_k \mapsto x_k + p_k,\qquad (p_k)_j = e^{i k w_j},\quad w_j = \text{base}^{-j/n},\ j < n

    with ``n`` complex features: ``n = d_model`` for a complex model. A real model of width
    ``d = d_model`` (even) adds Vaswani et al.'s table exactly,

    .. math::
        \mathrm{PE}(k, 2j) = \sin(k w_j),\quad \mathrm{PE}(k, 2j+1) = \cos(k w_j),\quad
        w_j = 10000^{-2j/d},\ j < n = d/2,

    which is the complex :math:`p_k` of ``n`` features seen as ``d`` reals with the two entries
    of each pair swapped: :math:`\mathrm{PE}(k) = \Pi\, \mathrm{pack}(p_k)` where
    :func:`cplxnet._utils.pack` interleaves ``[Re, Im]`` = ``[cos k w_j, sin k w_j]`` and the
    permutation :math:`\Pi` exchanges indices ``2j`` and ``2j+1``; equivalently
    :math:`\mathrm{PE}(k) = \mathrm{pack}(i\, \overline{p_k})` (:math:`i \bar z = \sin + i \cos`
    for :math:`z = e^{i\theta}`). :math:`\Pi` is fixed, so the two orders train alike; with
    Vaswani's order a ported real checkpoint or table matches the paper's. A complex model of
    width ``D`` gets the sinusoid of ``D`` frequencies as ``D`` complex numbers.

    Any length: the table is a non-persistent buffer (no state_dict entry) cached by length and
    extended when a longer input arrives. ``p_{a+b} = p_a \odot p_b``: the encoding of ``a+b``
    is a fixed rotation of that of ``a`` (Vaswani et al.'s motivation).

    Args:
        d_model: model width (complex features, or reals for a real model).
        base: the frequency base (10000 in the paper).
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = SinusoidalEncoding(d_model=4)
        >>> enc.encode_input(torch.zeros(2, 5, 4, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 4])
    """

    name = "sinusoidal"
    acts_on = frozenset({"input"})
    supports_kv_cache = True

    def __init__(
        self,
        d_model: int,
        base: float = 10000.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.d_model = d_model
        self.complex_model = fk["dtype"].is_complex
        self.features = complex_features(d_model, self.complex_model, owner)
        self.base = check_base(base, owner)
        self._dtype = fk["dtype"]
        self.register_table("_table", "_build", 128, fk["device"])

    def _build(self, n: int, device) -> torch.Tensor:
        freqs = sinusoid_frequencies(self.features, self.base)
        pos = table_positions(n, device).to(torch.float64)
        if self.complex_model:
            return complex_sinusoid(pos, freqs, self.dtype).to(device)  # (n, d_model) complex
        # real twin: Vaswani's order, sin at even and cos at odd indices (the pairs of
        # pack(e^{ikw}) swapped)
        ang = sinusoid_angles(pos, freqs)  # (n, d_model / 2) float64
        return torch.stack((ang.sin(), ang.cos()), dim=-1).flatten(-2).to(self.dtype).to(device)

    def table(self, length: int) -> torch.Tensor:
        """The encodings ``p_0 .. p_{length-1}``, ``(length, d_model)`` in the model dtype."""
        return cached_rows(self, "_table", length, self._build)

    def encode_input(
        self, x: torch.Tensor, offset: int = 0, *, positions: Positions | None = None
    ) -> torch.Tensor:  # (B, L, D) -> (B, L, D)
        """``x + p`` at positions ``offset .. offset+L-1`` (or the keyword-only ``positions``)."""
        check_sequence(x, self.d_model, self.complex_model, type(self).__name__)
        check_offset(offset, type(self).__name__)
        return x + rows_at(self.table, x.shape[1], positions, offset).to(x.dtype)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base:g}, dtype={self.dtype}"
