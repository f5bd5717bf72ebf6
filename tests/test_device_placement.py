"""Device-agnostic by construction: every tensor a module, an encoding or a zoo model creates
follows its inputs' device.

Each module of the module table and each zoo model (every registered encoding, complex and real)
is built on ``torch.device("meta")`` and run forward and backward, in training and eval mode, on
meta inputs under
:class:`device_guard.DevicePlacementGuard`, which records every op output not on meta: a
``torch.arange`` / ``torch.zeros`` / ``torch.full`` / ``torch.tensor`` without ``device=``
makes a CPU tensor there (and on a GPU, a tensor on the wrong device or a host-to-device copy
per call). Host data (tensors built from Python data and computed only from those) may stay on
the CPU. Every parameter and buffer (caches such as angle tables included) must be on meta
before and after the pass. Meta tensors have no data, so the run also fails on any host read.

Packed sequences need their lengths' values on the host, which meta tensors do not have: RNN
layers run here without ``lengths`` (their packed path is covered by the host-sync test) and the
LSTM family's forward is skipped, saying so.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import zoo_cases
from device_guard import DevicePlacementGuard
from module_db import MODULES, make_module, sample_input

META = torch.device("meta")


def _assert_on_meta(module: torch.nn.Module) -> None:
    tensors = [*module.named_parameters(), *module.named_buffers()]
    wrong = [f"{n} on {t.device}" for n, t in tensors if t.device != META]
    assert not wrong, f"parameters / buffers not on meta: {wrong}"


def _meta_inputs(info, module):
    """The sample input on meta. ``lengths`` are left out: packed sequences need their values
    on the host (torch's ``pad_packed_sequence`` also copies its indices there), which meta
    tensors do not have; the full-length path still runs every other op of the layer."""
    args, kwargs = sample_input(info, torch.complex64, META)
    names = list(inspect.signature(module.forward).parameters)
    args = tuple(a for i, a in enumerate(args) if i >= len(names) or names[i] != "lengths")
    return args, {k: v for k, v in kwargs.items() if k != "lengths"}


@pytest.mark.parametrize("info", MODULES, ids=[i.id for i in MODULES])
def test_module_creates_every_tensor_on_its_inputs_device(info):
    module = make_module(info, dtype=torch.complex64, device=META)
    _assert_on_meta(module)
    args, kwargs = _meta_inputs(info, module)
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_complex():
            a.requires_grad_()
    for training in (True, False):
        module.train(training)
        with DevicePlacementGuard(META):
            out = zoo_cases.loss(module(*args, **kwargs))
            if out.requires_grad:
                out.backward()
    _assert_on_meta(module)


@pytest.mark.parametrize("case", zoo_cases.CASES, ids=zoo_cases.IDS)
def test_zoo_model_creates_every_tensor_on_its_inputs_device(case):
    model = zoo_cases.build(case, META)
    _assert_on_meta(model)
    if case[0] == "lstm":
        pytest.skip(
            "LSTM family: packed sequences need the lengths' values on the host (torch's "
            "pack_padded_sequence), which meta tensors do not have; its layers are checked by "
            "the module-table cases with host lengths"
        )
    ids, mask = zoo_cases.batch(META)
    for training in (True, False):
        model.train(training)
        with DevicePlacementGuard(META):
            zoo_cases.loss(model(ids, mask)).backward()
    _assert_on_meta(model)
