"""cplxnet.nn.LSTM / GRU / UnitaryRNN(Cell): torch-compatible parameters, references, lengths,
unitarity, gradcheck and error messages."""

import inspect
import math

import pytest
import torch

import cplxnet.functional as CF
import cplxnet.nn as cnn
from cplxnet._utils import pack

DT = torch.complex128
TOL = {"atol": 1e-10, "rtol": 1e-9}


def _states(st):
    return st if isinstance(st, tuple) else (st,)


# (ours, theirs, extra constructor options): the LSTM also with torch's projection (proj_size)
CASES = [(cnn.LSTM, torch.nn.LSTM, {}), (cnn.LSTM, torch.nn.LSTM, {"proj_size": 3})]
CASES += [(cnn.GRU, torch.nn.GRU, {})]


@pytest.mark.parametrize("ours, theirs, extra", CASES)
def test_parameter_names_and_shapes_match_torch(ours, theirs, extra):
    kw = {"num_layers": 2, "bidirectional": True, **extra}
    a = ours(3, 4, **kw, dtype=DT).state_dict()
    b = theirs(3, 4, **kw, dtype=DT).state_dict()
    assert list(a) == list(b)
    assert all(a[k].shape == b[k].shape and a[k].dtype == DT for k in a)
    nb = ours(3, 4, bias=False)
    assert list(nb.state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert nb.weight_ih_l0.dtype == torch.complex64  # default: complex of the default dtype


@pytest.mark.parametrize("ours, theirs, extra", CASES)
def test_analytic_module_equals_native_torch_given_its_state_dict(ours, theirs, extra):
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": True, **extra}
    native = theirs(3, 4, **kw, dtype=DT)
    mod = ours(3, 4, **kw, gate="analytic", dtype=DT)
    mod.load_state_dict(native.state_dict())
    x = torch.randn(2, 5, 3, dtype=DT, requires_grad=True)
    out, st = mod(x)
    ref, ref_st = native(x)
    torch.testing.assert_close(out, ref, **TOL)
    for a, b in zip(_states(st), _states(ref_st)):
        torch.testing.assert_close(a, b, **TOL)
    probe = torch.randn_like(out)
    (g,) = torch.autograd.grad((out * probe.conj()).real.sum(), x)
    (g_ref,) = torch.autograd.grad((ref * probe.conj()).real.sum(), x)
    torch.testing.assert_close(g, g_ref, **TOL)


@pytest.mark.parametrize("ours, theirs, extra", CASES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_a_packed_sequence_in_gives_torchs_packed_sequence_out(
    ours, theirs, extra, batch_first, enforce_sorted
):
    """torch's PackedSequence input: analytic gates equal torch's native complex RNN on the same
    packed input (output data, batch sizes, sorting, states in the batch's order, parameter
    gradients); split gates equal the same module given the padded batch and its lengths."""
    pack_seq = torch.nn.utils.rnn.pack_padded_sequence
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": batch_first, **extra}
    native = theirs(3, 4, **kw, dtype=DT)
    mod = ours(3, 4, **kw, gate="analytic", dtype=DT)
    mod.load_state_dict(native.state_dict())
    x = torch.randn(3, 6, 3, dtype=DT) if batch_first else torch.randn(6, 3, 3, dtype=DT)
    lengths = [6, 4, 2] if enforce_sorted else [2, 6, 4]
    packed = pack_seq(x, lengths, batch_first, enforce_sorted)
    h0 = torch.randn(4, 3, extra.get("proj_size") or 4, dtype=DT)  # the batch's own order
    hx = (h0, torch.randn(4, 3, 4, dtype=DT)) if ours is cnn.LSTM else h0
    (out, st), (ref, ref_st) = mod(packed, hx), native(packed, hx)
    assert isinstance(out, torch.nn.utils.rnn.PackedSequence)
    assert torch.equal(out.batch_sizes, ref.batch_sizes)
    for a, b in (
        (out.sorted_indices, ref.sorted_indices),
        (out.unsorted_indices, ref.unsorted_indices),
    ):
        assert (a is None and b is None) or torch.equal(a, b)
    torch.testing.assert_close(out.data, ref.data, **TOL)
    for a, b in zip(_states(st), _states(ref_st)):
        torch.testing.assert_close(a, b, **TOL)
    loss, ref_loss = ((o.data.abs().sum() + sum(s.abs().sum() for s in _states(t)))
                      for o, t in ((out, st), (ref, ref_st)))  # fmt: skip
    g = torch.autograd.grad(loss, list(mod.parameters()))
    g_ref = torch.autograd.grad(ref_loss, list(native.parameters()))
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, **TOL)
    split = ours(3, 4, **kw, dtype=DT)
    out, st = split(packed, hx)
    padded, ref_st = split(x, hx, lengths=lengths)
    back, back_lengths = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first)
    assert back_lengths.tolist() == lengths
    torch.testing.assert_close(back, padded, **TOL)
    for a, b in zip(_states(st), _states(ref_st)):
        torch.testing.assert_close(a, b, **TOL)
    with pytest.raises(ValueError, match="PackedSequence carries its lengths"):
        split(packed, lengths=torch.tensor(lengths))


