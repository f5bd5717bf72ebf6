"""LSTMCell and GRUCell: one step of LSTM/GRU, torch's native complex cells (analytic gates), the
real cell of hidden 2H on the packed view (split gates), an explicit complex formula, torch's
real cell for a real dtype, torch's arguments, shapes, state_dict keys and errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import cplxnet.nn as cnn
from cplxnet._utils import pack
from cplxnet.functional import realify

C = torch.complex128
D, H, B = 3, 4, 2
CELLS = {"lstm": (cnn.LSTMCell, cnn.LSTM, nn.LSTMCell), "gru": (cnn.GRUCell, cnn.GRU, nn.GRUCell)}


def _randomize(m: nn.Module, scale: float = 0.6) -> None:
    """Weights away from the init (larger, so the gates leave their linear range)."""
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * scale)


def _state(kind: str, dtype=C, batch=(B,)):
    h = torch.randn(*batch, H, dtype=dtype, requires_grad=True)
    if kind == "gru":
        return h
    return (h, torch.randn(*batch, H, dtype=dtype, requires_grad=True))


def _leaves(x, hx):
    return [x, *(hx if isinstance(hx, tuple) else (hx,))]


def _outs(out):
    return out if isinstance(out, tuple) else (out,)


def _assert_same(got, want, leaves, want_leaves=None):
    """Equal outputs, and equal gradients of a loss touching every part of every output (with
    respect to ``leaves``, or for ``want`` to the matching ``want_leaves``)."""
    got, want = _outs(got), _outs(want)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    ws = [torch.randn_like(a) for a in got]

    def loss(outs):
        return sum((pack(o) * pack(w)).sum() for o, w in zip(outs, ws))

    g1 = torch.autograd.grad(loss(got), leaves, retain_graph=True)
    g2 = torch.autograd.grad(loss(want), want_leaves or leaves, retain_graph=True)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


# ---- explicit complex references ----
def _split(f, z):
    return torch.complex(f(z.real), f(z.imag))


def _times(a, b, gate):
    """Gate product: part-wise for split gates, complex for analytic ones."""
    return torch.complex(a.real * b.real, a.imag * b.imag) if gate == "split" else a * b


def _act(f, z, gate):
    return _split(f, z) if gate == "split" else f(z)


def _reference(kind, gate, m, x, hx):
    """One step written out on complex tensors (torch's equations, gate by gate)."""
    wi, wh, bi, bh = m.weight_ih, m.weight_hh, m.bias_ih, m.bias_hh
    gi = x @ wi.T + (0 if bi is None else bi)
    h = hx if kind == "gru" else hx[0]
    gh = h @ wh.T + (0 if bh is None else bh)
    if kind == "lstm":
        i, f, g, o = (gi + gh).chunk(4, -1)
        i, f, o = (_act(torch.sigmoid, t, gate) for t in (i, f, o))
        g = _act(torch.tanh, g, gate)
        c = _times(f, hx[1], gate) + _times(i, g, gate)
        return _times(o, _act(torch.tanh, c, gate), gate), c
    ir, iz, in_ = gi.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r = _act(torch.sigmoid, ir + hr, gate)
    z = _act(torch.sigmoid, iz + hz, gate)
    n = _act(torch.tanh, in_ + _times(r, hn, gate), gate)
    # the unit of the part-wise product is 1 + 1i (the real GRU's 1 on every real unit)
    one = torch.ones_like(z) * (1 + 1j if gate == "split" else 1)
    return _times(one - z, n, gate) + _times(z, h, gate)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("gate", ["split", "analytic"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_equals_the_explicit_complex_formula(kind, gate, bias):
    cell = CELLS[kind][0](D, H, bias, dtype=C, gate=gate)
    _randomize(cell)
    x = torch.randn(B, D, dtype=C, requires_grad=True)
    hx = _state(kind)
    _assert_same(
        cell(x, hx), _reference(kind, gate, cell, x, hx), [*_leaves(x, hx), *cell.parameters()]
    )


@pytest.mark.parametrize("gate", ["split", "analytic"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_one_step_equals_one_step_of_the_sequence_layer(kind, gate):
    cls, seq_cls, _ = CELLS[kind]
    cell = cls(D, H, dtype=C, gate=gate)
    _randomize(cell)
    seq = seq_cls(D, H, dtype=C, gate=gate)
    seq.load_state_dict({k + "_l0": v for k, v in cell.state_dict().items()})
    x = torch.randn(B, D, dtype=C, requires_grad=True)
    hx = _state(kind)
    out, state = seq(x[None], tuple(s[None] for s in hx) if kind == "lstm" else hx[None])
    want = tuple(s[0] for s in state) if kind == "lstm" else state[0]
    torch.testing.assert_close(out[0], want[0] if kind == "lstm" else want)
    _assert_same(
        cell(x, hx),
        want,
        [*_leaves(x, hx), *cell.parameters()],
        [*_leaves(x, hx), *seq.parameters()],
    )
    # and a whole sequence, step by step, equals the sequence layer
    xs = torch.randn(5, B, D, dtype=C)
    steps, s = [], None
    for t in range(5):
        s = cell(xs[t], s)
        steps.append(s[0] if kind == "lstm" else s)
    torch.testing.assert_close(torch.stack(steps), seq(xs)[0])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_analytic_gates_equal_torchs_native_complex_cell(kind):
    cls, _, torch_cls = CELLS[kind]
    t = torch_cls(D, H, dtype=C)
    _randomize(t)
    m = cls(D, H, dtype=C, gate="analytic")
    m.load_state_dict(t.state_dict())
    x = torch.randn(B, D, dtype=C, requires_grad=True)
    hx = _state(kind)
    _assert_same(m(x, hx), t(x, hx), _leaves(x, hx))
    _assert_same(m(x), t(x), [x])  # hx=None: zeros, as torch


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_split_gates_equal_the_real_cell_of_twice_the_width(kind):
    """The real-twin construction of the sequence layers: torch's real cell of hidden ``2H`` on
    ``pack(x)`` with weights ``realify(W)`` and biases ``pack(b)``."""
    cls, _, torch_cls = CELLS[kind]
    m = cls(D, H, dtype=C)
    _randomize(m)
    t = torch_cls(2 * D, 2 * H, dtype=torch.float64)
    t.load_state_dict({k: realify(v.detach()) for k, v in m.state_dict().items()})
    x = torch.randn(B, D, dtype=C, requires_grad=True)
    hx = _state(kind)
    got = tuple(pack(o) for o in _outs(m(x, hx)))
    want = _outs(t(pack(x), tuple(pack(s) for s in hx) if kind == "lstm" else pack(hx)))
    _assert_same(got, want, _leaves(x, hx))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_real_dtype_is_torchs_real_cell(kind):
    cls, _, torch_cls = CELLS[kind]
    t = torch_cls(D, H, dtype=torch.float64)
    _randomize(t)
    m = cls(D, H, dtype=torch.float64)
    m.load_state_dict(t.state_dict())
    x = torch.randn(B, D, dtype=torch.float64, requires_grad=True)
    hx = _state(kind, torch.float64)
    _assert_same(m(x, hx), t(x, hx), [*_leaves(x, hx)])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_torchs_arguments_state_dict_and_shapes(kind):
    cls, _, torch_cls = CELLS[kind]
    m, t = cls(D, H, False, None, C), torch_cls(D, H, False, None, C)
    assert (m.input_size, m.hidden_size, m.bias) == (t.input_size, t.hidden_size, t.bias)
    assert {k: v.shape for k, v in m.state_dict().items()} == {
        k: v.shape for k, v in t.state_dict().items()
    }
    m = cls(D, H, dtype=C)
    assert list(m.state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert m.bias is True and m.gate == "split"
    x = torch.randn(D, dtype=C)  # unbatched, as torch
    out = _outs(m(x))
    assert all(o.shape == (H,) for o in out)
    hx = _state(kind, batch=())
    out = _outs(m(x, hx))
    assert all(o.shape == (H,) for o in out)
    # unbatched equals the batch of one
    for a, b in zip(
        out, _outs(m(x[None], tuple(s[None] for s in hx) if kind == "lstm" else hx[None]))
    ):
        torch.testing.assert_close(a, b[0])


def test_init_variance_is_the_sequence_layers():
    torch.manual_seed(0)
    w = cnn.LSTMCell(64, 64, dtype=C).weight_hh
    bound = 1 / (2 * 64) ** 0.5
    assert w.real.abs().max() <= bound and w.imag.abs().max() <= bound
    torch.testing.assert_close(w.abs().square().mean().item(), 1 / (3 * 64), rtol=0.05, atol=0)
    r = cnn.GRUCell(64, 64, dtype=torch.float64).weight_hh
    assert r.abs().max() <= 1 / 8 and r.abs().max() > 0.9 / 8  # torch's U(+-1/sqrt(H))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_bad_input_is_one_clear_error(kind):
    cls = CELLS[kind][0]
    m = cls(D, H, dtype=C)
    name = cls.__name__
    with pytest.raises(TypeError, match=f"{name}: input must be a complex tensor"):
        m(torch.randn(B, D))
    with pytest.raises(ValueError, match=rf"{name}: expected input of shape \(B, {D}\)"):
        m(torch.randn(B, D + 1, dtype=C))
    with pytest.raises(ValueError, match=f"{name}: expected input"):
        m(torch.randn(1, B, D, dtype=C))
    bad = torch.randn(B, H + 1, dtype=C)
    with pytest.raises((ValueError, TypeError), match=name):
        m(torch.randn(B, D, dtype=C), (bad, bad) if kind == "lstm" else bad)
    with pytest.raises(ValueError, match="gate"):
        cls(D, H, gate="holo")
    if kind == "lstm":
        with pytest.raises(TypeError, match="LSTMCell: hx must be a pair"):
            m(torch.randn(B, D, dtype=C), torch.randn(B, H, dtype=C))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_exports_with_a_dynamic_batch(kind):
    m = CELLS[kind][0](D, H, dtype=torch.complex64)
    x = torch.randn(3, D, dtype=torch.complex64)
    hx = _state(kind, torch.complex64, (3,))
    hx = tuple(s.detach() for s in hx) if kind == "lstm" else hx.detach()
    batch = torch.export.Dim("batch", min=2)
    shapes = ({0: batch}, ({0: batch}, {0: batch}) if kind == "lstm" else {0: batch})
    program = torch.export.export(m, (x, hx), dynamic_shapes=shapes)
    x5 = torch.randn(5, D, dtype=torch.complex64)
    hx5 = _state(kind, torch.complex64, (5,))
    for a, b in zip(_outs(program.module()(x5, hx5)), _outs(m(x5, hx5))):
        torch.testing.assert_close(a, b)
