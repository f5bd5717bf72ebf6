"""Complex LSTM / GRU / unitary RNN kernels against plain Python-loop references of the equations.

The references below are written from the complex equations, one sequence at a time (each
sequence sliced to its own length, the reverse direction a plain flip of that slice), so they
share no code with the fused path (no real block weights, no packed sequences, no masks).
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cplxnet.functional as CF
from cplxnet._utils import pack
from cplxnet.functional.dropout import entry_dropout

DT = torch.complex128
TOL = {"atol": 1e-10, "rtol": 1e-9}


# ----------------------------------------------------------------------------------------------
# references
# ----------------------------------------------------------------------------------------------


def _split(fn, z):
    return torch.complex(fn(z.real), fn(z.imag))


def _pmul(a, b):
    """Part-wise product: (a_r b_r) + i (a_i b_i)."""
    return torch.complex(a.real * b.real, a.imag * b.imag)


def _acts(gate):
    if gate == "split":
        return (lambda z: _split(torch.sigmoid, z)), (lambda z: _split(torch.tanh, z)), _pmul
    return torch.sigmoid, torch.tanh, torch.mul


def _one(gate, like):
    """The neutral element of the gate product: 1 + i for part-wise, 1 for complex products."""
    return torch.full_like(like, 1 + 1j) if gate == "split" else torch.ones_like(like)


def _lstm_cell(x, state, w, gate):
    """w: weight_ih, weight_hh[, bias_ih, bias_hh][, weight_hr (projection, torch's proj_size)]."""
    h, c = state
    sig, tanh, mul = _acts(gate)
    z = x @ w[0].T + h @ w[1].T
    if len(w) >= 4:
        z = z + w[2] + w[3]
    zi, zf, zg, zo = z.chunk(4, dim=-1)
    c = mul(sig(zf), c) + mul(sig(zi), tanh(zg))
    h = mul(sig(zo), tanh(c))
    if len(w) in (3, 5):
        h = h @ w[-1].T
    return h, (h, c)


def _gru_cell(x, state, w, gate):
    (h,) = state
    sig, tanh, mul = _acts(gate)
    gi, gh = x @ w[0].T, h @ w[1].T
    if len(w) == 4:
        gi, gh = gi + w[2], gh + w[3]
    ir, iz, in_ = gi.chunk(3, dim=-1)
    hr, hz, hn = gh.chunk(3, dim=-1)
    r, zz = sig(ir + hr), sig(iz + hz)
    n = tanh(in_ + mul(r, hn))
    h = mul(_one(gate, zz) - zz, n) + mul(zz, h)
    return h, (h,)


def _unitary_cell(x, state, w, gate):
    (h,) = state
    z = x @ w[0].T + h @ w[1].T
    b = w[2]
    mag = z.abs()
    h = torch.relu(mag + b) * z / mag if b is not None else z
    return h, (h,)


def reference(cell, x, weights, states, lengths, num_layers, dirs, gate="split"):
    """Run ``cell`` sequence by sequence; ``states``: list of (layers*dirs, B, H) tensors."""
    per = len(weights) // (num_layers * dirs)
    batch, steps = x.shape[:2]
    outs, finals = [], [[] for _ in states]
    for b in range(batch):
        n = int(lengths[b]) if lengths is not None else steps
        inp = x[b, :n]  # (n, D)
        last = [[] for _ in states]
        for layer in range(num_layers):
            dir_outs = []
            for d in range(dirs):
                k = layer * dirs + d
                w = weights[k * per : (k + 1) * per]
                st = tuple(s[k, b] for s in states)
                seq = inp if d == 0 else inp.flip(0)
                ys = []
                for t in range(n):
                    y, st = cell(seq[t], st, w, gate)
                    ys.append(y)
                ys = torch.stack(ys)
                dir_outs.append(ys if d == 0 else ys.flip(0))
                for acc, s in zip(last, st):
                    acc.append(s)
            inp = torch.cat(dir_outs, dim=-1)
        outs.append(torch.cat([inp, inp.new_zeros(steps - n, inp.shape[-1])]))
        for acc, s in zip(finals, last):
            acc.append(torch.stack(s))
    return torch.stack(outs), [torch.stack(f, dim=1) for f in finals]


def _weights(n_gates, d_in, hidden, num_layers, dirs, bias=True, scale=0.5, proj=0):
    ws = []
    width = proj or hidden  # of h
    for layer in range(num_layers):
        d = d_in if layer == 0 else width * dirs
        for _ in range(dirs):
            ws += [
                scale * torch.randn(n_gates * hidden, d, dtype=DT),
                scale * torch.randn(n_gates * hidden, width, dtype=DT),
            ]
            if bias:
                ws += [scale * torch.randn(n_gates * hidden, dtype=DT) for _ in range(2)]
            if proj:
                ws.append(scale * torch.randn(proj, hidden, dtype=DT))
    return [w.requires_grad_() for w in ws]


def _loss(out, states, probes):
    """A real scalar touching every output entry with a random complex weight."""
    total = (out * probes[0].conj()).real.sum()
    for s, p in zip(states, probes[1:]):
        total = total + (s * p.conj()).real.sum()
    return total


# ----------------------------------------------------------------------------------------------
# fused LSTM / GRU == loop reference (values and gradients)
# ----------------------------------------------------------------------------------------------

CASES = [
    # (num_layers, bidirectional, lengths, bias, with_h0, proj_size)
    (1, False, None, True, False, 0),
    (2, True, [5, 2, 4], True, True, 0),
    (2, False, [3, 5, 1], False, True, 0),
    (1, True, [1, 5, 3], True, False, 0),
]
PROJ_CASES = [(2, True, [5, 2, 4], True, True, 2), (2, False, [3, 5, 1], False, False, 3)]
KIND_CASES = [(k, c) for k in ("lstm", "gru") for c in CASES] + [("lstm", c) for c in PROJ_CASES]


@pytest.mark.parametrize("kind, case", KIND_CASES)
@pytest.mark.parametrize("gate", ["split", "analytic"])
def test_fused_equals_loop_reference(kind, gate, case):
    num_layers, bidirectional, lengths, bias, with_h0, proj = case
    dirs = 2 if bidirectional else 1
    B, L, D, H = 3, 5, 3, 4
    n_gates, cell = (4, _lstm_cell) if kind == "lstm" else (3, _gru_cell)
    n_states = 2 if kind == "lstm" else 1
    x = torch.randn(B, L, D, dtype=DT, requires_grad=True)
    ws = _weights(n_gates, D, H, num_layers, dirs, bias, proj=proj)
    shapes = [(num_layers * dirs, B, proj or H), (num_layers * dirs, B, H)][:n_states]
    if with_h0:
        h0 = [(0.5 * torch.randn(shape, dtype=DT)).requires_grad_() for shape in shapes]
    else:
        h0 = [torch.zeros(shape, dtype=DT) for shape in shapes]
    lens = torch.tensor(lengths) if lengths is not None else None

    fn = CF.lstm if kind == "lstm" else CF.gru
    hx = (tuple(h0) if kind == "lstm" else h0[0]) if with_h0 else None
    out, st = fn(x, ws, hx, lens, num_layers=num_layers, bidirectional=bidirectional, gate=gate)
    st = list(st) if kind == "lstm" else [st]
    ref_out, ref_st = reference(cell, x, ws, h0, lens, num_layers, dirs, gate)

    assert out.shape == (B, L, dirs * (proj or H)) and out.dtype == DT
    torch.testing.assert_close(out, ref_out, **TOL)
    for a, b in zip(st, ref_st):
        torch.testing.assert_close(a, b, **TOL)

    probes = [torch.randn_like(out)] + [torch.randn_like(s) for s in st]
    inputs = [x, *ws] + (h0 if with_h0 else [])
    g = torch.autograd.grad(_loss(out, st, probes), inputs)
    g_ref = torch.autograd.grad(_loss(ref_out, ref_st, probes), inputs)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, **TOL)


def test_batch_first_false_matches():
    x = torch.randn(2, 4, 3, dtype=DT)
    ws = _weights(4, 3, 2, 2, 2)
    lens = torch.tensor([4, 2])
    a, (ha, ca) = CF.lstm(x, ws, None, lens, num_layers=2, bidirectional=True)
    b, (hb, cb) = CF.lstm(
        x.transpose(0, 1), ws, None, lens, num_layers=2, bidirectional=True, batch_first=False
    )
    torch.testing.assert_close(a, b.transpose(0, 1), **TOL)
    torch.testing.assert_close(ha, hb, **TOL)
    torch.testing.assert_close(ca, cb, **TOL)


# ----------------------------------------------------------------------------------------------
# real references: torch.nn.LSTM / GRU
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_split_with_zero_imaginary_parts_is_the_real_rnn(kind):
    """Zero imaginary parts everywhere: Re(output) = torch.nn.LSTM/GRU with weights A, Im = 0."""
    torch.manual_seed(1)
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    real = cls(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=torch.float64)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    ws = [w.detach().to(DT) for w in real._flat_weights]
    fn = CF.lstm if kind == "lstm" else CF.gru
    out, st = fn(x.to(DT), ws, num_layers=2, bidirectional=True)
    ref_out, ref_st = real(x)
    torch.testing.assert_close(out.real, ref_out, **TOL)
    assert out.imag.abs().max() == 0
    st, ref_st = (st, ref_st) if kind == "lstm" else ((st,), (ref_st,))
    for a, b in zip(st, ref_st):
        torch.testing.assert_close(a.real, b, **TOL)
        assert a.imag.abs().max() == 0


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_split_is_real_rnn_of_twice_the_width_on_packed_view(kind):
    """The derivation itself: complex split RNN = real RNN(2H) on pack(x) with realify(W)."""
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    n_gates = 4 if kind == "lstm" else 3
    ws = _weights(n_gates, 3, 4, 1, 1)
    real = cls(6, 8, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for p, w in zip(real._flat_weights, ws):
            p.copy_(CF.realify(w))
    x = torch.randn(2, 5, 3, dtype=DT)
    out, _ = (CF.lstm if kind == "lstm" else CF.gru)(x, ws)
    torch.testing.assert_close(pack(out), real(pack(x))[0], **TOL)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_analytic_equals_native_complex_torch(kind):
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    native = cls(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=DT)
    x = torch.randn(2, 5, 3, dtype=DT)
    fn = CF.lstm if kind == "lstm" else CF.gru
    out, st = fn(x, native._flat_weights, num_layers=2, bidirectional=True, gate="analytic")
    ref_out, ref_st = native(x)
    torch.testing.assert_close(out, ref_out, **TOL)
    st, ref_st = (st, ref_st) if kind == "lstm" else ((st,), (ref_st,))
    for a, b in zip(st, ref_st):
        torch.testing.assert_close(a, b, **TOL)


# ----------------------------------------------------------------------------------------------
# gradcheck (complex128, small)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, proj", [("lstm", 0), ("gru", 0), ("lstm", 1)])
@pytest.mark.parametrize("gate", ["split", "analytic"])
def test_gradcheck(kind, gate, proj):
    n_gates = 4 if kind == "lstm" else 3
    fn = CF.lstm if kind == "lstm" else CF.gru
    x = torch.randn(2, 3, 2, dtype=DT, requires_grad=True)
    ws = _weights(n_gates, 2, 2, 1, 2, proj=proj)
    lens = torch.tensor([3, 2])

    def f(x, *ws):
        out, st = fn(x, ws, None, lens, bidirectional=True, gate=gate)
        return (out, *st) if kind == "lstm" else (out, st)

    assert torch.autograd.gradcheck(f, (x, *ws), fast_mode=True)


def test_gradcheck_unitary_rnn():
    x = torch.randn(2, 3, 2, dtype=DT, requires_grad=True)
    w = (0.5 * torch.randn(3, 2, dtype=DT)).requires_grad_()
    g = (0.3 * torch.randn(3, 3, dtype=DT)).requires_grad_()
    b = torch.tensor([0.1, -0.2, 0.05], dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([3, 2])

    def f(x, w, g, b):
        return CF.unitary_rnn(x, [(w, CF.unitary_matrix(g), b)], None, lens)

    assert torch.autograd.gradcheck(f, (x, w, g, b), fast_mode=True)


# ----------------------------------------------------------------------------------------------
# unitary RNN
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True])
def test_unitary_rnn_equals_loop_reference(bidirectional):
    dirs = 2 if bidirectional else 1
    B, L, D, H, layers = 3, 5, 3, 4, 2
    x = torch.randn(B, L, D, dtype=DT, requires_grad=True)
    triples, flat = [], []
    for layer in range(layers):
        for _ in range(dirs):
            w = torch.randn(H, D if layer == 0 else H * dirs, dtype=DT, requires_grad=True)
            u = CF.unitary_matrix(torch.randn(H, H, dtype=DT))
            b = (0.3 * torch.randn(H, dtype=torch.float64)).requires_grad_()
            triples.append((w, u, b))
            flat += [w, u, b]
    h0 = torch.randn(layers * dirs, B, H, dtype=DT)
    lens = torch.tensor([5, 2, 3])
    out, h = CF.unitary_rnn(x, triples, h0, lens, num_layers=layers, bidirectional=bidirectional)
    ref_out, (ref_h,) = reference(_unitary_cell, x, flat, [h0], lens, layers, dirs)
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(h, ref_h, **TOL)
    probes = [torch.randn_like(out), torch.randn_like(h)]
    inputs = [x] + [t for t in flat if t.requires_grad]
    g = torch.autograd.grad(_loss(out, [h], probes), inputs)
    g_ref = torch.autograd.grad(_loss(ref_out, [ref_h], probes), inputs)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, **TOL)