@pytest.mark.parametrize("ours, theirs, extra", CASES)
def test_split_module_is_real_rnn_of_hidden_2h(ours, theirs, extra):
    """Split gates: the real RNN of hidden 2H (and projection 2P) with weights R(W)."""
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": True}
    mod = ours(3, 4, **kw, **extra, dtype=DT)
    real_extra = {k: 2 * v for k, v in extra.items()}
    real = theirs(6, 8, **kw, **real_extra, dtype=torch.float64)
    with torch.no_grad():
        for p, w in zip(real._flat_weights, mod.flat_weights):
            p.copy_(CF.realify(w))
    x = torch.randn(2, 5, 3, dtype=DT)
    out, st = mod(x)
    ref, ref_st = real(pack(x))
    torch.testing.assert_close(pack(out), ref, **TOL)
    for a, b in zip(_states(st), _states(ref_st)):
        torch.testing.assert_close(pack(a), b, **TOL)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU])
def test_init_variance(cls):
    hidden = 64
    mod = cls(32, hidden, dtype=DT)
    bound = 1 / math.sqrt(2 * hidden)
    for w in mod.parameters():
        parts = torch.view_as_real(w)
        assert parts.abs().max() <= bound
    w = mod.weight_hh_l0
    assert abs(w.abs().pow(2).mean().item() * 3 * hidden - 1) < 0.05  # E|w|^2 = 1/(3H)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN])
def test_each_sequence_as_if_alone(cls):
    """With lengths, every sequence gives what it gives run alone, unpadded: outputs, final states
    (the reverse direction starting at its own last token), and zeros at padded steps."""
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": True, "dtype": DT}
    mod = cls(3, 4, **kw)
    x = torch.randn(3, 6, 3, dtype=DT)
    lens = torch.tensor([6, 2, 4])
    out, st = mod(x, lengths=lens)
    for b, n in enumerate(lens.tolist()):
        alone, alone_st = mod(x[b : b + 1, :n])
        torch.testing.assert_close(out[b : b + 1, :n], alone, **TOL)
        assert out[b, n:].abs().sum() == 0
        for a, s in zip(_states(st), _states(alone_st)):
            torch.testing.assert_close(a[:, b : b + 1], s, **TOL)
    # padding_mask (True = padding) is the same as lengths
    mask = torch.arange(6)[None, :] >= lens[:, None]
    out_m, st_m = mod(x, padding_mask=mask)
    torch.testing.assert_close(out_m, out, **TOL)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN])
def test_layout_variants(cls):
    mod = cls(3, 4, bidirectional=True, batch_first=True, dtype=DT)
    x = torch.randn(2, 5, 3, dtype=DT)
    out, st = mod(x)
    mod_t = cls(3, 4, bidirectional=True, dtype=DT)  # torch's default layout, (L, B, D)
    assert mod_t.batch_first is False
    mod_t.load_state_dict(mod.state_dict())
    out_t, st_t = mod_t(x.transpose(0, 1))
    torch.testing.assert_close(out_t.transpose(0, 1), out, **TOL)
    # torch-style initial state passed positionally, and as keyword
    h0 = tuple(torch.randn_like(s) for s in _states(st))
    h0 = h0 if cls is cnn.LSTM else h0[0]
    a, _ = mod(x, h0)
    b, _ = mod(x, hx=h0)
    torch.testing.assert_close(a, b, **TOL)
    assert not torch.allclose(a, out)
    if cls is not cnn.UnitaryRNN:  # unbatched (L, D) input as torch
        un, _ = mod(x[0])
        torch.testing.assert_close(un, out[0], **TOL)
        h0_one = tuple(h[:, 0] for h in h0) if cls is cnn.LSTM else h0[:, 0]
        un_h, st_h = mod(x[0], h0_one)
        torch.testing.assert_close(un_h, a[0], **TOL)
        assert _states(st_h)[0].shape == (2, 4)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN])
