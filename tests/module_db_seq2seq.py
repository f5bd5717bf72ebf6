"""Module-table entries for the seq2seq layers (merged into ``module_db.MODULES``): the LSTM and
GRU cells and the encoder-decoder Transformer."""

from __future__ import annotations

import torch
from module_db import ModuleInfo

from cplxnet import nn as cnn


def _randn(shape, dtype, device=None):
    return torch.randn(*shape, dtype=dtype, device=device)


def _cell_input(pair: bool | None):
    """A cell's input ``(B=2, D=3)`` and state ``(B, H=2)`` (an ``(h, c)`` pair for the LSTM;
    ``pair=None``: no state, the cell starts from zeros)."""

    def make(dtype, device):
        x = _randn((2, 3), dtype, device)
        if pair is None:
            return (x,), {}
        h = _randn((2, 2), dtype, device)
        hx = (h, _randn((2, 2), dtype, device)) if pair else h
        return (x, hx), {}

    return make


MODULES: list[ModuleInfo] = [
    # the real-twin test converts tensor arguments, not the (h, c) pair: LSTM entries with a
    # real twin start from zeros (tests/nn/test_rnn_cell.py passes states to the real twin)
    ModuleInfo(cnn.LSTMCell, _cell_input(None), args=(3, 2), supports_real=True,
               compile_backend="aot_eager"),
    ModuleInfo(cnn.LSTMCell, _cell_input(None), args=(3, 2), kwargs={"gate": "analytic"},
               supports_real=True, name="LSTMCell_analytic_zero_state"),
    ModuleInfo(cnn.LSTMCell, _cell_input(True), args=(3, 2), kwargs={"gate": "analytic"},
               name="LSTMCell_analytic", compile_backend="aot_eager"),
    ModuleInfo(cnn.LSTMCell, _cell_input(True), args=(3, 2), name="LSTMCell_state"),
    ModuleInfo(cnn.LSTMCell, _cell_input(True), args=(3, 2, False), name="LSTMCell_nobias"),
    ModuleInfo(cnn.GRUCell, _cell_input(False), args=(3, 2), supports_real=True,
               compile_backend="aot_eager"),
    ModuleInfo(cnn.GRUCell, _cell_input(False), args=(3, 2), kwargs={"gate": "analytic"},
               supports_real=True, name="GRUCell_analytic", compile_backend="aot_eager"),
]
