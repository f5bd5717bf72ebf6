"""S4D (``cplxnet.nn.S4D``, ``cplxnet.functional.s4d``) against its recurrence as an explicit
loop over time (values and gradients of input and every parameter), its kernel formula as
explicit sums, the paper's real S4D (conjugate pairs on real input), complextorch's S4D, and
causality; plus gradcheck, layouts and one-line errors."""

from __future__ import annotations

import math

import pytest
import torch

import cplxnet.functional as CF
from cplxnet import nn as cnn

DT = torch.complex128


def _layer(h=3, n=4, seed=0, **kw):
    torch.manual_seed(seed)
    m = cnn.S4D(h, n, dtype=DT, **kw)
    with torch.no_grad():  # away from the init's symmetric values
        m.log_A_real.add_(0.3 * torch.randn_like(m.log_A_real))
        m.A_imag.add_(torch.randn_like(m.A_imag))
        m.log_dt.add_(torch.randn_like(m.log_dt))
    return m


def _recurrence(m: cnn.S4D, u: torch.Tensor) -> torch.Tensor:
    """``x_t = e^{dt A} x_{t-1} + (e^{dt A} - 1)/A u_t``, ``y_t = sum_n C_n x_{t,n} + D u_t``,
    one step at a time over ``u`` ``(B, L, H)``."""
    a = torch.complex(-torch.exp(m.log_A_real), m.A_imag)
    dt = torch.exp(m.log_dt).unsqueeze(-1).to(a.dtype)
    a_bar = torch.exp(dt * a)
    b_bar = torch.where(a == 0, dt, (a_bar - 1) / a)  # its limit at a = 0
    state = torch.zeros(u.shape[0], m.d_model, m.d_state, dtype=u.dtype)
    out = []
    for t in range(u.shape[1]):
        state = a_bar * state + b_bar * u[:, t].unsqueeze(-1)
        out.append((m.C * state).sum(-1) + m.D * u[:, t])
    return torch.stack(out, 1)


def _grads(out, inputs):
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
    return torch.autograd.grad((out * g.conj()).real.sum(), inputs)


def _assert_same(ours, ref, inputs):
    """Equal values, and equal gradients of ``Re <g, out>`` with respect to every input."""
    torch.testing.assert_close(ours, ref)
    for a, b in zip(_grads(ours, inputs), _grads(ref, inputs)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("length", [1, 2, 7, 33])
def test_equals_its_recurrence_in_values_and_gradients(length):
    m = _layer()
    u = torch.randn(2, length, 3, dtype=DT, requires_grad=True)
    _assert_same(m(u), _recurrence(m, u), (u, *m.parameters()))


def test_stepping_through_a_sequence_gives_the_forward_output_and_gradients():
    m = _layer()
    u = torch.randn(2, 9, 3, dtype=DT, requires_grad=True)
    state, outs = None, []
    for t in range(9):
        y, state = m.step(u[:, t], state)
        outs.append(y)
    stepped = torch.stack(outs, 1)
    assert state.shape == (2, 3, 4)
    _assert_same(stepped, m(u), (u, *m.parameters()))
    y, state = m.step(u[0, 0].detach())  # unbatched (H,)
    torch.testing.assert_close(y, m(u[0, :1].detach())[0])
    assert state.shape == (3, 4)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((torch.randn(2, 4, dtype=DT),), r"step: expected input \(B, H\) or \(H,\) with H = 3"),
        ((torch.randn(2, 3, dtype=DT), torch.zeros(2, 3, 5, dtype=DT)),
         r"^S4D.step: expected state of shape \(2, 3, 4\) for this input, got \(2, 3, 5\)$"),
    ],
)  # fmt: skip
def test_step_refuses_a_wrong_input_or_state_in_one_line(args, match):
    with pytest.raises(ValueError, match=match):
        _layer().step(*args)
    with pytest.raises(TypeError, match="S4D: state has dtype torch.complex64"):
        _layer().step(torch.randn(2, 3, dtype=DT), torch.zeros(2, 3, 4, dtype=torch.complex64))


def _explicit_bidirectional(m: cnn.S4D, u: torch.Tensor) -> torch.Tensor:
    """``y_t = sum_{s <= t} K_{t-s} u_s + sum_{j >= 1} K'_{j-1} u_{t+j} + D u_t``, summed term
    by term (``K'``: the kernel with ``C_reverse``)."""
    length = u.shape[1]
    k = CF.s4d_kernel(m.log_dt, m.log_A_real, m.A_imag, m.C, length)
    k_rev = CF.s4d_kernel(m.log_dt, m.log_A_real, m.A_imag, m.C_reverse, length)
    out = []
    for t in range(length):
        y = m.D * u[:, t]
        for s in range(t + 1):
            y = y + k[:, t - s] * u[:, s]
        for j in range(1, length - t):
            y = y + k_rev[:, j - 1] * u[:, t + j]
        out.append(y)
    return torch.stack(out, 1)


