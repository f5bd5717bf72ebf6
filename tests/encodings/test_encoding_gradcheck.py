"""torch.autograd.gradcheck of every encoding in complex128 (float64 for its real parameters),
w.r.t. complex inputs and every parameter at once."""

import pytest
import torch
from torch import nn
from torch.func import functional_call

from cplxnet._utils import pack
from cplxnet.encodings import create_encoding

C, R = torch.complex128, torch.float64
CTX = dict(d_model=4, num_heads=2, vocab_size=5, max_len=4)


class Hook(nn.Module):
    """Calls one hook of the wrapped encoding, so functional_call can swap its parameters."""

    def __init__(self, enc, fn):
        super().__init__()
        self.enc, self.fn = enc, fn

    def forward(self, *args):
        return self.fn(self.enc, *args)


def gradcheck_hook(enc, fn, inputs, fast_mode=False):
    hook = Hook(enc, fn)
    names = [n for n, _ in hook.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in hook.named_parameters()]
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    n = len(inputs)

    def f(*args):
        return functional_call(hook, dict(zip(names, args[n:])), tuple(args[:n]))

    diff = [t for t in inputs if t.requires_grad] + params
    assert diff, "nothing to check"
    assert torch.autograd.gradcheck(f, (*inputs, *params), atol=1e-6, fast_mode=fast_mode)


def x_input(kind, length=5):
    return [torch.randn(2, length, 4, dtype=kind)]


INPUT_CASES = [
    ("trainable", {}, 4),
    ("trainable", {"extrapolate": "hierarchical"}, 7),
    ("hierarchical", {}, 9),
    ("sinusoidal", {}, 6),
    ("floater", {"hidden": 3}, 4),
    ("multiplicative", {}, 5),
    ("multiplicative", {"kind": "trainable"}, 4),
]


@pytest.mark.parametrize("name,opts,length", INPUT_CASES)
@pytest.mark.parametrize("kind", [C, R])
def test_input_site(name, opts, length, kind):
    enc = create_encoding(name, dtype=kind, **CTX, **opts)
    gradcheck_hook(enc, lambda e, x: e.encode_input(x), x_input(kind, length))


@pytest.mark.parametrize(
    "name,opts",
    [
        ("complex-order", {}),
        ("complex-order", {"frequency": "shared", "amplitude": "dimension", "padding_idx": 0}),
        ("complex-order", {"frequency": "dimension", "amplitude": "shared", "phase": False}),
        ("complex-vanilla", {}),
    ],
)
@pytest.mark.parametrize("kind", [C, R])
def test_token_site(name, opts, kind):
    enc = create_encoding(name, dtype=kind, **CTX, **opts)
    ids = torch.tensor([[1, 2, 0], [3, 3, 4]])
    gradcheck_hook(enc, lambda e: e.embed(ids), [])


QK_CASES = [
    ("rotary", {"rotate_values": True}),
    ("rotary", {"rotate_values": True, "scaling": "yarn", "factor": 4.0}),
    ("xpos", {"scale_base": 4.0}),
    ("xpos", {"scale_base": 4.0, "scaling": "linear", "factor": 2.0}),
]


@pytest.mark.parametrize("name,opts", QK_CASES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("kind", [C, R])
def test_qk_site(name, opts, layout, kind):
    enc = create_encoding(name, dtype=kind, layout=layout, **CTX, **opts)
    qkv = [torch.randn(1, 2, 3, 2, dtype=kind) for _ in range(3)]  # head width 4 / 2 heads
    gradcheck_hook(enc, lambda e, q, k, v: e.rotate(q, k, v), qkv)


LOGIT_CASES = [
    ("shaw", {"max_relative_position": 1}),
    ("xl", {}),
    ("t5", {"num_buckets": 8, "max_distance": 6}),
    ("alibi", {}),
    ("alibi", {"causal": True}),
    ("deberta", {"max_relative_positions": 2}),
    ("deberta", {"max_relative_positions": 8, "position_buckets": 4, "p2c_index": "paper"}),
    ("kerple", {"causal": True}),
    ("kerple", {"kind": "power"}),
    ("fire", {"threshold": 2.0, "init_c": 0.7}),
    ("cope", {"causal": True, "npos_max": 3}),
    ("cope", {"npos_max": 8}),
]


@pytest.mark.parametrize("name,opts", LOGIT_CASES)
@pytest.mark.parametrize("kind", [C, R])
def test_logits_site(name, opts, kind):
    """Complex model: q, k are complex128 inputs packed inside; real model: float64 inputs."""
    enc = create_encoding(name, dtype=kind, **CTX, **opts)
    if name in ("cope", "fire"):  # zero-initialised table / flat MLP: make every term count
        with torch.no_grad():
            for p in enc.parameters():
                p.copy_(torch.randn_like(p).abs() + 0.1)
    q = torch.randn(1, 2, 3, 2, dtype=kind)  # (B, H, Lq, d_model / H)
    k = torch.randn(1, 2, 4, 2, dtype=kind)
    gradcheck_hook(enc, lambda e, q, k: e.logits_bias(pack(q), pack(k)), [q, k])


@pytest.mark.parametrize("kind", [C, R])
def test_shaw_values(kind):
    enc = create_encoding("shaw", dtype=kind, max_relative_position=1, **CTX)
    w = torch.softmax(torch.randn(1, 2, 3, 4, dtype=R), -1)
    gradcheck_hook(enc, lambda e, a: e.value_term(a), [w])


@pytest.mark.parametrize("kind", [C, R])
def test_deberta_layer_input(kind):
    enc = create_encoding("deberta", dtype=kind, absolute_layers=1, **CTX)
    gradcheck_hook(enc, lambda e, x: e.layer_input(x, 2, 3), x_input(kind, 3))


@pytest.mark.parametrize("base", ["rotary", "sinusoidal", "trainable", "complex-order"])
@pytest.mark.parametrize("kind", [C, R])
def test_randomized_in_training(base, kind):
    """Positions drawn afresh per call, reseeded so that every gradcheck evaluation sees the
    same ones. By random projections (gradcheck's fast mode: v^T J u against the finite
    difference along u; up to 3 s of CPU entry by entry): the base encodings' Jacobians are
    checked entry by entry above."""
    enc = create_encoding("randomized", base=base, dtype=kind, **CTX).train()
    ids = torch.tensor([[1, 2, 0], [3, 3, 4]])

    def hooks(e, x, q, k):
        torch.manual_seed(5)
        out = e.embed(ids) if "token" in e.base.acts_on else x
        out = e.encode_input(out)
        q2, k2, _ = e.rotate(q, k, q)
        return out, q2, k2

    qk = [torch.randn(1, 2, 3, 2, dtype=kind) for _ in range(2)]
    gradcheck_hook(enc, hooks, [torch.randn(2, 3, 4, dtype=kind), *qk], fast_mode=True)
