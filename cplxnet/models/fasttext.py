"""FastText classifier: mean of the token vectors, then a linear classifier.

Joulin, Grave, Bojanowski and Mikolov, "Bag of Tricks for Efficient Text Classification",
EACL 2017 (without the n-gram hashing: the word table is the only table).
"""

from __future__ import annotations

import torch

import cplxnet.functional as CF

from .common import NumberField, TextClassifier
from .config import FastTextConfig

__all__ = ["FastText"]


class FastText(TextClassifier):
    r"""``logits = W readout(dropout(mean_{t \le n} x_t)) + b`` with ``x_t`` the embedded tokens
    (word table or token-site encoding, plus any input-site encoding) and the mean taken over the
    ``n`` non-padded positions (:func:`cplxnet.functional.masked_mean`).

    Encodings: sites ``"token"`` and ``"input"`` (an additive input encoding is averaged into a
    constant per length, a multiplicative one weights the words by position).
    """

    def __init__(
        self,
        config: FastTextConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(config, device=device, dtype=dtype)

    def build_body(self, config: FastTextConfig, field: NumberField) -> int:
        return config.d_model

    def features(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        return CF.masked_mean(x, padding_mask, dim=1)  # (B, D)
