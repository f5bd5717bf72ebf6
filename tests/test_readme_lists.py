"""Lists in README.md that name which encodings or layers do something: each is computed here
from the code and compared with the README's words, so a list cannot drift from the code."""

from __future__ import annotations

import os
import re

import pytest
import torch
from module_db import MODULES, make_module

from cplxnet._utils import pack
from cplxnet.encodings import available_encodings, create_encoding
from cplxnet.models import build_model, make_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTX = dict(d_model=8, num_heads=2, vocab_size=11, max_len=16)


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        return " ".join(fh.read().split())


def _names(text: str) -> set[str]:
    return {n.strip(" `") for n in text.split(",")}


def _bias_and_rotation(name: str, causal: bool, **options: bool) -> list[torch.Tensor]:
    """An encoding's logits bias and rotated q, k on 5 positions, its parameters drawn from one
    seed whatever ``causal``."""
    torch.manual_seed(0)
    enc = create_encoding(name, causal=causal, dtype=torch.complex128, **CTX, **options)
    with torch.no_grad():
        for p in enc.parameters():
            p.copy_(torch.randn_like(p))
    enc.eval()
    if hasattr(enc, "draw"):  # randomized: the positions of this forward
        enc.draw(5)
    heads = torch.randn(1, 2, 5, 4, dtype=torch.complex128)
    q, k, _ = enc.rotate(heads, heads * 0.5, heads)
    bias = enc.logits_bias(pack(q), pack(k))
    return [t for t in (q, k, bias) if t is not None]


def test_the_encodings_that_go_unidirectional_in_causal_models():
    """README: "Causal models pass causal=True: ... go unidirectional" names exactly the
    encodings whose logits (bias or rotated queries and keys) change with ``causal``, each with
    its default options or, where the README says so in brackets, with that option on
    ("tupe (relative)")."""
    listed = re.search(r"Causal models\*\* pass `causal=True`: ([^.]+?) go unidirectional",
                       _readme())  # fmt: skip
    assert listed
    cases = [(name, name, {}) for name in available_encodings()] + [
        ("tupe (relative)", "tupe", {"relative": True})
    ]
    changed = set()
    for label, name, options in cases:
        a, b = _bias_and_rotation(name, False, **options), _bias_and_rotation(name, True, **options)
        if len(a) != len(b) or any(not torch.equal(x, y) for x, y in zip(a, b)):
            changed.add(label)
    assert _names(listed.group(1)) == changed


def test_the_decoder_head_is_untied_for_the_token_site_encodings():
    """README: "Decoder head: untied for token-site encodings (...)": the decoder's head is its
    word table exactly when the encoding does not act at the token site, and the example named
    is one of them."""
    listed = re.search(r"Decoder head: untied for token-site encodings \(([^)]+)\)", _readme())
    assert listed
    untied = set()
    for name in available_encodings():
        config = make_config("decoder", vocab_size=11, encoding=name, d_model=8, num_heads=2,
                             num_layers=1, dim_feedforward=16)  # fmt: skip
        model = build_model(config)
        enc = create_encoding(name, **CTX)
        assert model.tied == ("token" not in enc.acts_on), name
        if not model.tied:
            untied.add(name)
    assert _names(listed.group(1)) <= untied


@pytest.mark.parametrize("info", MODULES, ids=[i.id for i in MODULES])
def test_modules_with_parameters_take_device_and_dtype_and_reset_parameters(info):
    """README (Conventions): "Modules with parameters take device=None, dtype=None ... and have
    reset_parameters()". A container of layers given to it (TransformerEncoder/Decoder: torch's
    signatures) has no parameters of its own."""
    import inspect

    module = make_module(info, torch.complex64)
    if not any(True for _ in module.parameters(recurse=False)):
        return
    names = inspect.signature(type(module).__init__).parameters
    assert "device" in names and "dtype" in names, type(module).__name__
    assert names["device"].default is None and names["dtype"].default is None
    assert callable(getattr(module, "reset_parameters", None)), type(module).__name__
