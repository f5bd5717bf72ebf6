"""Every public ``forward`` of cplxnet (layers, encodings, the zoo) has a docstring giving the
shapes, and naming every mask or lengths argument it takes."""

from __future__ import annotations

import inspect
import re

import torch

import cplxnet.encodings
import cplxnet.models
import cplxnet.models.common
import cplxnet.nn


def _public_forwards():
    seen = {}
    for mod in (cplxnet.nn, cplxnet.encodings, cplxnet.models, cplxnet.models.common):
        for name in [n for n in dir(mod) if not n.startswith("_")]:
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) and issubclass(obj, torch.nn.Module)):
                continue
            for klass in obj.__mro__:  # the class that defines the forward obj uses
                if "forward" in klass.__dict__:
                    if klass.__module__.startswith("cplxnet"):
                        seen[f"{klass.__module__}.{klass.__qualname__}"] = klass.forward
                    break
    return seen


def test_every_public_forward_documents_shapes_and_masks():
    forwards = _public_forwards()
    assert len(forwards) > 30
    missing = []
    for name, fn in forwards.items():
        doc = inspect.getdoc(fn) or ""
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
        masks = [p for p in params if "mask" in p or p == "lengths"]
        shape = re.search(r"\(\s*(\*|B|L)", doc) is not None
        if not doc or not (shape or "Not used" in doc) or any(m not in doc for m in masks):
            missing.append(name)
    assert not missing, f"forward without shapes or masks in its docstring: {missing}"
