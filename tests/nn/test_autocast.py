"""Autocast, as the README states it: cplxnet's layers on complex input ignore autocast, as torch's
complex ops do, also those computed on torch's real kernels (convolutions, attention, split-gate
RNNs) and the whitening norms; with a real dtype a layer follows autocast as torch's own layer
does; a U-Net trains under autocast; TorchScript scripting is not supported."""

from __future__ import annotations

import pytest
import torch

import cplxnet.nn as cnn
from cplxnet.models import UNet


def _c(*shape):
    return torch.randn(*shape, dtype=torch.complex64)


IMAGE, SIGNAL, VOLUME, SEQ = (2, 4, 8, 8), (2, 4, 16), (1, 2, 4, 4, 4), (2, 5, 8)
LAYERS = {  # name: (layer, input shape)
    "Conv1d": (lambda: cnn.Conv1d(4, 4, 3), SIGNAL),
    "Conv2d": (lambda: cnn.Conv2d(4, 4, 3), IMAGE),
    "Conv3d": (lambda: cnn.Conv3d(2, 2, 3), VOLUME),
    "ConvTranspose1d": (lambda: cnn.ConvTranspose1d(4, 4, 3), SIGNAL),
    "ConvTranspose2d": (lambda: cnn.ConvTranspose2d(4, 4, 3), IMAGE),
    "ConvTranspose3d": (lambda: cnn.ConvTranspose3d(2, 2, 3), VOLUME),
    "MultiheadAttention": (lambda: cnn.MultiheadAttention(8, 2, batch_first=True), SEQ),
    "TransformerEncoderLayer": (
        lambda: cnn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True),
        SEQ,
    ),
    "LSTM": (lambda: cnn.LSTM(8, 8, batch_first=True), SEQ),
    "GRU": (lambda: cnn.GRU(8, 8, batch_first=True), SEQ),
    "LSTMCell": (lambda: cnn.LSTMCell(8, 8), (2, 8)),
    "GRUCell": (lambda: cnn.GRUCell(8, 8), (2, 8)),
    "Linear": (lambda: cnn.Linear(8, 8), SEQ),
    "LSTM analytic": (lambda: cnn.LSTM(8, 8, batch_first=True, gate="analytic"), SEQ),
    "UnitaryRNN": (lambda: cnn.UnitaryRNN(8, 8, batch_first=True), SEQ),
    "LayerNorm": (lambda: cnn.LayerNorm(8), SEQ),
    "LayerNorm whiten": (lambda: cnn.LayerNorm(8, mode="whiten"), SEQ),
    "RMSNorm": (lambda: cnn.RMSNorm(8), SEQ),
    "BatchNorm2d": (lambda: cnn.BatchNorm2d(4), IMAGE),
    "GroupNorm": (lambda: cnn.GroupNorm(2, 4), IMAGE),
    "Upsample": (lambda: cnn.Upsample(scale_factor=2, mode="bilinear"), IMAGE),
    "AvgPool2d": (lambda: cnn.AvgPool2d(2), IMAGE),
    "MaxPool2d": (lambda: cnn.MaxPool2d(2), IMAGE),
    "Cardioid": (lambda: cnn.Cardioid(), IMAGE),
    "ModReLU": (lambda: cnn.ModReLU(8), SEQ),
}


def _outputs(name, make, shape):
    torch.manual_seed(0)
    layer, x = make(), _c(*shape)
    args = (x, x, x) if name == "MultiheadAttention" else (x,)
    runs = []
    for enabled in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            y = layer(*args)
        runs.append(y[0] if isinstance(y, tuple) else y)
    return runs


@pytest.mark.parametrize("name", LAYERS)
def test_complex_layers_ignore_autocast(name):
    full, low = _outputs(name, *LAYERS[name])
    assert low.dtype == torch.complex64 and torch.equal(low, full)


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
    model, x = UNet(1, 1, 4), _c(2, 1, 16, 16)
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
