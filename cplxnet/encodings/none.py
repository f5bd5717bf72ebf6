"""The empty encoding: no position information at all."""

from __future__ import annotations

import torch

from .._utils import resolve_dtype
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["NoEncoding"]


@register_encoding
class NoEncoding(PositionalEncoding):
    """``none``: acts nowhere; every hook is the identity (or absent).

    A bag-of-words model then ignores order entirely; a Transformer without an encoding is
    permutation-equivariant. A CNN still sees position through its zero padding at the sequence
    ends (Islam et al., "How much position information do convolutional neural networks encode?",
    ICLR 2020), which is the only position signal it gets with this choice.

    Examples::

        >>> enc = NoEncoding()
        >>> x = torch.randn(2, 5, 4, dtype=torch.cfloat)
        >>> enc.encode_input(x) is x, enc.logits_bias(x, x)
        (True, None)
    """

    name = "none"
    acts_on = frozenset()
    supports_kv_cache = True

    def __init__(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self._dtype = resolve_dtype(dtype, type(self).__name__, allow_real=True)
        self.complex_model = self.dtype.is_complex

    def reset_parameters(self) -> None:
        pass

    def extra_repr(self) -> str:
        return f"dtype={self.dtype}"
