"""Every registered encoding with every family whose sites it suits (complex and real), and the
check_sites error naming the encoding and the model for the others."""

from __future__ import annotations

import pytest
import torch
from zoo_helpers import VOCAB, batch, tiny_config

from cplxnet.encodings import available_encodings, get_encoding_class
from cplxnet.models import FAMILIES, MODEL_CLASSES, build_model

ENCODINGS = available_encodings()
CASES = [(f, e) for f in FAMILIES for e in ENCODINGS]


def _suits(family: str, name: str) -> bool:
    return frozenset(get_encoding_class(name).acts_on) <= MODEL_CLASSES[family].supported_sites


def test_the_registry_is_populated():
    assert {"none", "sinusoidal", "trainable"} <= set(ENCODINGS)
    assert MODEL_CLASSES["transformer"].supported_sites >= {"qk", "logits", "values", "layer"}
    assert MODEL_CLASSES["cnn"].supported_sites == {"token", "input"}


@pytest.mark.parametrize("complex", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize(("family", "name"), CASES, ids=[f"{f}-{e}" for f, e in CASES])
def test_encoding_with_family(family, name, complex, device):
    """On ``--device`` (default cpu)."""
    config = tiny_config(family, complex, encoding=name)
    if not _suits(family, name):
        with pytest.raises(ValueError, match=rf"encoding '{name}' acts on .* model '{family}'"):
            build_model(config)
        return
    model = build_model(config, device=device, dtype=torch.float64)
    assert sum(1 for m in model.modules() if m is model.encoding) == 1
    ids, mask = (t.to(device) for t in batch([6, 3, 1]))
    model.train()
    logits = model(ids, mask)
    assert logits.shape == (3, 3) and torch.isfinite(logits).all()
    assert logits.device.type == device.type
    logits.square().sum().backward()
    for p in model.encoding.parameters():
        assert p.grad is not None, f"{name}: an encoding parameter got no gradient"
    # eval mode: tokens at padded positions and extra trailing padding change nothing
    model.eval()
    ref = model(ids, mask)
    noisy = torch.where(mask, torch.randint(1, VOCAB, ids.shape, device=device), ids)
    longer_ids = torch.cat([noisy, torch.randint(1, VOCAB, (3, 4), device=device)], dim=1)
    longer_mask = torch.cat([mask, torch.ones(3, 4, dtype=torch.bool, device=device)], dim=1)
    torch.testing.assert_close(model(longer_ids, longer_mask), ref)
    # state_dict round trip into a fresh model gives the same logits
    fresh = build_model(config, device=device, dtype=torch.float64).eval()
    fresh.load_state_dict(model.state_dict())
    torch.testing.assert_close(fresh(ids, mask), ref)
