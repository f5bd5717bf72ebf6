"""Tiny configurations and batches shared by the model-zoo tests."""

from __future__ import annotations

import torch

from cplxnet.models import make_config

TINY = {
    "fasttext": {"d_model": 6},
    "cnn": {"d_model": 6, "kernel_sizes": (2, 3), "num_filters": 4},
    "lstm": {"d_model": 6, "hidden_size": 5, "bidirectional": True},
    "transformer": {
        "d_model": 8,
        "num_heads": 2,
        "dim_feedforward": 12,
        "num_layers": 2,
        "attention_dropout": 0.0,
    },
}
VOCAB, CLASSES, MAX_LEN = 23, 3, 32


def tiny_config(family: str, complex: bool = True, **fields):
    base = {
        "vocab_size": VOCAB,
        "num_classes": CLASSES,
        "complex": complex,
        "max_len": MAX_LEN,
        "dropout": 0.0,
        **TINY[family],
    }
    base.update(fields)
    return make_config(family, **base)


def batch(lengths, length=None, vocab=VOCAB, generator=None):
    """Random ids (1..vocab-1 at real positions, 0 at padding) and the padding mask."""
    L = max(lengths) if length is None else length
    ids = torch.randint(1, vocab, (len(lengths), L), generator=generator)
    mask = torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]  # (B, L) True = padding
    return ids.masked_fill(mask, 0), mask