def test_dropout_only_in_training(cls):
    mod = cls(3, 4, num_layers=2, dropout=0.5, batch_first=True, dtype=DT)
    x = torch.randn(2, 5, 3, dtype=DT)
    mod.eval()
    a, _ = mod(x)
    b, _ = mod(x)
    torch.testing.assert_close(a, b, **TOL)
    mod.train()
    c, _ = mod(x)
    assert not torch.allclose(a, c)


@pytest.mark.parametrize(
    "cls, gate, extra",
    [
        (cnn.LSTM, "split", {}),
        (cnn.GRU, "split", {}),
        (cnn.LSTM, "analytic", {}),
        (cnn.LSTM, "split", {"proj_size": 1, "num_layers": 2}),
        (cnn.LSTM, "analytic", {"proj_size": 1}),
    ],
)
def test_gradcheck_module(cls, gate, extra):
    mod = cls(2, 2, bidirectional=True, batch_first=True, gate=gate, dtype=DT, **extra)
    x = torch.randn(2, 3, 2, dtype=DT, requires_grad=True)
    params = list(mod.parameters())
    names = [n for n, _ in mod.named_parameters()]
    lens = torch.tensor([3, 1])

    def f(x, *ps):
        out, st = torch.func.functional_call(mod, dict(zip(names, ps)), (x,), {"lengths": lens})
        return (out, *_states(st))

    assert torch.autograd.gradcheck(f, (x, *params), fast_mode=True)


def test_gradcheck_unitary_module():
    mod = cnn.UnitaryRNN(2, 3, batch_first=True, dtype=DT)
    with torch.no_grad():
        mod.bias_l0.uniform_(-0.3, 0.1)
    x = torch.randn(2, 3, 2, dtype=DT, requires_grad=True)
    names = [n for n, _ in mod.named_parameters()]

    def f(x, *ps):
        return torch.func.functional_call(
            mod, dict(zip(names, ps)), (x,), {"lengths": torch.tensor([3, 2])}
        )

    assert torch.autograd.gradcheck(f, (x, *mod.parameters()), fast_mode=True)


def test_unitary_stays_unitary_after_optimiser_steps():
    mod = cnn.UnitaryRNN(3, 5, num_layers=2, bidirectional=True, batch_first=True, dtype=DT)
    eye = torch.eye(5, dtype=DT)
    before = mod.weight_hh(1, reverse=True).detach().clone()
    torch.testing.assert_close(before.mH @ before, eye, **TOL)
    opt = torch.optim.Adam(mod.parameters(), lr=0.05)
    x = torch.randn(4, 6, 3, dtype=DT)
    for _ in range(3):
        opt.zero_grad()
        out, _ = mod(x)
        out.abs().pow(2).mean().backward()
        opt.step()
    for layer in range(2):
        for rev in (False, True):
            u = mod.weight_hh(layer, reverse=rev)
            torch.testing.assert_close(u.mH @ u, eye, **TOL)
    assert (mod.weight_hh(1, reverse=True) - before).abs().max() > 1e-3  # it did train


def test_unitary_init_spreads_eigenphases():
    cell = cnn.UnitaryRNNCell(2, 64, dtype=DT)
    phases = torch.linalg.eigvals(cell.weight_hh).angle()
    assert phases.min() < -2.5 and phases.max() > 2.5  # not a near-identity U