def test_unitary_matrix_is_unitary_for_any_generator():
    g = torch.randn(6, 6, dtype=DT) * 3
    u = CF.unitary_matrix(g)
    torch.testing.assert_close(u.mH @ u, torch.eye(6, dtype=DT), **TOL)


def test_modrelu_cell_finite_at_zero():
    x = torch.zeros(1, 2, dtype=DT, requires_grad=True)
    h = torch.zeros(1, 2, dtype=DT)
    w = torch.eye(2, dtype=DT)
    b = torch.tensor([0.5, -0.5], dtype=torch.float64)
    y = CF.unitary_rnn_cell(x, h, w, w, b)
    assert torch.equal(y, torch.zeros_like(y))
    (gx,) = torch.autograd.grad(y.abs().sum() + y.real.sum(), x)
    assert torch.isfinite(torch.view_as_real(gx)).all()


# ----------------------------------------------------------------------------------------------
# properties and helpers
# ----------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), batch=st.integers(1, 3))
def test_realify_acts_like_the_complex_matrix(m, n, batch):
    w = torch.randn(m, n, dtype=DT)
    b = torch.randn(m, dtype=DT)
    x = torch.randn(batch, n, dtype=DT)
    torch.testing.assert_close(pack(x @ w.T + b), pack(x) @ CF.realify(w).T + CF.realify(b), **TOL)


