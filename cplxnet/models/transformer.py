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

    The model owns its encoding and passes it to every layer (``encoder(x,
    src_key_padding_mask=..., encoding=self.encoding)``) when it acts inside the encoder, so every
    site is supported: ``"token"``/``"input"`` in the
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
        self.encoder = build_encoder(config, field)
        # the encoder gets the encoding only if it acts on one of the encoder's sites (the
        # embedding stage applies "token" and "input")
        self._encoder_encoding = bool(self.encoding.acts_on & cnn.TransformerEncoder.sites)
        return config.d_model

    def features(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        encoding = self.encoding if self._encoder_encoding else None
        h = self.encoder(x, src_key_padding_mask=padding_mask, encoding=encoding)  # (B, L, D)
        return CF.masked_mean(h, padding_mask, dim=1)  # (B, D)


def build_encoder(config: TransformerConfig, field: NumberField) -> cnn.TransformerEncoder:
    """The layer stack of a Transformer config (classifier or decoder): batch-first layers, a
    final norm after pre-norm layers."""
    return cnn.TransformerEncoder.from_sizes(
        config.d_model,
        config.num_heads,
        config.num_layers,
        final_norm=config.norm if config.norm_first else None,
        dim_feedforward=config.dim_feedforward,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        norm=config.norm,
        score=config.score,
        projection=config.projection,
        batch_first=True,
        **field.fk,
    )
