"""The prefix property of a causal decoder: the logits of a prefix do not depend on the window
they are computed in (``model(ids[:, :t]) == model(ids)[:, :t]``), for every registered encoding
and for random pairs the registry accepts (incl. xpos with the relative encodings that read q or
k alone), complex and real, in float64."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from cplxnet.encodings import available_encodings, create_encoding
from cplxnet.models import build_model, make_config, real_twin

V = 11
CTX = dict(d_model=8, num_heads=2, vocab_size=V, max_len=16, causal=True)


def decoder(encoding: str, complex_: bool) -> torch.nn.Module:
    config = make_config(
        "decoder",
        vocab_size=V,
        encoding=encoding,
        d_model=8,
        num_heads=2,
        dim_feedforward=12,
        num_layers=2,
        max_len=16,
        complex=complex_,
    )
    model = build_model(config if complex_ else real_twin(config), dtype=torch.float64).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # every parameter random: zero-initialised tables would hide a leak
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5
            p.copy_(noise * (1 + 1j) / 2**0.5 if p.is_complex() else noise.to(p.dtype))
    return model


def accepted(names: tuple[str, ...]) -> bool:
    try:
        create_encoding("+".join(names), **CTX)
    except (ValueError, TypeError):
        return False
    return True


def assert_prefix_property(encoding: str, complex_: bool) -> None:
    model = decoder(encoding, complex_)
    ids = torch.randint(1, V, (2, 14), generator=torch.Generator().manual_seed(1))
    full = model(ids)
    for t in (1, 5, 9):
        torch.testing.assert_close(model(ids[:, :t]), full[:, :t], rtol=1e-9, atol=1e-9)


KINDS = pytest.mark.parametrize("complex_", [True, False], ids=["complex", "real"])
SINGLE = available_encodings()
XPOS_PAIRS = [f"xpos+{n}" for n in ("shaw", "xl", "deberta", "cope", "t5", "kerple")]
_ALL_PAIRS = [
    "+".join(p) for p in itertools.combinations(SINGLE, 2) if "none" not in p and accepted(p)
]
_OTHER_PAIRS = [p for p in _ALL_PAIRS if p not in XPOS_PAIRS]
RANDOM_PAIRS = sorted(random.Random(25).sample(_OTHER_PAIRS, 24))


@KINDS
@pytest.mark.parametrize("encoding", SINGLE)
def test_every_encoding_alone(encoding, complex_):
    assert_prefix_property(encoding, complex_)


@KINDS
@pytest.mark.parametrize("encoding", XPOS_PAIRS + RANDOM_PAIRS)
def test_combinations(encoding, complex_):
    assert_prefix_property(encoding, complex_)


def test_the_pairs_cover_the_new_encodings_and_refusals_are_real():
    covered = {m for p in RANDOM_PAIRS + XPOS_PAIRS for m in p.split("+")}
    assert {"kerple", "fire", "cope", "randomized", "xpos", "shaw", "xl", "deberta"} <= covered
    assert not accepted(("rotary", "xpos"))  # two "qk" members
    assert len(_ALL_PAIRS) > 100