@pytest.mark.parametrize("kind", ["lstm", "gru", "unitary"])
def test_padded_inputs_do_not_matter(kind):
    torch.manual_seed(3)
    x = torch.randn(3, 6, 2, dtype=DT, requires_grad=True)
    lens = torch.tensor([6, 2, 4])
    if kind == "unitary":
        trip = [
            (
                torch.randn(3, 2, dtype=DT),
                CF.unitary_matrix(torch.randn(3, 3, dtype=DT)),
                torch.zeros(3, dtype=torch.float64),
            )
        ] * 2

        def run(x):
            return CF.unitary_rnn(x, trip, None, lens, bidirectional=True)
    else:
        ws = _weights(4 if kind == "lstm" else 3, 2, 3, 2, 2)
        fn = CF.lstm if kind == "lstm" else CF.gru

        def run(x):
            return fn(x, ws, None, lens, num_layers=2, bidirectional=True)

    out, st = run(x)
    pad = torch.arange(6)[None, :] >= lens[:, None]  # (B, L)
    assert out[pad].abs().max() == 0
    x2 = x.detach().clone()
    x2[pad] = 100 * torch.randn(int(pad.sum()), 2, dtype=DT)
    out2, st2 = run(x2)
    torch.testing.assert_close(out, out2, **TOL)
    st, st2 = (st, st2) if isinstance(st, tuple) else ((st,), (st2,))
    for a, b in zip(st, st2):
        torch.testing.assert_close(a, b, **TOL)
    (gx,) = torch.autograd.grad(out.abs().sum(), x)
    assert gx[pad].abs().max() == 0 and gx[~pad].abs().max() > 0


