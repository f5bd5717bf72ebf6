"""No host sync in a forward or backward pass: every zoo model (every registered encoding, complex
and real, training and eval mode) and every module of the module table, given valid input.

A host sync (``.item()``, ``int(t)``, ``torch.equal``, ``nonzero``, boolean-mask indexing, ...)
stalls a CUDA stream once per batch; :class:`device_guard.HostSyncGuard` records each on a
CPU-only machine. Runs on ``--device`` (default cpu).

The one declared exception is packed sequences: torch's ``pack_padded_sequence`` (cuDNN's
variable-length RNN) takes the lengths on the host, so an RNN given lengths on the device, as the
LSTM family derives them from the padding mask, copies those ``(B,)`` lengths to the host once
per forward (and torch's ``pad_packed_sequence`` copies its sort indices to the host).
"""

from __future__ import annotations

import inspect

import pytest
import torch
import zoo_cases
from device_guard import HostSyncGuard
from module_db import MODULES, make_module, sample_input

from cplxnet import nn as cnn
from cplxnet.utils import check_indices

# where the packed-sequence paths read their lengths on the host (the declared exception)
PACKED_LENGTHS = (
    "_check_lengths",
    "RealLSTM.forward",
    "pack_padded_sequence",
    "pad_packed_sequence",  # torch copies the sort indices to the host there
)


@pytest.mark.parametrize("case", zoo_cases.CASES, ids=zoo_cases.IDS)
def test_zoo_model_forward_and_backward_have_no_host_sync(case, device):
    family = case[0]
    model = zoo_cases.build(case, device)
    ids, mask = zoo_cases.batch(device)
    allow = PACKED_LENGTHS if family == "lstm" else ()
    for training in (True, False):
        model.train(training)
        model.zero_grad()
        with HostSyncGuard(device, allow=allow) as guard:
            zoo_cases.loss(model(ids, mask)).backward()
        if family == "lstm":  # the declared exception is real: drop it when it goes away
            assert guard.allowed, "the LSTM family no longer reads lengths on the host"
    with HostSyncGuard(device, allow=allow), torch.no_grad():  # inference without a mask
        model(ids)


def _host_inputs(module: torch.nn.Module, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """Arguments named ``lengths``: host data by torch's convention (pack_padded_sequence)."""
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs).arguments
    except TypeError:
        return []
    value = bound.get("lengths")
    return [value] if isinstance(value, torch.Tensor) else []


def _to_host(module, args, kwargs):
    """The inputs with ``lengths`` on the CPU (torch's convention for packed sequences)."""
    names = list(inspect.signature(module.forward).parameters)
    args = tuple(
        a.cpu() if i < len(names) and names[i] == "lengths" and isinstance(a, torch.Tensor) else a
        for i, a in enumerate(args)
    )
    if isinstance(kwargs.get("lengths"), torch.Tensor):
        kwargs = {**kwargs, "lengths": kwargs["lengths"].cpu()}
    return args, kwargs


@pytest.mark.parametrize("info", MODULES, ids=[i.id for i in MODULES])
def test_module_forward_and_backward_have_no_host_sync(info, device):
    module = make_module(info, dtype=torch.complex64, device=device)
    args, kwargs = _to_host(module, *sample_input(info, torch.complex64, device))
    host = _host_inputs(module, args, kwargs)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.is_complex()]
    for a in leaves:
        a.requires_grad_()
    for training in (True, False):
        module.train(training)
        with HostSyncGuard(device, host=host, allow=PACKED_LENGTHS if host else ()):
            out = zoo_cases.loss(module(*args, **kwargs))
            if out.requires_grad:
                out.backward()


# ---- the guard itself: each kind of host read is caught, device-only work is not -------------
READS = {
    "item": lambda x, i: x.sum().item(),
    "int": lambda x, i: int(i.max()),
    "bool": lambda x, i: bool((x.abs() > 0).all()),
    "if": lambda x, i: 1 if (i > 0).any() else 0,
    "equal": lambda x, i: torch.equal(i, i),
    "allclose": lambda x, i: torch.allclose(x, x),
    "nonzero": lambda x, i: (i > 2).nonzero(),
    "where": lambda x, i: torch.where(i > 2),
    "bool_index": lambda x, i: x[x.abs() > 1],
    "bool_setitem": lambda x, i: x.clone().__setitem__(x.abs() > 1, 0),
    "masked_select": lambda x, i: torch.masked_select(x, x.abs() > 1),
    "unique": lambda x, i: torch.unique(i),
    "repeat_interleave": lambda x, i: torch.repeat_interleave(i.clamp(0, 2)),
    "bincount": lambda x, i: torch.bincount(i.clamp(min=0)),
    "tolist": lambda x, i: i.tolist(),
    "check_lengths": lambda x, i: cnn.LSTM(3, 2, batch_first=True, device=x.device)(
        x[None, :, :3].to(torch.complex64), lengths=i[:1].clamp(1, 4)
    ),
}


@pytest.mark.parametrize("read", READS, ids=list(READS))
def test_the_guard_catches_each_kind_of_host_read(read, device):
    x = torch.randn(4, 5, device=device)
    i = torch.tensor([3, 1, 4, 1], device=device)
    with pytest.raises(AssertionError, match="host read"), HostSyncGuard(device):
        READS[read](x, i)


def test_the_guard_allows_host_data_and_device_only_work(device):
    x = torch.randn(4, 5, device=device)
    lengths = torch.tensor([3, 2, 1, 1])  # host input, as torch takes packed-sequence lengths
    with HostSyncGuard(device, host=[lengths]) as guard:
        int(lengths.max()), lengths.tolist()  # host data: fine
        int(torch.tensor([1, 2]).sum())  # built from Python data: fine
        y = torch.where(x > 0, x, 0).masked_fill(x < -1, 2).softmax(-1)
        torch._assert_async((y >= 0).all())  # no sync on a device
        torch.repeat_interleave(torch.arange(3, device=device), 2, output_size=6)
        y.sum().requires_grad_().backward()
    assert not guard.found


def test_index_checks_read_nothing_on_the_host_and_still_name_the_bad_index(device):
    ids = torch.tensor([[0, 4], [2, 3]], device=device)
    with HostSyncGuard(device):
        check_indices(ids, 5, "Owner", "ids")
    if device.type == "cpu":  # on an accelerator a bad index is a device-side assertion
        with pytest.raises(IndexError, match="Owner: index 5 in ids is out of range .* 0..4"):
            check_indices(ids + 1, 5, "Owner", "ids")
