"""Layers with a torch counterpart are drop-ins for it with a real ``dtype``:
:class:`TorchCounterpart`.

A cplxnet layer ``L`` declared as ``class L(TorchCounterpart, ..., torch_class=torch.nn.L)`` and
built with a real floating ``dtype`` is torch's layer: an instance of a subclass of both ``L``
and ``torch.nn.L`` whose methods (``__init__``, ``forward``, ``reset_parameters``,
``extra_repr``, ``_apply``, state-dict hooks, ...) are all torch's. So its state_dict keys,
shapes and dtypes are torch's, torch's state_dict loads into it, and on the same real input it
computes torch's function (with torch's gradients), while ``isinstance(layer, L)`` holds. Built
with a complex dtype (or the default), ``L`` is cplxnet's complex layer, unchanged.

The constructor takes cplxnet's arguments (which are torch's, in torch's order, with
cplxnet's own options keyword-only or after torch's); with a real dtype they go to torch by name.
An option torch lacks, given with a value other than its default, is a ``TypeError`` naming it.

Examples::

    >>> import torch, cplxnet.nn as cnn
    >>> layer = cnn.Linear(5, 3, dtype=torch.float64)
    >>> layer.load_state_dict(torch.nn.Linear(5, 3, dtype=torch.float64).state_dict())
    <All keys matched successfully>
    >>> cnn.Linear(5, 3).weight.dtype          # the default: complex
    torch.complex64
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

__all__ = ["TorchCounterpart"]

_KEEP = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__init__",
         "__new__", "__init_subclass__", "__annotations__", "_torch_class", "_real_class",
         "_signature"}  # fmt: skip


class TorchCounterpart:
    """Mixin of a complex layer with a torch counterpart ``torch_class`` (a class keyword): built
    with a real floating ``dtype``, the layer is ``torch_class``'s (see the module docstring)."""

    _torch_class: type[nn.Module]
    _real_class: type
    _signature: inspect.Signature

    def __init_subclass__(cls, torch_class: type[nn.Module] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if torch_class is not None:
            cls._torch_class = torch_class
            cls._signature = inspect.signature(cls.__init__)
            cls._real_class = _real_class(cls, torch_class)

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        real = cls.__dict__.get("_real_class")
        if real is not None and (args or kwargs):
            dtype = cls._signature.bind(None, *args, **kwargs).arguments.get("dtype")
            if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
                return super().__new__(real)
        return super().__new__(cls)


def _torch_arguments(cls: type, args: tuple, kwargs: dict) -> dict[str, Any]:
    """cplxnet's arguments by name, for torch's constructor; a cplxnet option torch lacks, given
    with a value other than its default, is a TypeError naming it."""
    bound = cls._signature.bind(None, *args, **kwargs)
    params = cls._signature.parameters
    theirs = _parameter_names(cls._torch_class)
    out, extra = {}, []
    for name, value in list(bound.arguments.items())[1:]:
        if name in theirs:
            out[name] = value
        elif value is not params[name].default:
            extra.append(name)
    if extra:
        owner = cls.__name__
        raise TypeError(
            f"{owner}: {', '.join(extra)} appl{'ies' if len(extra) == 1 else 'y'} to the "
            "complex layer only; with a real dtype "
            f"{owner} is torch.nn.{cls._torch_class.__name__}, which has no such option: drop "
            f"{'it' if len(extra) == 1 else 'them'} or use a complex dtype"
        )
    return out


def _parameter_names(torch_class: type) -> set[str]:
    """The named parameters of ``torch_class``'s constructor, through ``*args, **kwargs``
    constructors (``torch.nn.LSTM`` passes them on to ``RNNBase``)."""
    names: set[str] = set()
    for klass in torch_class.__mro__:
        if "__init__" not in vars(klass):
            continue
        kinds = {}
        for name, p in inspect.signature(klass.__init__).parameters.items():
            kinds[name] = p.kind
        names |= {n for n, k in kinds.items() if k not in (k.VAR_POSITIONAL, k.VAR_KEYWORD)}
        if inspect.Parameter.VAR_KEYWORD not in kinds.values():
            break
    return names


def _real_class(cls: type, torch_class: type[nn.Module]) -> type:
    """A subclass of ``cls`` and ``torch_class`` with every method of ``torch_class``."""
    namespace: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass in torch_class.__mro__ or klass is TorchCounterpart:
            continue
        for name in vars(klass):
            if name not in _KEEP and name not in namespace and hasattr(torch_class, name):
                namespace[name] = inspect.getattr_static(torch_class, name)

    def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        torch_class.__init__(self, **_torch_arguments(cls, args, kwargs))

    def dtype(self: nn.Module) -> torch.dtype:
        """The dtype of the layer's parameters (a real dtype: the layer is torch's)."""
        tensors = [*self.parameters(), *self.buffers()]
        return next((t.dtype for t in tensors if t.is_floating_point()), torch.get_default_dtype())

    namespace.update(
        __init__=__init__,
        dtype=property(dtype),
        __module__=cls.__module__,
        __qualname__=f"{cls.__qualname__}._real_class",
        __doc__=f"{cls.__name__} with a real dtype: torch.nn.{torch_class.__name__}.",
    )
    return type(cls.__name__, (cls, torch_class), namespace)