def test_entry_dropout_drops_whole_complex_entries():
    z = torch.randn(200, 50, dtype=DT) + 3
    y = entry_dropout(z, 0.4, interleaved=False)
    zero = y == 0
    assert 0.3 < zero.double().mean() < 0.5
    torch.testing.assert_close(y[~zero], z[~zero] / 0.6, **TOL)
    yp = entry_dropout(pack(z), 0.4, interleaved=True).unflatten(-1, (-1, 2))
    both = (yp == 0).all(-1)
    assert torch.equal(both, (yp == 0).any(-1))  # re and im dropped together
    assert 0.3 < both.double().mean() < 0.5


@pytest.mark.parametrize("gate", ["split", "analytic"])
def test_layerwise_dropout_path(gate, monkeypatch):
    """Training with dropout runs layer by layer: with p -> 0 it equals the fused run, and the
    masks it applies drop real and imaginary parts together in both data layouts."""
    import cplxnet.functional.rnn as R

    seen = []

    def spy(data, p, interleaved):
        y = entry_dropout(data, p, interleaved)
        seen.append(y if not interleaved else torch.view_as_complex(y.unflatten(-1, (-1, 2))))
        return y

    monkeypatch.setattr(R, "entry_dropout", spy)
    x = torch.randn(3, 5, 3, dtype=DT)
    ws = _weights(4, 3, 4, 3, 2)
    lens = torch.tensor([5, 2, 4])
    kw = {"num_layers": 3, "bidirectional": True, "gate": gate}
    ref, (rh, rc) = CF.lstm(x, ws, None, lens, **kw)
    out, (h, c) = CF.lstm(x, ws, None, lens, dropout=1e-300, training=True, **kw)
    assert len(seen) == 2
    torch.testing.assert_close(out, ref, **TOL)
    torch.testing.assert_close(h, rh, **TOL)
    torch.testing.assert_close(c, rc, **TOL)
    seen.clear()
    out, _ = CF.lstm(x, ws, None, lens, dropout=0.5, training=True, **kw)
    for y in seen:
        assert torch.equal(y.real == 0, y.imag == 0)  # whole complex entries
        assert (y == 0).any() and (y != 0).any()


