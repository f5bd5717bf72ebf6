"""Every module-table entry under ``torch.func`` (``grad``, ``jvp``, ``vmap``) and forward-mode AD,
in complex128 and eval mode: the hand-written autograd Functions step aside for composed torch
ops there (:func:`cplxnet._utils.is_transformed`), so per-sample gradients, Jacobian-vector
products and batched calls give what plain autograd and a loop give."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.autograd.forward_ad as fw
from module_db import MODULES, make_module, sample_input
from torch.func import functional_call, grad, jvp, vmap

C = torch.complex128
#: torch's own limits, met by its own layers in the same place: its fused LSTM/GRU kernels have
#: no batching rule, and its packed sequences (inputs with ``lengths``) neither a forward-mode
#: rule nor storage under ``grad``
TORCH_NO_VMAP = "Batching rule not implemented for aten::(lstm|gru)"
TORCH_PACKED = "doesn't have storage|forward AD with _pack_padded_sequence"


def _cases(test):
    params = []
    for i in MODULES:
        if not i.complex_input or not i.exact_grad:  # straight-through: a surrogate backward
            continue
        rnn = i.cls.__name__ in ("LSTM", "GRU", "LSTMCell")  # GRUCell is composed: it batches
        args, kwargs = sample_input(i, C)
        packed = i.cls.__name__ in ("LSTM", "GRU") and (len(args) > 1 or "lengths" in kwargs)
        limit = TORCH_NO_VMAP if test == "vmap" and rnn else None
        limit = TORCH_PACKED if test != "vmap" and packed else limit
        params.append(pytest.param(i, limit, id=i.id))
    return params


def _torch_limit(limit):
    """``pytest.raises`` of torch's own error where torch's layer fails too, else nothing."""
    if limit:
        return pytest.raises((RuntimeError, NotImplementedError), match=limit)
    return contextlib.nullcontext()


def _floats(out):
    if isinstance(out, torch.Tensor):
        return [out] if out.is_complex() or out.is_floating_point() else []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _floats(o)]
    return []


def _setup(info):
    torch.manual_seed(0)
    m = make_module(info, dtype=C if info.takes_factory_kwargs else None).eval()
    args, kwargs = sample_input(info, C)
    return m, args, kwargs


def _loss(m, x, args, kwargs):
    return sum((t.abs() ** 2).sum() for t in _floats(m(x, *args[1:], **kwargs)))


@pytest.mark.parametrize(("info", "limit"), _cases("grad"))
def test_func_grad_equals_autograd(info, limit):
    m, args, kwargs = _setup(info)
    x = args[0].detach().requires_grad_()
    _loss(m, x, args, kwargs).backward()
    with _torch_limit(limit):
        got = grad(lambda z: _loss(m, z, args, kwargs))(args[0].detach())
        torch.testing.assert_close(got, x.grad)


@pytest.mark.parametrize(("info", "limit"), _cases("jvp"))
def test_jvp_and_forward_ad_equal_a_central_difference(info, limit):
    m, args, kwargs = _setup(info)
    x = args[0].detach()
    v = torch.randn_like(x)

    def f(z):
        return _floats(m(z, *args[1:], **kwargs))

    h = 1e-6
    want = [(a - b) / (2 * h) for a, b in zip(f(x + h * v), f(x - h * v))]
    with _torch_limit(limit):
        _, tangents = jvp(lambda z: tuple(f(z)), (x,), (v,))
        for got, w in zip(tangents, want):
            torch.testing.assert_close(got, w, rtol=1e-5, atol=1e-5)
    with _torch_limit(limit), fw.dual_level():
        outs = f(fw.make_dual(x, v))
        for out, w in zip(outs, want):
            tangent = fw.unpack_dual(out).tangent
            torch.testing.assert_close(tangent, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("info", "limit"), _cases("vmap"))
def test_vmap_equals_a_loop(info, limit):
    m, args, kwargs = _setup(info)
    x = args[0].detach()
    xs = torch.stack((x, torch.randn_like(x)))
    params = {**dict(m.named_parameters()), **dict(m.named_buffers())}

    def call(z):
        return tuple(_floats(functional_call(m, params, (z, *args[1:]), kwargs)))

    with _torch_limit(limit):
        got = vmap(call)(xs)
    if limit:
        return
    for i in range(2):
        for g, w in zip(got, call(xs[i])):
            torch.testing.assert_close(g[i], w)


@pytest.mark.parametrize("info", [pytest.param(i, id=i.id) for i in MODULES if not i.complex_input])
def test_vmap_over_token_ids_equals_a_loop(info):
    """Layers fed integer ids (embeddings): the index range check, which reads data, steps
    aside under vmap as under tracing."""
    m, args, kwargs = _setup(info)
    ids = args[0]
    stacked = torch.stack((ids, ids.flip(-1)))
    got = vmap(lambda i: m(i, *args[1:], **kwargs))(stacked)
    for k in range(2):
        torch.testing.assert_close(got[k], m(stacked[k], *args[1:], **kwargs))


def test_per_sample_parameter_gradients_of_the_complex_order_embedding():
    """``vmap(grad)`` with respect to the encoding's parameters (per-sample gradients), the
    main torch.func use: its hand-written Function steps aside, and each sample's gradient
    equals autograd's on that sample alone."""
    from cplxnet.encodings import create_encoding

    class Embed(torch.nn.Module):  # functional_call calls forward: the embedding hook here
        def __init__(self):
            super().__init__()
            self.enc = create_encoding("complex-order", d_model=4, vocab_size=7, dtype=C)

        def forward(self, ids):
            return self.enc.embed(ids)

    torch.manual_seed(0)
    wrapper = Embed()
    enc = wrapper.enc
    params = {k: v.detach() for k, v in wrapper.named_parameters()}
    ids = torch.randint(0, 7, (3, 1, 5))

    def loss(p, i):
        return (functional_call(wrapper, p, (i,)).abs() ** 2).sum()

    per_sample = vmap(grad(loss), in_dims=(None, 0))(params, ids)
    for k in range(3):
        enc.zero_grad()
        (enc.embed(ids[k]).abs() ** 2).sum().backward()
        for name, p in wrapper.named_parameters():
            torch.testing.assert_close(per_sample[name][k], p.grad)


@pytest.mark.parametrize("layer", ["MaxPool2d", "AvgPool2d", "Conv2d", "Upsample"])
def test_vmap_over_channels_last_feature_maps_equals_a_loop(layer):
    """Channels-last inputs, whose format torch.func cannot query, go through the contiguous
    forms under vmap."""
    import cplxnet.nn as cnn

    m = {"MaxPool2d": lambda: cnn.MaxPool2d(2), "AvgPool2d": lambda: cnn.AvgPool2d(2),
         "Conv2d": lambda: cnn.Conv2d(3, 2, 3, dtype=C),
         "Upsample": lambda: cnn.Upsample(scale_factor=2, mode="bilinear")}[layer]()  # fmt: skip
    x = torch.randn(2, 4, 3, 6, 6, dtype=C)
    xs = torch.stack([xi.contiguous(memory_format=torch.channels_last) for xi in x])
    got = vmap(m)(xs)
    for k in range(2):
        torch.testing.assert_close(got[k], m(xs[k]))
