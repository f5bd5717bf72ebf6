"""Absolute encodings acting on the input: trainable, hierarchical, sinusoidal, floater,
multiplicative; each derived special case is checked against its derivation."""

import math

import pytest
import torch

from cplxnet._utils import pack
from cplxnet.encodings import (
    ComplexOrderEncoding,
    FloaterEncoding,
    HierarchicalEncoding,
    MultiplicativeEncoding,
    SinusoidalEncoding,
    TrainableEncoding,
    create_encoding,
    hierarchical_positions,
)


def vaswani(length: int, d: int) -> torch.Tensor:
    """The real sinusoidal encoding exactly as Vaswani et al. write it (float64)."""
    pe = torch.zeros(length, d, dtype=torch.float64)
    for pos in range(length):
        for i in range(d // 2):
            pe[pos, 2 * i] = math.sin(pos / 10000 ** (2 * i / d))
            pe[pos, 2 * i + 1] = math.cos(pos / 10000 ** (2 * i / d))
    return pe


def swap_pairs(x: torch.Tensor) -> torch.Tensor:
    """The permutation exchanging indices 2j and 2j+1 of the last dimension."""
    return x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)


# ------------------------------------------------------------------------------- sinusoidal


@pytest.mark.parametrize("d", [2, 12, 64])
def test_real_sinusoidal_is_vaswanis_table_and_a_permuted_exp_ikw(d):
    """Real width d: exactly the paper's table (sin at even, cos at odd indices,
    ``w_j = 10000^(-2j/d)``); it is the packed complex ``exp(i k w)`` of ``d/2`` features with
    each (cos, sin) pair swapped, i.e. ``pack(i conj(exp(i k w)))``."""
    L = 40
    real = SinusoidalEncoding(d, dtype=torch.float64).table(L)
    pe = vaswani(L, d)
    torch.testing.assert_close(real, pe, rtol=0, atol=1e-12)
    assert SinusoidalEncoding(d, dtype=torch.float32).table(L).dtype == torch.float32
    # complex width D = d/2 with w_j = 10000^(-j/D): exp(i k w), the permuted real table
    cplx = SinusoidalEncoding(d // 2, dtype=torch.complex128).table(L)
    k = torch.arange(L, dtype=torch.float64)[:, None]
    w = 10000 ** (-torch.arange(d // 2, dtype=torch.float64) / (d // 2))
    torch.testing.assert_close(cplx, torch.exp(1j * k * w))
    torch.testing.assert_close(swap_pairs(pack(cplx)), real)
    torch.testing.assert_close(pack(1j * cplx.conj()), real)
    x = torch.randn(2, L, d, dtype=torch.float64)
    enc = SinusoidalEncoding(d, dtype=torch.float64)
    torch.testing.assert_close(enc.encode_input(x), x + pe, rtol=0, atol=1e-12)


def test_complex_sinusoidal_of_width_d_is_real_sinusoidal_of_width_2d():
    """For a complex model of width D, ``w_j = 10000^(-j/D)``, j < D: the packed complex table is
    the real table of width 2D up to the swap of each pair."""
    D = 7
    c = SinusoidalEncoding(D, dtype=torch.complex128).table(30)
    r = SinusoidalEncoding(2 * D, dtype=torch.float64).table(30)
    torch.testing.assert_close(swap_pairs(pack(c)), r)


def test_sinusoidal_equals_complex_order_with_unit_amplitude_no_phase_shared_frozen_freqs():
    """``f(j, pos) = r e^{i(w pos + theta)}`` with ``r = 1``, ``theta = 0`` and ``w`` shared by all
    words (the sinusoidal frequencies, frozen) is ``e^{i pos w}`` for every word: sinusoidal."""
    V, D, L = 9, 6, 15
    co = ComplexOrderEncoding(
        V, D, phase=False, frequency="shared", amplitude="shared", dtype=torch.complex128
    )
    co.requires_grad_(False)
    assert torch.all(co.amplitude_weight == 1)
    ids = torch.randint(0, V, (3, L))
    expect = SinusoidalEncoding(D, dtype=torch.complex128).table(L)
    torch.testing.assert_close(co.embed(ids), expect.expand(3, L, D))
    # the real twins agree too
    co_r = ComplexOrderEncoding(
        V, 2 * D, phase=False, frequency="shared", amplitude="shared", dtype=torch.float64
    )
    # (complex-order's real twin packs e^{i pos w} as (cos, sin): Vaswani's pairs swapped)
    expect_r = swap_pairs(SinusoidalEncoding(2 * D, dtype=torch.float64).table(L))
    torch.testing.assert_close(co_r.embed(ids), expect_r.expand(3, L, 2 * D))


@pytest.mark.parametrize("a,b", [(0, 5), (3, 4), (17, 29), (100, 7)])
def test_sinusoidal_shift_is_a_fixed_linear_map(a, b):
    """``p_{a+b} = R(b) p_a`` with ``R(b)`` block-diagonal rotations by ``b w_j`` (independent of
    ``a``; on Vaswani's (sin, cos) pairs the rotation by ``-b w_j``); in complex numbers simply
    ``exp(i(a+b)w) = exp(iaw) exp(ibw)``."""
    d = 10
    p = SinusoidalEncoding(d, dtype=torch.float64).table(a + b + 1)
    w = 10000 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    R = torch.zeros(d, d, dtype=torch.float64)
    for j in range(d // 2):
        c, s = math.cos(b * w[j]), math.sin(b * w[j])
        R[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(p[a + b], R @ p[a])
    pc = SinusoidalEncoding(d // 2, dtype=torch.complex128).table(a + b + 1)
    torch.testing.assert_close(pc[a + b], pc[a] * pc[b])


def test_sinusoidal_adds_any_length_without_state():
    enc = SinusoidalEncoding(4, dtype=torch.complex128)
    assert len(enc.state_dict()) == 0 and len(list(enc.parameters())) == 0
    x = torch.randn(2, 300, 4, dtype=torch.complex128)  # longer than the initial cache
    torch.testing.assert_close(enc.encode_input(x), x + enc.table(300))
    k = torch.arange(300, dtype=torch.float64)[:, None]
    w = 10000 ** (-torch.arange(4, dtype=torch.float64) / 4)
    torch.testing.assert_close(enc.table(300), torch.exp(1j * k * w))


def test_encode_input_checks_kind_and_width():
    enc = SinusoidalEncoding(4)
    with pytest.raises(TypeError, match="built for a complex model"):
        enc.encode_input(torch.randn(1, 3, 4))
    with pytest.raises(ValueError, match="last dimension 4"):
        enc.encode_input(torch.randn(1, 3, 5, dtype=torch.cfloat))
    with pytest.raises(ValueError, match="must be even"):
        SinusoidalEncoding(5, dtype=torch.float32)


# ------------------------------------------------------------------------- trainable


def test_trainable_adds_table_and_rejects_long_inputs():
    enc = TrainableEncoding(6, max_len=10, dtype=torch.complex128)
    x = torch.randn(2, 7, 6, dtype=torch.complex128)
    torch.testing.assert_close(enc.encode_input(x), x + enc.weight[:7])
    with pytest.raises(ValueError) as info:
        enc.encode_input(torch.randn(2, 11, 6, dtype=torch.complex128))
    msg = str(info.value)
    assert "max_len=10" in msg and "11" in msg and "extrapolate='hierarchical'" in msg


def test_trainable_init_variance_complex():
    """Complex table: total variance std**2 (not 2 std**2)."""
    enc = TrainableEncoding(64, max_len=512, std=0.5, dtype=torch.complex128)
    var = enc.weight.detach().abs().pow(2).mean()
    assert abs(var.item() - 0.25) < 0.01


def test_trainable_hierarchical_extrapolation_matches_hierarchical_encoding():
    enc = TrainableEncoding(4, max_len=5, extrapolate="hierarchical", dtype=torch.float64)
    hier = HierarchicalEncoding.from_trained(enc)
    x = torch.randn(1, 23, 4, dtype=torch.float64)
    torch.testing.assert_close(enc.encode_input(x), hier.encode_input(x))
    with pytest.raises(ValueError, match="max_len\\*\\*2 = 25"):
        enc.encode_input(torch.randn(1, 26, 4, dtype=torch.float64))


# ----------------------------------------------------------------------- hierarchical


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_hierarchical_formula(dtype):
    """Su (2020), 0-based: ``u_i = (p_i - alpha p_0)/(1 - alpha)``,
    ``q_{i n + j} = alpha u_i + (1 - alpha) u_j``; since ``u_0 = p_0``, ``q_j = p_j`` for j < n."""
    n, D, alpha = 6, 3, 0.4
    trained = TrainableEncoding(D, max_len=n, dtype=dtype)
    enc = HierarchicalEncoding.from_trained(trained, alpha=alpha)
    p = trained.weight.detach()
    q = enc.table(n * n).detach()
    assert torch.equal(q[:n], p)  # first n positions unchanged, exactly
    for i in range(n):
        for j in range(n):
            u_i = (p[i] - alpha * p[0]) / (1 - alpha)
            u_j = (p[j] - alpha * p[0]) / (1 - alpha)
            torch.testing.assert_close(q[i * n + j], alpha * u_i + (1 - alpha) * u_j)
    with pytest.raises(ValueError, match="max_len\\*\\*2"):
        enc.table(n * n + 1)
    assert torch.equal(hierarchical_positions(p, 4), p[:4])


# ---------------------------------------------------------------------------- floater


def test_floater_with_rotation_generator_reproduces_sinusoidal():
    """``dp/dt = i w p``, ``p(0) = 1``, ``t_k = k`` gives ``p(t_k) = exp(i k w)``: sinusoidal.
    RK4 with step h = 1/16: phase error about t w^5 h^4 / 120 <= 3e-6 at t = 23."""
    D, L = 6, 24
    w = 10000 ** (-torch.arange(D, dtype=torch.float64) / D)
    enc = FloaterEncoding(
        D, delta=1.0, substeps=16, dynamics=lambda p, t: 1j * w * p, dtype=torch.complex128
    )
    with torch.no_grad():
        enc.p0.fill_(1.0)
    expect = SinusoidalEncoding(D, dtype=torch.complex128).table(L)
    torch.testing.assert_close(enc.table(L), expect, atol=1e-5, rtol=0)
    # real twin: the same generator acting on packed pairs (x, y) -> w (-y, x)
    wr = 10000 ** (-2 * torch.arange(D // 2, dtype=torch.float64) / D)

    def rot(p, t):
        x, y = p[..., 0::2], p[..., 1::2]
        return torch.stack((-wr * y, wr * x), dim=-1).flatten(-2)

    enc_r = FloaterEncoding(D, delta=1.0, substeps=16, dynamics=rot, dtype=torch.float64)
    with torch.no_grad():
        enc_r.p0.copy_(torch.tensor([1.0, 0.0] * (D // 2)))
    expect_r = swap_pairs(SinusoidalEncoding(D, dtype=torch.float64).table(L))  # (cos, sin) pairs
    torch.testing.assert_close(enc_r.table(L), expect_r, atol=1e-5, rtol=0)


def test_floater_rk4_is_fourth_order():
    """Halving the step divides the error of dp/dt = i p by about 2^4 = 16."""
    errs = []
    for sub in (1, 2, 4):
        enc = FloaterEncoding(
            1, delta=0.5, substeps=sub, dynamics=lambda p, t: 1j * p, dtype=torch.complex128
        )
        with torch.no_grad():
            enc.p0.fill_(1.0)
        k = torch.arange(40, dtype=torch.float64)
        errs.append((enc.table(40)[:, 0] - torch.exp(0.5j * k)).abs().max().item())
    assert 12 < errs[0] / errs[1] < 20 and 12 < errs[1] / errs[2] < 20


def test_floater_default_dynamics_trains():
    enc = FloaterEncoding(4, dtype=torch.complex64)
    x = torch.randn(2, 9, 4, dtype=torch.complex64)
    y = enc.encode_input(x)
    assert y.shape == x.shape
    y.abs().sum().backward()
    assert enc.p0.grad is not None and enc.dynamics.inp.weight.grad is not None
    assert set(enc.state_dict()) >= {"p0", "dynamics.inp.weight", "dynamics.out.weight"}


def test_floater_time_dependence():
    """``t`` reaches the dynamics: dp/dt = t gives p(t) = p0 + t^2/2 (RK4 exact on polynomials
    of degree <= 4)."""
    enc = FloaterEncoding(
        2, delta=0.3, dynamics=lambda p, t: t * torch.ones_like(p), dtype=torch.float64
    )
    t = 0.3 * torch.arange(10, dtype=torch.float64)[:, None]
    torch.testing.assert_close(enc.table(10), enc.p0.detach() + t**2 / 2)


# ------------------------------------------------------------------------ multiplicative


def test_multiplicative_sinusoidal_rotates_each_feature():
    """Complex: ``x_k * exp(i k w)``; real twin: the same rotation of each adjacent pair, i.e.
    ``pack(unpack(x) * exp(i k w))``."""
    B, L, D = 2, 13, 4
    enc = MultiplicativeEncoding(D, dtype=torch.complex128)
    x = torch.randn(B, L, D, dtype=torch.complex128)
    torch.testing.assert_close(
        enc.encode_input(x), x * SinusoidalEncoding(D, dtype=torch.complex128).table(L)
    )
    enc_r = MultiplicativeEncoding(2 * D, dtype=torch.float64)
    torch.testing.assert_close(enc_r.encode_input(pack(x)), pack(enc.encode_input(x)))
    # relative: Re(<x_a p_a, y_b p_b>) depends only on a - b for fixed content x, y
    x1 = torch.randn(D, dtype=torch.complex128)
    y1 = torch.randn(D, dtype=torch.complex128)
    seq = torch.stack([x1] * 20 + [y1] * 20)[None]  # positions 0..19 hold x1, 20..39 hold y1
    z = enc.encode_input(seq)[0]

    def score(a, b):
        return torch.real(z[a] @ z[20 + b].conj())

    torch.testing.assert_close(score(3, 5), score(7, 9))
    assert len(enc.state_dict()) == 0


def test_multiplicative_trainable():
    enc = MultiplicativeEncoding(3, kind="trainable", max_len=8, dtype=torch.complex128)
    x = torch.randn(2, 5, 3, dtype=torch.complex128)
    torch.testing.assert_close(enc.encode_input(x), x * enc.weight[:5])
    assert (enc.weight - 1).abs().max() < 0.2  # starts near the identity
    with pytest.raises(ValueError, match="max_len=8"):
        enc.encode_input(torch.randn(1, 9, 3, dtype=torch.complex128))


def test_absolute_encodings_keep_dtype_of_model():
    for name in ("trainable", "hierarchical", "sinusoidal", "floater", "multiplicative"):
        for dt in (torch.complex64, torch.complex128, torch.float32, torch.float64):
            enc = create_encoding(name, d_model=6, max_len=12, dtype=dt)
            x = torch.randn(2, 5, 6, dtype=dt)
            assert enc.encode_input(x).dtype == dt, (name, dt)


def test_hierarchical_is_trainable_with_the_extension_on():
    """One implementation: ``hierarchical`` is ``trainable`` with extrapolate='hierarchical'
    (same code path, same state_dict), so a trained trainable table loads into it as is."""
    assert issubclass(HierarchicalEncoding, TrainableEncoding)
    assert HierarchicalEncoding.table is TrainableEncoding.table
    trained = TrainableEncoding(4, max_len=5, dtype=torch.complex128)
    hier = HierarchicalEncoding(4, max_len=5, dtype=torch.complex128)
    hier.load_state_dict(trained.state_dict())
    trained.extrapolate = "hierarchical"
    x = torch.randn(2, 17, 4, dtype=torch.complex128)
    assert torch.equal(hier.encode_input(x), trained.encode_input(x))
    assert hier.extrapolate == "hierarchical" and hier.name == "hierarchical"