def test_lengths_from_padding_mask():
    mask = torch.tensor([[False, False, True], [False, False, False]])
    assert CF.lengths_from_padding_mask(mask).tolist() == [2, 3]
    with pytest.raises(ValueError, match="only at the end"):
        CF.lengths_from_padding_mask(torch.tensor([[True, False, False]]))
    with pytest.raises(TypeError, match="torch.bool"):
        CF.lengths_from_padding_mask(torch.zeros(1, 3))


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------


def test_functional_errors():
    ws = _weights(4, 3, 2, 1, 1)
    x = torch.randn(2, 4, 3, dtype=DT)
    with pytest.raises(TypeError, match="complex tensor"):
        CF.lstm(x.real, ws)
    with pytest.raises(ValueError, match="last dimension 3"):
        CF.lstm(torch.randn(2, 4, 5, dtype=DT), ws)
    with pytest.raises(ValueError, match="valid gates are 'split', 'analytic'"):
        CF.lstm(x, ws, gate="holomorphic")
    with pytest.raises(ValueError, match=r"in \[1, 4\]"):
        CF.lstm(x, ws, lengths=torch.tensor([0, 4]))
    with pytest.raises(ValueError, match=r"in \[1, 4\]"):
        CF.gru(x, _weights(3, 3, 2, 1, 1), lengths=torch.tensor([5, 4]))
    with pytest.raises(ValueError, match=r"shape \(batch,\)"):
        CF.lstm(x, ws, lengths=torch.tensor([[4, 4]]))
    with pytest.raises(TypeError, match="integer tensor"):
        CF.lstm(x, ws, lengths=torch.tensor([4.0, 4.0]))
    with pytest.raises(ValueError, match="3-D input"):
        CF.lstm(x[0], ws)
    with pytest.raises(ValueError, match="expected 2 or 3 or 4 or 5 weights"):
        CF.lstm(x, ws[:1])
    with pytest.raises(ValueError, match="expected 2 or 4 weights"):
        CF.gru(x, _weights(3, 3, 2, 1, 1)[:3])
    # three weights read as weight_ih, weight_hh, weight_hr (torch's proj_size): shapes checked
    with pytest.raises(ValueError, match=r"weight_hr_l0 must have shape .* = \(2, 2\)"):
        CF.lstm(x, ws[:3])
    with pytest.raises(ValueError, match=r"weight_hh_l0 shape \(4 \* hidden_size, hidden_size"):
        CF.lstm(x, [ws[0], ws[1][:, :1]])
    wide = _weights(4, 3, 2, 1, 1, bias=False)  # weight_hr (2, 2): no narrower than the cell
    with pytest.raises(ValueError, match="proj_size .* must be smaller than hidden_size = 2"):
        CF.lstm(x, wide + [torch.eye(2, dtype=DT)])
    proj = _weights(4, 3, 2, 1, 1, bias=False, proj=1)
    with pytest.raises(ValueError, match=r"weight_hr_l0 must have shape \(proj_size, hidden_size"):
        CF.lstm(x, proj[:2] + [proj[2].mT])
    with pytest.raises(ValueError, match="h_0 must have shape"):
        CF.lstm(x, ws, (torch.zeros(1, 3, 2, dtype=DT), torch.zeros(1, 3, 2, dtype=DT)))
    with pytest.raises(TypeError, match="does not match"):
        CF.lstm(x.to(torch.complex64), ws)
