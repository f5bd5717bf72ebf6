"""Autocast, as the README states it: every complex layer of the module table ignores autocast,
as torch's complex ops do, also those computed on torch's real kernels (convolutions, attention,
split-gate RNNs, real-weight projections) and the whitening norms, and takes keyword arguments
under its guard; with a real dtype a layer follows autocast as torch's own layer does; a U-Net
training step under autocast is the full-precision step; TorchScript scripting is not
supported."""

from __future__ import annotations

import pytest
import torch
from module_db import MODULES, make_module, sample_input

import cplxnet.functional as CF
import cplxnet.nn as cnn
from cplxnet.models import UNet, build_model, make_config, real_twin


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return []


@pytest.mark.parametrize("info", [i for i in MODULES if i.complex_input], ids=lambda i: i.id)
def test_complex_layers_ignore_autocast(info):
    """Every complex entry of the module table (tests/module_db.py): the same outputs, bit for
    bit, with and without CPU bf16 autocast."""
    torch.manual_seed(0)
    module = make_module(info, torch.complex64).eval()
    args, kwargs = sample_input(info, torch.complex64)
    runs = []
    for enabled in (False, True):
        torch.manual_seed(0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            runs.append(_flat(module(*args, **kwargs)))
    assert len(runs[0]) == len(runs[1]) > 0
    for full, low in zip(*runs):
        assert low.dtype == full.dtype and torch.equal(low, full)


def test_keyword_arguments_in_any_order_ignore_autocast_as_positional_ones():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8, dtype=torch.complex64)
    mha = cnn.MultiheadAttention(8, 2, batch_first=True)
    w, real_w = torch.randn(3, 5, 2, dtype=torch.complex64), torch.randn(6, 8)
    calls = [
        (lambda: mha(query=x, key=x, value=x)[0], lambda: mha(x, x, x)[0]),
        (lambda: CF.conv1d(x=x, weight=w), lambda: CF.conv1d(x, w)),
        (lambda: CF.linear(weight=real_w, x=x), lambda: CF.linear(x, real_w)),  # real first
    ]
    for keywords, positional in calls:
        full = positional()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = keywords()
        assert low.dtype == full.dtype and torch.equal(low, full)


IMAGE, SEQ = (2, 4, 8, 8), (2, 5, 8)


@pytest.mark.parametrize(
    "ours, torchs, shape",
    [
        (lambda: cnn.Conv2d(4, 4, 3, dtype=torch.float32), lambda: torch.nn.Conv2d(4, 4, 3), IMAGE),
        (
            lambda: cnn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float32),
            lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True),
            SEQ,
        ),
    ],
)
def test_real_layers_follow_autocast_as_torch(ours, torchs, shape):
    torch.manual_seed(0)
    a, b, x = ours(), torchs(), torch.randn(*shape)
    b.load_state_dict(a.state_dict())
    args = (x, x, x) if isinstance(b, torch.nn.MultiheadAttention) else (x,)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ya, yb = a(*args), b(*args)
    ya, yb = (ya[0], yb[0]) if isinstance(ya, tuple) else (ya, yb)
    assert ya.dtype == yb.dtype == torch.bfloat16 and torch.equal(ya, yb)


def test_a_unet_training_step_under_autocast_is_the_full_precision_step():
    torch.manual_seed(0)
    model, x = UNet(1, 1, 4), torch.randn(2, 1, 16, 16, dtype=torch.complex64)
    grads = []
    for enabled in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = (model(x) - x).abs().pow(2).mean()
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.equal(*grads)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_scripting_is_not_supported():
    with pytest.raises(RuntimeError):
        torch.jit.script(cnn.Linear(2, 2))


def test_the_decoder_head_reads_complex_states_in_full_precision_and_real_ones_as_torch():
    config = make_config("decoder", vocab_size=50, d_model=16, num_heads=2, max_len=32)
    ids = torch.randint(2, 50, (2, 10), generator=torch.Generator().manual_seed(0))
    for cfg, follows in ((config, False), (real_twin(config), True)):
        torch.manual_seed(0)
        model = build_model(cfg).eval()
        full = model(ids)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(ids)
        assert torch.equal(low, full) is not follows  # the real twin's GEMMs run in bf16
