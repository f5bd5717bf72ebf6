"""Transformer encoder classifier, complex or real, with any positional encoding."""

from __future__ import annotations

from typing import ClassVar

import torch

import cplxnet.functional as CF
import cplxnet.nn as cnn
from cplxnet.encodings import SITES

from .common import NumberField, TextClassifier
from .config import TransformerConfig

__all__ = ["TransformerClassifier"]


class TransformerClassifier(TextClassifier):
    r"""Embedded tokens -> :class:`cplxnet.nn.TransformerEncoder` -> masked mean -> readout ->
    linear (Vaswani et al., 2017; the classifier of Wang et al., "Encoding Word Order in Complex
    Embeddings", ICLR 2020: 1 layer, d = 256, feed-forward 512, 8 heads by default).

    The model owns its encoding and passes it to every layer (``encoder(x, padding_mask=...,
    encoding=self.encoding)``), so every site is supported: ``"token"``/``"input"`` in the
    embedding stage, ``"layer"``, ``"qk"``, ``"logits"`` and ``"values"`` inside the encoder. The
    real twin is the same encoder built with a real dtype.
    """

    supported_sites: ClassVar[frozenset[str]] = frozenset(SITES)

    def __init__(
        self,
        config: TransformerConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(config, device=device, dtype=dtype)

    def _encoding_heads(self) -> int:
        return self.config.num_heads

    def build_body(self, config: TransformerConfig, field: NumberField) -> int:
        self.encoder = cnn.TransformerEncoder(
            config.d_model,
            config.num_heads,
            config.num_layers,
            norm=config.norm if config.norm_first else None,  # final norm after pre-norm layers
            dim_feedforward=config.dim_feedforward,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation=config.activation,
            norm_first=config.norm_first,
            layer_norm=config.norm,
            score=config.score,
            projection=config.projection,
            **field.fk,
        )
        return config.d_model

    def features(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x, padding_mask=padding_mask, encoding=self.encoding)  # (B, L, D)
        return CF.masked_mean(h, padding_mask, dim=1)  # (B, D)