def test_unitary_cell_is_one_step_of_the_rnn():
    rnn = cnn.UnitaryRNN(3, 4, batch_first=True, dtype=DT)
    with torch.no_grad():
        rnn.bias_l0.uniform_(-0.5, 0.5)
    cell = cnn.UnitaryRNNCell(3, 4, dtype=DT)
    cell.weight_ih.data.copy_(rnn.weight_ih_l0)
    cell.skew_hh.data.copy_(rnn.skew_hh_l0)
    cell.bias.data.copy_(rnn.bias_l0)
    x = torch.randn(2, 3, 3, dtype=DT)
    out, h = rnn(x)
    state = None
    for t, xt in enumerate(x.unbind(1)):
        state = cell(xt, state)
        torch.testing.assert_close(state, out[:, t], **TOL)
    torch.testing.assert_close(h[0], state, **TOL)


def test_split_gates_bounded_analytic_not():
    """Split gates keep |Re h|, |Im h| < 1 whatever the weights; analytic gates do not (poles)."""
    big = {}
    for gate in ("split", "analytic"):
        mod = cnn.LSTM(8, 16, gate=gate, dtype=DT)
        with torch.no_grad():
            for p in mod.parameters():
                p.mul_(4)
        out, _ = mod(2 * torch.randn(4, 20, 8, dtype=DT))
        big[gate] = torch.view_as_real(out).abs().max().item()
    assert big["split"] < 1
    assert big["analytic"] > 1


def test_unitary_cell_errors():
    cell = cnn.UnitaryRNNCell(3, 4, dtype=DT)
    with pytest.raises(TypeError, match="UnitaryRNNCell: input must be a complex tensor"):
        cell(torch.randn(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="UnitaryRNNCell: expected hx with last dimension 4"):
        cell(torch.randn(2, 3, dtype=DT), torch.zeros(2, 5, dtype=DT))
    with pytest.raises(TypeError, match="UnitaryRNNCell: input dtype torch.complex64 does not"):
        cell(torch.randn(2, 3, dtype=torch.complex64))


def test_repr():
    assert "gate='analytic'" in repr(cnn.LSTM(3, 4, gate="analytic"))
    assert "bidirectional=True" in repr(cnn.GRU(3, 4, bidirectional=True))
    assert "UnitaryRNN(3, 4, num_layers=2" in repr(cnn.UnitaryRNN(3, 4, num_layers=2))
    assert "batch_first" not in repr(cnn.LSTM(3, 4))  # torch's default, (L, B, D)
    assert "batch_first=True" in repr(cnn.GRU(3, 4, batch_first=True))


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU])
def test_positional_arguments_follow_torch(cls):
    """torch's positional order ``(input_size, hidden_size, num_layers, bias, batch_first,
    dropout, bidirectional[, proj_size])`` with torch's defaults (``proj_size``: LSTM only);
    cplxnet's ``gate`` is keyword-only."""
    theirs = getattr(torch.nn, cls.__name__)
    args = (3, 4, 2, False, True, 0.25, True) + ((2,) if cls is cnn.LSTM else ())
    ours, ref = cls(*args), theirs(*args)
    for name in (
        "input_size",
        "hidden_size",
        "num_layers",
        "bias",
        "batch_first",
        "dropout",
        "bidirectional",
        "proj_size",
    ):
        assert getattr(ours, name) == getattr(ref, name), name
    default, ref_default = cls(3, 4), theirs(3, 4)
    for name in ("num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size"):
        assert getattr(default, name) == getattr(ref_default, name), name
    assert inspect.signature(cls.__init__).parameters["gate"].kind is inspect.Parameter.KEYWORD_ONLY


