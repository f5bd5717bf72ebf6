"""Every zoo model, complex and real, with every registered encoding whose code it runs its own
way (see ``FRONT_ONLY``), as tiny test cases on a given device (shared by the host-sync and
device-placement tests; new encodings and families in the registries are included
automatically)."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "models"))

from zoo_helpers import TINY, tiny_config  # noqa: E402

from cplxnet.encodings import available_encodings, get_encoding_class  # noqa: E402
from cplxnet.models import FAMILIES, LM_FAMILIES, MODEL_CLASSES, build_model, make_config  # noqa: E402

VOCAB = 13
LENGTHS = (6, 3, 1)  # padding at the end of the second and third sequence
# dropout everywhere, so that the training-mode paths run
DROPOUT = {"dropout": 0.1, "embedding_dropout": 0.1, "word_dropout": 0.1}


def _suits(family: str, encoding: str) -> bool:
    return frozenset(get_encoding_class(encoding).acts_on) <= MODEL_CLASSES[family].supported_sites


#: the front every classifier family shares (``cplxnet/models/common.py``) applies a token- or
#: input-site encoding by the same code whatever the body: the bodies attention does not reach
#: run without an encoding and with the default one; every encoding runs in each attention body
FRONT_ONLY = ("none", "complex-order")


def _covers(family: str, encoding: str) -> bool:
    attention = bool(MODEL_CLASSES[family].supported_sites - {"token", "input"})
    return _suits(family, encoding) and (attention or encoding in FRONT_ONLY)


CASES = [
    (family, encoding, complex_)
    for family in FAMILIES + LM_FAMILIES
    for encoding in available_encodings()
    if _covers(family, encoding)
    for complex_ in (True, False)
]
IDS = [f"{f}-{e}-{'complex' if c else 'real'}" for f, e, c in CASES]


def config(family: str, encoding: str, complex_: bool):
    if family in TINY:
        return tiny_config(family, complex_, encoding=encoding, vocab_size=VOCAB, **DROPOUT)
    sizes = {"d_model": 8, "num_heads": 2, "dim_feedforward": 12, "num_layers": 2, "max_len": 16}
    return make_config(
        family, vocab_size=VOCAB, encoding=encoding, complex=complex_, **sizes, **DROPOUT
    )


def build(case: tuple, device: torch.device | str) -> torch.nn.Module:
    return build_model(config(*case), device=device)


def batch(device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, L)`` ids and padding mask (True = padding, at the end) built on ``device``."""
    g = torch.Generator().manual_seed(0)
    L = max(LENGTHS)
    ids = torch.randint(1, VOCAB, (len(LENGTHS), L), generator=g)
    mask = torch.arange(L)[None, :] >= torch.tensor(LENGTHS)[:, None]
    return ids.masked_fill(mask, 0).to(device), mask.to(device)


def _floats(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out] if out.is_complex() or out.is_floating_point() else []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _floats(o)]
    return []


def loss(out) -> torch.Tensor:
    """A real scalar of every floating / complex tensor in ``out`` (a tensor or nested tuple)."""
    terms = [torch.view_as_real(t).sum() if t.is_complex() else t.sum() for t in _floats(out)]
    return sum(terms[1:], terms[0])