@pytest.mark.parametrize("length", [2, 3, 9])
def test_bidirectional_equals_its_sums_in_values_and_gradients(length):
    m = _layer(bidirectional=True)
    assert m.C_reverse is not None and "bidirectional=True" in repr(m)
    u = torch.randn(2, length, 3, dtype=DT, requires_grad=True)
    _assert_same(m(u), _explicit_bidirectional(m, u), (u, *m.parameters()))
    causal = cnn.S4D(3, 4, dtype=DT)
    causal.load_state_dict({k: v for k, v in m.state_dict().items() if k != "C_reverse"})
    with torch.no_grad():
        m.C_reverse.zero_()  # no backward kernel: the causal layer
    torch.testing.assert_close(m(u), causal(u))
    with pytest.raises(ValueError, match="S4D.step: a bidirectional layer reads later inputs"):
        m.step(u[:, 0])


def test_gradcheck_complex128_bidirectional():
    m = _layer(h=2, n=3, bidirectional=True)
    u = torch.randn(2, 5, 2, dtype=DT, requires_grad=True)
    log_dt, log_a, a_imag, c, c_rev, d = (p.detach().clone().requires_grad_() for p in (
        m.log_dt, m.log_A_real, m.A_imag, m.C, m.C_reverse, m.D))  # fmt: skip

    def fn(u, log_dt, log_a, a_imag, c, c_rev, d):
        return CF.s4d(u, log_dt, log_a, a_imag, c, d, c_reverse=c_rev)

    assert torch.autograd.gradcheck(fn, (u, log_dt, log_a, a_imag, c, c_rev, d))