def test_proj_size_errors_as_torch():
    for bad in (1.5, True, "2"):
        with pytest.raises(TypeError, match="LSTM: proj_size must be an integer"):
            cnn.LSTM(3, 4, proj_size=bad)
    with pytest.raises(ValueError, match="LSTM: proj_size must be >= 0"):
        cnn.LSTM(3, 4, proj_size=-1)
    with pytest.raises(ValueError, match="LSTM: proj_size must be smaller than hidden_size = 4"):
        cnn.LSTM(3, 4, proj_size=4)
    torch_args = (3, 4, 1, True, False, 0.0, False)
    with pytest.raises(ValueError, match="GRU: proj_size is supported by LSTM only"):
        cnn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="GRU: proj_size is supported by LSTM only"):
        cnn.GRU(*torch_args, 2)  # torch's eighth place
    with pytest.raises(ValueError):  # torch refuses the keyword (its positional form is unchecked)
        torch.nn.GRU(3, 4, proj_size=2)
    assert cnn.GRU(*torch_args, 0).proj_size == torch.nn.GRU(*torch_args, 0).proj_size == 0
    mod = cnn.LSTM(3, 4, proj_size=2, batch_first=True, dtype=DT)
    h, c = torch.zeros(1, 2, 2, dtype=DT), torch.zeros(1, 2, 4, dtype=DT)
    out, (h_n, c_n) = mod(torch.randn(2, 5, 3, dtype=DT), (h, c))
    assert out.shape == (2, 5, 2) and h_n.shape == (1, 2, 2) and c_n.shape == (1, 2, 4)
    with pytest.raises(ValueError, match=r"LSTM: h_0 must have shape \(1, 2, 2\)"):
        mod(torch.randn(2, 5, 3, dtype=DT), (c, c))
    assert "LSTM(3, 4, proj_size=2, gate='split'" in repr(mod)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN])
def test_errors(cls):
    mod = cls(3, 4, batch_first=True, dtype=DT)
    name = cls.__name__
    x = torch.randn(2, 5, 3, dtype=DT)
    with pytest.raises(TypeError, match=f"{name}: input must be a complex tensor"):
        mod(x.real)
    with pytest.raises(ValueError, match=f"{name}: expected input with last dimension 3"):
        mod(torch.randn(2, 5, 4, dtype=DT))
    with pytest.raises(ValueError, match=rf"{name}: every length must be in \[1, 5\]"):
        mod(x, lengths=torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=rf"{name}: every length must be in \[1, 5\]"):
        mod(x, lengths=torch.tensor([6, 5]))
    with pytest.raises(ValueError, match=rf"{name}: lengths must have shape \(batch,\)"):
        mod(x, lengths=torch.tensor([5, 5, 5]))
    with pytest.raises(TypeError, match=f"{name}: lengths must be an integer tensor"):
        mod(x, lengths=torch.tensor([5.0, 5.0]))
    with pytest.raises(ValueError, match=f"{name}: padding_mask must mark padding"):
        mod(x, padding_mask=torch.tensor([[True, False, False, False, False]] * 2))
    with pytest.raises(ValueError, match=f"{name}: pass either lengths or padding_mask"):
        mod(x, lengths=torch.tensor([5, 5]), padding_mask=torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match=f"{name}: dtype must be complex"):
        cls(3, 4, dtype=torch.int32)  # a real float dtype: torch's LSTM/GRU (real_dtype_dropin)
    with pytest.raises(TypeError, match=f"{name}: input dtype torch.complex64 does not match"):
        mod(x.to(torch.complex64))


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN, cnn.UnitaryRNNCell])
@pytest.mark.parametrize(
    ("args", "what"),
    [((0, 4), "input_size"), ((3, -1), "hidden_size"), ((3, 4.0), "hidden_size")],
)
def test_sizes_must_be_positive_integers(cls, args, what):
    with pytest.raises(ValueError, match=f"{cls.__name__}: {what} must be a positive integer"):
        cls(*args)
    if cls is not cnn.UnitaryRNNCell:
        with pytest.raises(ValueError, match="num_layers must be a positive integer"):
            cls(3, 4, num_layers=0)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU])
def test_constructor_errors(cls):
    with pytest.raises(
        ValueError, match="unknown gate 'holomorphic'; valid gates are 'split', 'analytic'"
    ):
        cls(3, 4, gate="holomorphic")
    with pytest.raises(ValueError, match="dropout must be in"):
        cls(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="dropout must be a number"):
        cls(3, 4, dropout=True)
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
        cls(3, 0)
    mod = cls(3, 4, num_layers=2, batch_first=True, dtype=DT)
    with pytest.raises(ValueError, match="h_0 must have shape"):
        h = torch.zeros(1, 2, 4, dtype=DT)
        mod(torch.randn(2, 5, 3, dtype=DT), (h, h) if cls is cnn.LSTM else h)


