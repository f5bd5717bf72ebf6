"""The deferred-initialisation check shared by the layer and encoding tests."""

from __future__ import annotations

import torch


def every_tensor(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers, non-persistent buffers included."""
    return {**dict(m.named_parameters()), **dict(m.named_buffers())}


def assert_deferred_init_restores(fresh: torch.nn.Module, deferred: torch.nn.Module) -> None:
    """``deferred`` (built on the meta device, then ``to_empty``) has its memory filled with
    NaN (-7 for integer buffers), then both modules run ``reset_parameters()`` under the same
    seed: every parameter and buffer must be equal, so a table no reset rebuilds stays NaN and
    fails."""
    with torch.no_grad():
        for t in every_tensor(deferred).values():
            t.fill_(float("nan")) if t.is_floating_point() or t.is_complex() else t.fill_(-7)
    for m in (fresh, deferred):
        torch.manual_seed(123)
        m.reset_parameters()
    want, got = every_tensor(fresh), every_tensor(deferred)
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)
