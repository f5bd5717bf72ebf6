"""(Bi)LSTM text classifier over variable-length sequences, complex or real."""

from __future__ import annotations

import torch

import cplxnet.functional as CF

from .common import NumberField, TextClassifier
from .config import LSTMConfig

__all__ = ["LSTMClassifier"]


class LSTMClassifier(TextClassifier):
    r"""Embedded tokens -> (bi)LSTM run over each sequence's real length -> pooled features.

    Complex models use :class:`cplxnet.nn.LSTM` (``gate="split"`` bounded gates on real and
    imaginary parts, or ``"analytic"``); the real twin uses ``torch.nn.LSTM`` through packed
    sequences. Lengths come from the padding mask (a sequence that is all padding runs one step
    over a zero vector).

    Pooling (``config.pooling``): ``"final"`` concatenates the last layer's final states of each
    direction (the forward state at the last real token, the backward state at the first),
    ``"mean"`` / ``"max"`` pool the outputs over the real positions (max by magnitude:
    :func:`cplxnet.functional.masked_max_magnitude`). Features: ``dirs * hidden_size``.
    """

    def __init__(
        self,
        config: LSTMConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(config, device=device, dtype=dtype)

    def build_body(self, config: LSTMConfig, field: NumberField) -> int:
        self.num_directions = 2 if config.bidirectional else 1
        self.pooling = config.pooling
        self.rnn = field.lstm(
            config.d_model,
            config.hidden_size,
            num_layers=config.num_layers,
            bidirectional=config.bidirectional,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
            gate=config.gate,
        )
        return self.num_directions * config.hidden_size

    def features(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        lengths = (~padding_mask).sum(dim=1).clamp(min=1)  # (B,)
        out, (h, _) = self.rnn(x, lengths=lengths)  # (B, L, dirs*H); h (layers*dirs, B, H)
        if self.pooling == "final":
            last = h[-self.num_directions :]  # (dirs, B, H) of the last layer
            return last.transpose(0, 1).reshape(x.shape[0], -1)  # (B, dirs*H)
        if self.pooling == "mean":
            return CF.masked_mean(out, padding_mask, dim=1)
        return CF.masked_max_magnitude(out, padding_mask, dim=1)
