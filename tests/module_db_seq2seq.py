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
    ModuleInfo(
        cnn.LSTMCell,
        _cell_input(None),
        args=(3, 2),
        supports_real=True,
        compile_backend="aot_eager",
    ),
    ModuleInfo(
        cnn.LSTMCell,
        _cell_input(None),
        args=(3, 2),
        kwargs={"gate": "analytic"},
        supports_real=True,
        name="LSTMCell_analytic_zero_state",
    ),
    ModuleInfo(
        cnn.LSTMCell,
        _cell_input(True),
        args=(3, 2),
        kwargs={"gate": "analytic"},
        name="LSTMCell_analytic",
        compile_backend="aot_eager",
    ),
    ModuleInfo(cnn.LSTMCell, _cell_input(True), args=(3, 2), name="LSTMCell_state"),
    ModuleInfo(cnn.LSTMCell, _cell_input(True), args=(3, 2, False), name="LSTMCell_nobias"),
    ModuleInfo(
        cnn.GRUCell,
        _cell_input(False),
        args=(3, 2),
        supports_real=True,
        compile_backend="aot_eager",
    ),
    ModuleInfo(
        cnn.GRUCell,
        _cell_input(False),
        args=(3, 2),
        kwargs={"gate": "analytic"},
        supports_real=True,
        name="GRUCell_analytic",
        compile_backend="aot_eager",
    ),
]


# ---- encoder-decoder Transformer ----
def _tgt_memory(dtype, device):
    """Decoder input: target (2, 3, 4) and memory (2, 5, 4) with padding on both, causal target
    (bool masks only: the real-twin test casts floating tensors to complex)."""
    tgt = _randn((2, 3, 4), dtype, device)
    mem = _randn((2, 5, 4), dtype, device)
    tpad = torch.tensor([[False] * 3, [False, False, True]], device=device)
    mpad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device=device)
    return (tgt, mem), {
        "tgt_key_padding_mask": tpad,
        "memory_key_padding_mask": mpad,
        "tgt_is_causal": True,
    }


def _tgt_memory_masks(dtype, device):
    """Decoder input with a bool memory mask ``(T, S)`` and a bool target mask ``(T, T)``."""
    (tgt, mem), _ = _tgt_memory(dtype, device)
    banned = torch.tensor(
        [[False, True, False, True, True], [False] * 5, [False, False, True, False, False]],
        device=device,
    )
    return (tgt, mem), {
        "memory_mask": banned,
        "tgt_mask": torch.ones(3, 3, dtype=torch.bool, device=device).triu(1),
    }


def _src_tgt(dtype, device):
    (tgt, mem), kw = _tgt_memory(dtype, device)
    return (mem, tgt), {"src_key_padding_mask": kw["memory_key_padding_mask"], **kw}


_SMALL = {"dim_feedforward": 6, "batch_first": True}

MODULES.extend(
    [
        ModuleInfo(
            cnn.TransformerDecoderLayer,
            _tgt_memory,
            args=(4, 2),
            kwargs=_SMALL,
            is_random=True,
            supports_real=True,
            compile_backend="aot_eager",
        ),
        ModuleInfo(
            cnn.TransformerDecoderLayer,
            _tgt_memory_masks,
            args=(4, 2),
            kwargs={
                "norm_first": True,
                "norm": "whiten",
                "activation": "gelu",
                "score": "modulus",
                **_SMALL,
            },
            is_random=True,
            name="TransformerDecoderLayer_prenorm_whiten_masks",
        ),
        ModuleInfo(
            cnn.TransformerDecoderLayer,
            _tgt_memory,
            args=(4, 2),
            kwargs={"projection": "real", **_SMALL},
            is_random=True,
            name="TransformerDecoderLayer_real_projection",
        ),
        ModuleInfo(
            cnn.TransformerDecoder,
            _tgt_memory,
            args=(4, 2, 2),
            kwargs={"norm_first": True, "norm": "rms", "final_norm": "rms", **_SMALL},
            build=cnn.TransformerDecoder.from_sizes,
            is_random=True,
            supports_real=True,
        ),
        ModuleInfo(
            cnn.Transformer,
            _src_tgt,
            args=(4, 2, 1, 1, 6),
            kwargs={"batch_first": True},
            is_random=True,
            supports_real=True,
            compile_backend="aot_eager",
        ),
    ]
)
