"""Every public module class of :mod:`cplxnet.nn` and :mod:`cplxnet.encodings` has an
``Examples::`` block in its docstring (as torch's layers do), and every block runs as a doctest
and prints what it shows."""

from __future__ import annotations

import doctest
import inspect
import re

import pytest
import torch

import cplxnet
import cplxnet.encodings
import cplxnet.nn


def _public_modules() -> list[type]:
    out = []
    for package in (cplxnet.nn, cplxnet.encodings):
        for name in getattr(package, "__all__", None) or sorted(vars(package)):
            obj = getattr(package, name)
            if (
                inspect.isclass(obj)
                and issubclass(obj, torch.nn.Module)
                and obj.__module__.startswith(package.__name__)
                and not name.startswith("_")
            ):
                out.append(obj)
    return out


PUBLIC = _public_modules()
_BLOCK = re.compile(r"^( *)Examples::\n\n((?:\1    .*\n|\n)+)", re.M)


def examples(cls: type) -> str | None:
    """The text of the ``Examples::`` block of ``cls``'s own docstring (None if it has none)."""
    doc = cls.__dict__.get("__doc__") or ""
    match = _BLOCK.search(doc if doc.endswith("\n") else doc + "\n")
    return match.group(2) if match else None


def test_the_list_holds_the_main_layers():
    names = {cls.__name__ for cls in PUBLIC}
    assert {
        "Linear",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose2d",
        "Embedding",
        "LSTM",
        "GRU",
        "LSTMCell",
        "GRUCell",
        "UnitaryRNNCell",
        "LayerNorm",
        "BatchNorm1d",
        "RMSNorm",
        "MultiheadAttention",
        "TransformerEncoderLayer",
        "TransformerEncoder",
        "Transformer",
        "ModReLU",
        "Cardioid",
        "MaxPool2d",
        "AvgPool2d",
        "MSELoss",
        "Dropout",
        "RotaryEncoding",
        "ComplexOrderEncoding",
        "SinusoidalEncoding",
    } <= names, sorted(names)


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_public_module_has_a_runnable_examples_block(cls):
    block = examples(cls)
    assert block is not None, f"{cls.__module__}.{cls.__name__} has no Examples:: block"
    module = inspect.getmodule(cls)
    globs = {**vars(module), "torch": torch, "cplxnet": cplxnet}
    test = doctest.DocTestParser().get_doctest(
        block, globs, f"{cls.__qualname__}.Examples", module.__file__, 0
    )
    assert test.examples, f"{cls.__name__}'s Examples:: block holds no >>> line"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    torch.manual_seed(0)
    runner.run(test, out=out.append, clear_globs=True)
    assert runner.failures == 0, "".join(out)