def test_complex64_follows_the_recurrence_and_unbatched_and_transposed_inputs_agree():
    m = _layer()
    m32 = cnn.S4D(3, 4, dtype=torch.complex64)
    m32.load_state_dict({k: v.to(m32.state_dict()[k].dtype) for k, v in m.state_dict().items()})
    u = torch.randn(2, 40, 3, dtype=DT)
    out = m32(u.to(torch.complex64))
    assert out.dtype == torch.complex64
    torch.testing.assert_close(out, _recurrence(m, u).to(torch.complex64), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(m(u[1]), m(u)[1])  # unbatched (L, H)
    mt = cnn.S4D(3, 4, transposed=True, dtype=DT)
    mt.load_state_dict(m.state_dict())
    torch.testing.assert_close(mt(u.mT), m(u).mT)
    torch.testing.assert_close(mt(u[0].mT), m(u[0]).mT)


def test_the_kernel_is_its_formula_summed_entry_by_entry():
    m = _layer(h=2, n=3)
    k = m.kernel(6)
    for h in range(2):
        dt = math.exp(m.log_dt[h].item())
        for l in range(6):
            total = 0j
            for n in range(3):
                a = complex(-math.exp(m.log_A_real[h, n].item()), m.A_imag[h, n].item())
                c = complex(m.C[h, n].item())
                total += c * (complex(math.e) ** (dt * a) - 1) / a * complex(math.e) ** (l * dt * a)
            assert abs(k[h, l].item() - total) < 1e-12


def test_causal_an_input_after_t_never_changes_the_output_up_to_t():
    m = _layer()
    u = torch.randn(2, 12, 3, dtype=DT)
    v = u.clone()
    v[:, 7:] = torch.randn_like(v[:, 7:])
    torch.testing.assert_close(m(u)[:, :7], m(v)[:, :7])
    assert not torch.allclose(m(u)[:, 7:], m(v)[:, 7:])


def test_the_papers_real_s4d_is_conjugate_pairs_on_real_input():
    """The paper's S4D (its reference code): N/2 states, kernel 2 Re(sum_n C_n (e^{dt A_n} - 1)
    / A_n e^{l dt A_n}), real D, real input, convolution by rfft."""
    torch.manual_seed(0)
    h, half, length = 3, 4, 20
    log_dt = torch.rand(h, dtype=torch.float64) * 3 - 5
    log_a_real = torch.log(0.5 * torch.ones(h, half, dtype=torch.float64))
    a_imag = math.pi * torch.arange(half, dtype=torch.float64).repeat(h, 1)
    c = torch.randn(h, half, dtype=DT)
    d = torch.randn(h, dtype=torch.float64)
    u = torch.randn(2, h, length, dtype=torch.float64)  # the paper's (B, H, L)
    a = -torch.exp(log_a_real) + 1j * a_imag
    dta = a * torch.exp(log_dt).unsqueeze(-1)
    k = dta.unsqueeze(-1) * torch.arange(length)
    k = 2 * torch.einsum("hn,hnl->hl", c * (torch.exp(dta) - 1.0) / a, torch.exp(k)).real
    y = torch.fft.irfft(torch.fft.rfft(u, n=2 * length) * torch.fft.rfft(k, n=2 * length))
    paper = y[..., :length] + u * d.unsqueeze(-1)

    m = cnn.S4D(h, 2 * half, transposed=True, dtype=DT)
    with torch.no_grad():
        m.log_dt.copy_(log_dt)
        m.log_A_real.copy_(torch.cat([log_a_real, log_a_real], 1))
        m.A_imag.copy_(torch.cat([a_imag, -a_imag], 1))
        m.C.copy_(torch.cat([c, c.conj()], 1))
        m.D.copy_(d)
    ours = m(u.to(DT))
    torch.testing.assert_close(ours.real, paper)
    torch.testing.assert_close(ours.imag, torch.zeros_like(paper))


def test_equals_complextorch_s4d_with_b_one_and_a_real_d():
    ctnn = pytest.importorskip("complextorch.nn")
    torch.manual_seed(0)
    theirs = ctnn.S4D(3, 4)
    ours = cnn.S4D(3, 4, dtype=torch.complex64)
    with torch.no_grad():
        theirs.C.normal_()
        ours.log_dt.copy_(theirs.log_dt)
        ours.log_A_real.copy_(theirs.log_neg_A_real)
        ours.A_imag.copy_(theirs.A_imag)
        ours.C.copy_(theirs.C * theirs.B)
        ours.D.copy_(theirs.D)
    u = torch.randn(2, 30, 3, dtype=torch.complex64)
    torch.testing.assert_close(ours(u), theirs(u), atol=1e-5, rtol=1e-4)


def test_gradcheck_complex128_functional():
    m = _layer(h=2, n=3)
    u = torch.randn(2, 5, 2, dtype=DT, requires_grad=True)
    params = [p.detach().clone().requires_grad_() for p in m.parameters()]
    assert torch.autograd.gradcheck(CF.s4d, (u, *params))


def test_init_is_s4d_lin_and_the_steps_lie_in_range():
    m = cnn.S4D(5, 6, dt_min=1e-2, dt_max=2e-2, dtype=DT)
    half = torch.full((5, 6), 0.5, dtype=torch.float64)
    torch.testing.assert_close(torch.exp(m.log_A_real), half)
    lin = math.pi * torch.arange(6.0, dtype=torch.float64).repeat(5, 1)
    torch.testing.assert_close(m.A_imag, lin)
    dt = torch.exp(m.log_dt)
    assert bool(((dt >= 1e-2 * (1 - 1e-12)) & (dt <= 2e-2 * (1 + 1e-12))).all())
    assert m.C.dtype == DT and m.log_dt.dtype == torch.float64


def test_the_init_draws_c_and_d_complex_normal_and_the_steps_log_uniform():
    torch.manual_seed(0)
    m = cnn.S4D(4000, 8, dt_min=1e-3, dt_max=1e-1, dtype=DT)
    for p in (m.C, m.D):
        assert p.dtype == DT
        assert abs(p.abs().square().mean().item() - 1) < 0.05  # E|c|^2 = 1
        assert abs(p.real.var().item() - p.imag.var().item()) < 0.05
    u = (m.log_dt - math.log(1e-3)) / (math.log(1e-1) - math.log(1e-3))  # uniform on [0, 1]
    assert abs(u.mean().item() - 0.5) < 0.02 and abs(u.var().item() - 1 / 12) < 0.01


def test_an_empty_batch_or_sequence_gives_an_empty_output():
    m = _layer()
    assert m(torch.randn(2, 0, 3, dtype=DT)).shape == (2, 0, 3)
    assert m(torch.randn(0, 5, 3, dtype=DT)).shape == (0, 5, 3)


def test_a_state_with_a_equal_to_zero_takes_the_limit_dt():
    """exp(log_A_real) underflows to 0 with A_imag = 0: (e^{dt A} - 1)/A -> dt, no NaN."""
    m = _layer(h=2, n=3)
    with torch.no_grad():
        m.log_A_real[0, 1], m.A_imag[0, 1] = -800.0, 0.0
    u = torch.randn(2, 6, 2, dtype=DT, requires_grad=True)
    out = m(u)
    torch.testing.assert_close(out, _recurrence(m, u))
    grads = _grads(out, (u, *m.parameters()))
    assert all(bool(torch.isfinite(g).all()) for g in grads)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: cnn.S4D(3, 4, dtype=DT)(torch.randn(2, 5, 4, dtype=DT)),
         r"^S4D: expected input \(B, L, H\) or \(L, H\) with H = 3, got shape \(2, 5, 4\)$"),
        (lambda: cnn.S4D(3, 4, transposed=True, dtype=DT)(torch.randn(2, 5, 3, dtype=DT)),
         r"expected input \(B, H, L\) or \(H, L\) with H = 3"),
        (lambda: cnn.S4D(3, 4, dtype=DT)(torch.randn(1, 2, 5, 3, dtype=DT)), "got shape"),
        (lambda: cnn.S4D(3, 4, dt_min=0.2, dt_max=0.1), "need 0 < dt_min <= dt_max"),
        (lambda: cnn.S4D(0, 4), "d_model"),
        (lambda: CF.s4d(torch.randn(5, dtype=DT), *cnn.S4D(3, 2, dtype=DT).parameters()),
         r"^s4d: expected input \(B, L, H\) or \(L, H\) with H = 3, got shape \(5,\)$"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