@pytest.mark.parametrize("gate", ["split", "analytic"])
def test_complex64_matches_complex128(gate):
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": True, "gate": gate}
    mod = cnn.LSTM(3, 4, **kw, dtype=DT)
    mod32 = cnn.LSTM(3, 4, **kw, dtype=torch.complex64)
    mod32.load_state_dict(mod.state_dict())  # copy_ casts complex128 -> complex64
    x = torch.randn(3, 6, 3, dtype=DT)
    lens = torch.tensor([6, 3, 1])
    ref, _ = mod(x, lengths=lens)
    out, (h, c) = mod32(x.to(torch.complex64), lengths=lens)
    assert out.dtype == h.dtype == c.dtype == torch.complex64
    torch.testing.assert_close(out, ref.to(torch.complex64), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN])
@pytest.mark.parametrize("as_", [list, tuple])
def test_lengths_as_a_list_or_tuple_of_ints(cls, as_):
    """As ``pack_padded_sequence``, lengths may be a list or tuple of ints."""
    torch.manual_seed(0)
    mod = cls(8, 5, batch_first=True, dtype=DT)
    x = torch.randn(3, 6, 8, dtype=DT)
    ref, ref_state = mod(x, lengths=torch.tensor([6, 4, 2]))
    out, state = mod(x, lengths=as_([6, 4, 2]))
    torch.testing.assert_close(out, ref, **TOL)
    for a, b in zip(_states(state), _states(ref_state)):
        torch.testing.assert_close(a, b, **TOL)
    assert bool((out[2, 2:] == 0).all())  # padded steps are zero


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU, cnn.UnitaryRNN])
def test_hx_is_torchs_second_argument_and_lengths_are_keyword_only(cls):
    mod = cls(8, 5, batch_first=True, dtype=DT)
    x = torch.randn(2, 4, 8, dtype=DT)
    h = torch.randn(1, 2, 5, dtype=DT)
    state = (h, h) if cls is cnn.LSTM else h
    out, _ = mod(x, state)  # torch's positional initial state
    torch.testing.assert_close(out, mod(x, hx=state)[0], **TOL)
    assert not torch.allclose(out, mod(x)[0])
    if cls is cnn.LSTM:  # a list pair, as torch indexes it
        torch.testing.assert_close(mod(x, [h, h])[0], out, **TOL)
    for lengths in (torch.tensor([4, 2]), [4, 2]):  # lengths in hx's place: one clear line
        with pytest.raises(TypeError, match=r"hx \(the second argument, as in torch\) must be "
                           r".*; pass sequence lengths as lengths="):  # fmt: skip
            mod(x, lengths)
    with pytest.raises(TypeError, match="got a list of float"):
        mod(x, lengths=[4.0, 2.0])
    with pytest.raises(ValueError, match=r"lengths must have shape \(batch,\) = \(2,\)"):
        mod(x, lengths=[4, 2, 1])


@pytest.mark.parametrize("cls", [cnn.LSTM, cnn.GRU])
def test_dropout_range_and_warning_are_torchs(cls):
    """torch's [0, 1] (p = 1 zeroes every layer's input after the first) and its warning for
    dropout with one layer."""
    torch_cls = getattr(torch.nn, cls.__name__)
    with pytest.warns(UserWarning) as ours_w:
        cls(3, 4, 1, dropout=0.5)
    with pytest.warns(UserWarning) as torch_w:
        torch_cls(3, 4, 1, dropout=0.5)
    assert [str(w.message) for w in ours_w] == [str(w.message) for w in torch_w]
    assert ours_w[0].filename == __file__  # points at the caller
    mod = cls(3, 4, 2, dropout=1.0, dtype=DT)
    zero_input = cls(3, 4, 2, dtype=DT)
    zero_input.load_state_dict(mod.state_dict())
    x = torch.randn(5, 2, 3, dtype=DT)
    out, _ = mod(x)
    layer_1 = cls(3, 4, 1, dtype=DT)
    layer_2 = cls(4, 4, 1, dtype=DT)
    state = mod.state_dict()
    layer_1.load_state_dict({k: v for k, v in state.items() if k.endswith("_l0")})
    layer_2.load_state_dict({k.replace("_l1", "_l0"): v for k, v in state.items() if "_l1" in k})
    want, _ = layer_2(torch.zeros_like(layer_1(x)[0]))  # layer 2 sees only zeros
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, want, **TOL)
