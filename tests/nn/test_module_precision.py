"""Precision changes (``.to(dtype)``, ``.double()``, ``.half()``, ...) over every module of
``tests/module_db.py``: a conversion that would change a parameter's or buffer's dtype is refused
with one clear ``TypeError`` before anything is converted; whatever happens, ``module.dtype``
matches the parameters and the module still runs on inputs of its dtype."""

from __future__ import annotations

import pytest
import torch
from module_db import MODULES, make_module, output_tensors, sample_input

from cplxnet._utils import real_dtype

CONVERSIONS = {
    "double": lambda m: m.double(),
    "float": lambda m: m.float(),
    "half": lambda m: m.half(),
    "bfloat16": lambda m: m.bfloat16(),
    "to-complex128": lambda m: m.to(torch.complex128),
    "to-complex64": lambda m: m.to(torch.complex64),
    "to-float64": lambda m: m.to(torch.float64),
    "to-dtype-kw": lambda m: m.to(dtype=torch.complex128),
    "type-float64": lambda m: m.type(torch.float64),
}


def _state(m):
    return {k: v.clone() for k, v in [*m.named_parameters(), *m.named_buffers()]}


def _consistent(m, dtype):
    for name, t in [*m.named_parameters(), *m.named_buffers()]:
        if t.is_complex():
            assert t.dtype == dtype, (name, t.dtype, dtype)
        elif t.is_floating_point():
            assert t.dtype == real_dtype(dtype), (name, t.dtype, dtype)


@pytest.mark.filterwarnings("ignore:Complex modules are a new feature")
@pytest.mark.parametrize("conversion", list(CONVERSIONS))
@pytest.mark.parametrize("info", MODULES, ids=[i.id for i in MODULES])
def test_precision_changes_are_refused_or_harmless(info, conversion):
    torch.manual_seed(0)
    m = make_module(info, torch.complex64)
    built = getattr(m, "dtype", torch.complex64)
    before = _state(m)
    try:
        CONVERSIONS[conversion](m)
    except TypeError as err:
        message = str(err)
        assert "cannot change the precision of a cplxnet module" in message, message
        assert "dtype=" in message or "drop the dtype conversion" in message, message
        assert "\n" not in message
        after = _state(m)  # nothing was converted
        assert after.keys() == before.keys()
        for k in before:
            assert after[k].dtype == before[k].dtype and torch.equal(after[k], before[k]), k
    if hasattr(m, "dtype"):
        assert m.dtype == built
    _consistent(m, built)
    args, kwargs = sample_input(info, torch.complex64)
    m.eval()
    m(*args, **kwargs)  # still runs at the precision it was built for


@pytest.mark.filterwarnings("ignore:Complex modules are a new feature")
def test_refusal_message_names_the_fix():
    from cplxnet import nn as cnn

    norm = cnn.LayerNorm(4)
    with pytest.raises(
        TypeError,
        match=r"LayerNorm: cannot change the precision .* build it with "
        r"LayerNorm\(\.\.\., dtype=torch\.complex128\) instead",
    ):
        norm.double()
    with pytest.raises(TypeError, match="already is torch.complex64: drop the dtype conversion"):
        norm.to(torch.float32)  # would make the complex bias real
    norm.to("cpu")  # moving between devices is unaffected
    twin = cnn.LayerNorm(4, dtype=torch.float32)  # a real twin converts as torch's layers
    with pytest.raises(TypeError, match=r"LayerNorm\(\.\.\., dtype=torch\.complex64\)"):
        twin.to(torch.complex64)
    assert twin.double().dtype == torch.float64 and twin.weight.dtype == torch.float64


@pytest.mark.filterwarnings("ignore:Complex modules are a new feature")
@pytest.mark.parametrize("info", MODULES, ids=[i.id for i in MODULES])
def test_to_the_module_s_own_dtype_changes_nothing(info):
    """``model.to(device, dtype)`` with the model's own dtype, as generic training code calls it:
    no tensor changes dtype or value (the real gains of a norm stay real), inside a container
    with torch's own complex layer too, and the output is the same."""
    torch.manual_seed(0)
    m = make_module(info, torch.complex64)
    args, kwargs = sample_input(info, torch.complex64)
    m.eval()
    before, out = _state(m), m(*args, **kwargs)
    for convert in (lambda mod: mod.to(torch.complex64), lambda mod: mod.to("cpu", torch.complex64),
                    lambda mod: mod.to(device="cpu", dtype=torch.complex64)):  # fmt: skip
        assert convert(m) is m
        after = _state(m)
        assert after.keys() == before.keys()
        for k in before:
            assert after[k].dtype == before[k].dtype and torch.equal(after[k], before[k]), k
    again = m(*args, **kwargs)
    for a, b in zip(output_tensors(out, False), output_tensors(again, False)):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    mixed = torch.nn.Sequential(torch.nn.Linear(2, 2, dtype=torch.complex64), m)
    mixed.to(torch.complex64)
    _consistent(m, torch.complex64)
