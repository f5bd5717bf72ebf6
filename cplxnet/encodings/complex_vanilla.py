r"""Complex word embedding without position: the baseline of Wang et al., ICLR 2020."""

from __future__ import annotations

import torch

from .complex_order import ComplexOrderEncoding
from .registry import register_encoding

__all__ = ["ComplexVanillaEncoding"]


@register_encoding
class ComplexVanillaEncoding(ComplexOrderEncoding):
    r"""``complex-vanilla``: :math:`f(j)_d = r_{j,d}\, e^{i \theta_{j,d}}`, no position.

    The complex word embedding baseline of Wang et al. ("Encoding word order in complex
    embeddings", ICLR 2020): the ``complex-order`` embedding with frequency ``w = 0``, i.e.
    ``ComplexOrderEncoding(..., frequency="none", phase=True)``. Replaces the word embedding
    ("token" site); order must then come from the model (or nowhere).

    Args:
        vocab_size, d_model, padding_idx, amplitude, sparse, device, dtype, init, init_scale: as
            :class:`ComplexOrderEncoding` (``init="uniform"``: amplitudes :math:`U(-s, s)`,
            Kim's initialisation of random word vectors).

    Examples::

        >>> enc = ComplexVanillaEncoding(vocab_size=10, d_model=4)
        >>> z = enc.embed(torch.tensor([[1, 2, 3]]))
        >>> z.shape, z.dtype
        (torch.Size([1, 3, 4]), torch.complex64)
    """

    name = "complex-vanilla"
    field = "complex"
    acts_on = frozenset({"token"})

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        padding_idx: int | None = None,
        amplitude: str = "word",
        sparse: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        init: str = "normal",
        init_scale: float | None = None,
    ) -> None:
        super().__init__(
            vocab_size,
            d_model,
            padding_idx=padding_idx,
            phase=True,
            frequency="none",
            amplitude=amplitude,
            sparse=sparse,
            device=device,
            dtype=dtype,
            init=init,
            init_scale=init_scale,
        )
