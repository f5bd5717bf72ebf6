"""Every public module class of :mod:`cplxnet.nn` and :mod:`cplxnet.encodings` has an
``Examples::`` block in its docstring (as torch's layers do), and every block runs as a doctest
and prints what it shows."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
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


def examples(cls) -> str | None:
    """The text of the ``Examples::`` block of ``cls``'s own docstring, a class's or a
    function's (None if it has none)."""
    doc = (cls.__dict__.get("__doc__") if isinstance(cls, type) else cls.__doc__) or ""
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


def _run_examples(obj, name: str) -> None:
    """Run ``obj``'s ``Examples::`` block in its module's namespace (with ``torch`` and
    ``cplxnet``); every ``>>>`` line must give its shown output."""
    block = examples(obj)
    assert block is not None, f"{name} has no Examples:: block"
    module = inspect.getmodule(obj)
    globs = {**vars(module), "torch": torch, "cplxnet": cplxnet}
    test = doctest.DocTestParser().get_doctest(block, globs, name, module.__file__, 0)
    assert test.examples, f"{name}'s Examples:: block holds no >>> line"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    torch.manual_seed(0)
    runner.run(test, out=out.append, clear_globs=True)
    assert runner.failures == 0, "".join(out)


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_public_module_has_a_runnable_examples_block(cls):
    _run_examples(cls, f"{cls.__module__}.{cls.__qualname__}")


def _functions_with_examples() -> list:
    """Public functions anywhere in cplxnet whose docstring has an ``Examples::`` block."""
    found = {}
    for info in pkgutil.walk_packages(cplxnet.__path__, "cplxnet."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, f in vars(module).items():
            if (
                inspect.isfunction(f)
                and f.__module__ == module.__name__
                and not name.startswith("_")
                and examples(f) is not None
            ):
                found[f"{module.__name__}.{name}"] = f
    return sorted(found.items())


FUNCTIONS = _functions_with_examples()


def test_the_function_list_holds_the_documented_functions():
    assert {"cplxnet.utils.update_bn", "cplxnet.tasks.lm.generate.generate"} <= set(dict(FUNCTIONS))


@pytest.mark.parametrize("name, f", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_a_function_examples_block_runs(name, f):
    _run_examples(f, name)
