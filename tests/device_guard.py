"""Dispatch modes that make a CPU-only machine see what a GPU would: host syncs and tensors left on
the wrong device.

:class:`HostSyncGuard` records every op that reads *device* data on the host -- on CUDA each is
a device-to-host copy that stalls the stream -- and :class:`DevicePlacementGuard` additionally
records every op whose output is not on the device under test (a bare ``torch.arange`` or
``torch.zeros`` without ``device=`` in a model run on ``meta``).

What counts as host data: tensors the test declares host inputs (the RNN ``lengths``, which torch
takes on the CPU, as ``pack_padded_sequence`` does), tensors built from Python data
(``torch.tensor([...])``), and everything computed only from those; on a non-CPU device under
test, every CPU tensor. Everything else -- the model's inputs, parameters, buffers, tensors
created by factory functions, and all results computed from any of them -- is device data.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten

# ops that hand a value of their input to the host (or need one to size their output)
READ_OPS = frozenset(
    {
        "_local_scalar_dense",  # .item(), int(t), float(t), bool(t), if t:
        "item",
        "is_nonzero",
        "equal",  # torch.equal
        "allclose",
        "nonzero",  # torch.nonzero, torch.where(cond), argwhere
        "nonzero_numpy",
        "argwhere",
        "masked_select",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "bincount",
        "histc",
        "histogram",
    }
)
INDEX_OPS = frozenset({"index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index"})
HOST_FACTORIES = frozenset({"lift_fresh", "lift_fresh_copy"})  # torch.tensor(python data)


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def same_device(a: torch.device, b: torch.device) -> bool:
    """``cuda`` and ``cuda:0`` are the same device (the current one)."""
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def _qualname(frame) -> str:
    return getattr(frame.f_code, "co_qualname", frame.f_code.co_name)  # Python >= 3.11


def _where() -> str:
    """The innermost frames of cplxnet / models / tests code (and torch.nn.utils.rnn) calling."""
    frames, f = [], sys._getframe(2)
    while f is not None and len(frames) < 4:
        name = f.f_code.co_filename
        if not name.endswith("device_guard.py") and (
            "/cplxnet/" in name or "/models/" in name or "/tests/" in name or "nn/utils/rnn" in name
        ):
            short = name.split("/")[-2] + "/" + name.split("/")[-1]
            frames.append(f"{short}:{f.f_lineno} {_qualname(f)}")
        f = f.f_back
    return " <- ".join(frames) or "?"


def _qualnames() -> set[str]:
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(_qualname(f))
        f = f.f_back
    return names


class _TensorSet:
    """A set of tensors by identity, holding them weakly (``weakref.WeakSet`` compares tensors
    with ``==``)."""

    def __init__(self, tensors: Iterable[torch.Tensor] = ()) -> None:
        self._refs: dict[int, weakref.ref] = {}
        for t in tensors:
            self.add(t)

    def add(self, t: torch.Tensor) -> None:
        self._refs[id(t)] = weakref.ref(t)

    def __contains__(self, t: torch.Tensor) -> bool:
        ref = self._refs.get(id(t))
        return ref is not None and ref() is t


class HostSyncGuard(TorchDispatchMode):
    """Records every host read of device data (see the module docstring) while active; on exit
    raises an AssertionError listing them (``check=False``: only record, in :attr:`found`).

    Args:
        device: the device under test (its tensors are device data).
        host: tensors to treat as host inputs (e.g. the ``lengths`` of an RNN).
        allow: qualified function names (``"RealLSTM.forward"``) under which a read is a declared
            known sync: recorded in :attr:`allowed`, not an error.
    """

    def __init__(
        self,
        device: torch.device | str = "cpu",
        host: Iterable[torch.Tensor] = (),
        allow: Iterable[str] = (),
        check: bool = True,
    ) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.allow = frozenset(allow)
        self.check = check
        self._host = _TensorSet(host)
        self.found: list[str] = []
        self.allowed: list[str] = []
        self._patched: dict = {}

    def is_host(self, t: torch.Tensor) -> bool:
        """Host data: declared, from Python data or computed from those only (or, on a non-CPU
        device under test, any CPU tensor: reading it costs no sync)."""
        return t in self._host or (t.device.type == "cpu" and self.device.type != "cpu")

    # tolist() reads the data without dispatching an op: wrapped while active (numpy() needs a
    # CPU tensor, so device data reaches it only through a copy to the host, which is recorded)
    def __enter__(self):
        guard = self
        for name in ("tolist",):
            original = getattr(torch.Tensor, name)
            self._patched[name] = original

            def wrapper(t, *args, _original=original, _name=name, **kwargs):
                if not guard.is_host(t):
                    guard._record(f"Tensor.{_name}")
                return _original(t, *args, **kwargs)

            setattr(torch.Tensor, name, wrapper)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._patched.items():
            setattr(torch.Tensor, name, original)
        self._patched.clear()
        out = super().__exit__(*exc)
        if self.check and exc[0] is None:
            self.assert_clean()
        return out

    def assert_clean(self) -> None:
        if self.found:
            lines = "\n  ".join(dict.fromkeys(self.found))  # unique, in order
            what = "host read(s) of device data or tensor(s) off the device"
            raise AssertionError(f"{len(self.found)} {what}:\n  {lines}")

    def _record(self, what: str) -> None:
        entry = f"{what} at {_where()}"
        if self.allow and self.allow & _qualnames():
            self.allowed.append(entry)
        else:
            self.found.append(entry)

    def _reads(self, func, args, kwargs) -> str | None:
        """Why ``func(*args, **kwargs)`` reads device data on the host, or None."""
        name = func.overloadpacket.__name__
        inputs = _tensors((args, kwargs))
        device_inputs = [t for t in inputs if not self.is_host(t)]
        if not device_inputs:
            return None
        if name in READ_OPS:
            return f"aten.{name}"
        if name in INDEX_OPS:
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if any(
                isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
                for i in indices or ()
            ):
                return f"aten.{name} with a boolean mask (nonzero)"
        repeats_tensor = name == "repeat_interleave" and func is not aten.repeat_interleave.self_int
        if repeats_tensor and kwargs.get("output_size") is None:
            return "aten.repeat_interleave without output_size"
        if name in ("_to_copy", "copy_", "_copy_from", "to"):
            src = args[1] if name == "copy_" else args[0]
            dst = args[0].device if name == "copy_" else kwargs.get("device")
            if dst is not None and torch.device(dst).type == "cpu" and src.device.type != "cpu":
                return f"aten.{name} to the host"
        return None

    def _mark(self, func, args, kwargs, out) -> None:
        inputs = _tensors((args, kwargs))
        name = func.overloadpacket.__name__
        if name in HOST_FACTORIES or (inputs and all(t in self._host for t in inputs)):
            for t in _tensors(out):
                self._host.add(t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        why = self._reads(func, args, kwargs)
        if why is not None:
            self._record(why)
        out = func(*args, **kwargs)
        self._mark(func, args, kwargs, out)
        return out


class DevicePlacementGuard(HostSyncGuard):
    """:class:`HostSyncGuard` that also records every op output (a created tensor or a result)
    not on ``device``, unless it is host data; run a model built on ``torch.device("meta")`` with
    meta inputs and any tensor created without ``device=`` shows up as a CPU output."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = super().__torch_dispatch__(func, types, args, kwargs)
        for t in _tensors(out):
            if not same_device(t.device, self.device) and t not in self._host:
                self._record(f"aten.{func.overloadpacket.__name__} made a tensor on {t.device}")
        return out
