"""xPos as rotary with a complex frequency: the paper's real rotate-and-scale form, the score
formula, rotary as the case |w| = 1, and scores depending on m - n only."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from max_numel import MaxNumel

from cplxnet._utils import pack
from cplxnet.encodings import RotaryEncoding, XPosEncoding, create_encoding, xpos_zeta


def paper_xpos(x, downscale, scale_base=512.0, base=10000.0):
    """The published real form (torchscale XPOS), by loops: interleaved pairs (x_{2j}, x_{2j+1})
    rotated by m theta_j, theta_j = base^(-2j/D), and multiplied by zeta_j^((m + min_pos)/B) with
    zeta_j = (2j + 0.4 D) / (1.4 D) and min_pos = -(L // 2 rounded up) (``-L // 2`` in Python);
    keys (``downscale``) by the reciprocal."""
    L, D = x.shape[-2], x.shape[-1]
    min_pos = -L // 2
    out = torch.empty_like(x)
    for m in range(L):
        for j in range(D // 2):
            zeta = (2 * j + 0.4 * D) / (1.4 * D)
            s = zeta ** ((m + min_pos) / scale_base)
            if downscale:
                s = 1 / s
            t = m * base ** (-2 * j / D)
            a, b = x[..., m, 2 * j], x[..., m, 2 * j + 1]
            out[..., m, 2 * j] = (a * math.cos(t) - b * math.sin(t)) * s
            out[..., m, 2 * j + 1] = (a * math.sin(t) + b * math.cos(t)) * s
    return out


@pytest.mark.parametrize("length", [1, 6, 9])
def test_zeta_and_real_twin_equal_the_paper(length):
    """zeta_j = (2j/D + 0.4)/1.4; the real twin's rotate equals the published rotate-and-scale of
    q (upscale) and k (downscale), with the published centring."""
    D, H = 8, 2
    assert xpos_zeta(D // 2).tolist() == pytest.approx([(2 * j / D + 0.4) / 1.4 for j in range(4)])
    enc = XPosEncoding(H * D, H, dtype=torch.float64)
    q, k, v = (torch.randn(2, H, length, D, dtype=torch.float64) for _ in range(3))
    q2, k2, v2 = enc.rotate(q, k, v)
    torch.testing.assert_close(q2, paper_xpos(q, False))
    torch.testing.assert_close(k2, paper_xpos(k, True))
    assert v2 is v and not enc.state_dict()


def test_complex_heads_are_the_packed_real_form():
    """Complex heads of width Dh = real heads of width 2 Dh read as interleaved pairs: the complex
    form q_m w^m (centred) equals the paper's real form on pack(q)."""
    H, Dh, L = 2, 3, 7
    enc = XPosEncoding(H * Dh, H, dtype=torch.complex128)
    q, k = (torch.randn(1, H, L, Dh, dtype=torch.complex128) for _ in range(2))
    q2, k2, _ = enc.rotate(q, k, q)
    torch.testing.assert_close(pack(q2), paper_xpos(pack(q), False))
    torch.testing.assert_close(pack(k2), paper_xpos(pack(k), True))


@pytest.mark.parametrize("lq,lk", [(5, 5), (4, 9), (8, 3)])
def test_score_is_complex_frequency_power(lq, lk):
    """Re(q~_m conj(k~_n)) = Re(sum_j q_mj conj(k_nj) w_j^(m-n)), w_j = zeta_j^(1/B) e^(i theta_j),
    theta_j = base^(-j/Dh): the complex derivation, for any query and key lengths."""
    H, Dh, B = 1, 4, 16.0
    enc = XPosEncoding(H * Dh, H, scale_base=B, base=100.0, dtype=torch.complex128)
    q = torch.randn(1, H, lq, Dh, dtype=torch.complex128)
    k = torch.randn(1, H, lk, Dh, dtype=torch.complex128)
    q2, k2, _ = enc.rotate(q, k, k)
    scores = (q2 @ k2.conj().transpose(-1, -2)).real[0, 0]
    for m in range(lq):
        for n in range(lk):
            s = 0.0
            for j in range(Dh):
                zeta = (j / Dh + 0.4) / 1.4
                theta = 100.0 ** (-j / Dh)
                w = zeta ** (1 / B) * complex(math.cos(theta), math.sin(theta))
                qk = complex(q[0, 0, m, j]) * complex(k[0, 0, n, j]).conjugate()
                s += (qk * w ** (m - n)).real
            assert scores[m, n].item() == pytest.approx(s, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("layout", ["complex", "interleaved", "half"])
def test_unit_modulus_is_rotary(layout):
    """scale_base = inf makes zeta^(1/B) = 1: xpos is rotary (every layout)."""
    kind = torch.complex128 if layout == "complex" else torch.float64
    lay = "interleaved" if layout == "complex" else layout
    x = XPosEncoding(8, 2, scale_base=math.inf, layout=lay, dtype=kind)
    r = RotaryEncoding(8, 2, layout=lay, dtype=kind)
    q, k = (torch.randn(2, 2, 6, 4, dtype=kind) for _ in range(2))
    for a, b in zip(x.rotate(q, k, q)[:2], r.rotate(q, k, q)[:2]):
        torch.testing.assert_close(a, b)


def test_half_layout_is_a_permutation_of_interleaved():
    d, H, L = 8, 2, 9
    half = XPosEncoding(H * d, H, layout="half", dtype=torch.float64)
    inter = XPosEncoding(H * d, H, dtype=torch.float64)
    perm = torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), -1).flatten()
    q, k = (torch.randn(1, H, L, d, dtype=torch.float64) for _ in range(2))
    for a, b in zip(half.rotate(q, k, q)[:2], inter.rotate(q[..., perm], k[..., perm], q)[:2]):
        torch.testing.assert_close(a[..., perm], b)


def _scores(enc, q, k, length):
    qs = q.expand(1, 1, length, q.shape[-1])
    ks = k.expand(1, 1, length, k.shape[-1])
    q2, k2, _ = enc.rotate(qs, ks, ks)
    return (pack(q2) @ pack(k2).transpose(-1, -2))[0, 0]


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(0, 40),
    n=st.integers(0, 40),
    shift=st.integers(0, 40),
    extra=st.integers(0, 30),
    layout=st.sampled_from(["complex", "interleaved", "half"]),
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_offset(m, n, shift, extra, layout, seed):
    """The same q at position m and k at n score as at m + shift, n + shift, in a sequence of
    another length (the centre moves, the score does not)."""
    g = torch.Generator().manual_seed(seed)
    kind = torch.complex128 if layout == "complex" else torch.float64
    width = 3 if layout == "complex" else 6
    lay = "interleaved" if layout == "complex" else layout
    enc = XPosEncoding(width, 1, scale_base=64.0, layout=lay, dtype=kind)
    q, k = (torch.randn(width, dtype=kind, generator=g) for _ in range(2))
    L = max(m, n) + 1
    a = _scores(enc, q, k, L)[m, n]
    b = _scores(enc, q, k, L + shift + extra)[m + shift, n + shift]
    torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_decay_for_keys_before_the_query():
    """|w_j^(m-n)| = zeta_j^((m-n)/B) < 1 for n < m, shrinking with the distance; > 1 for n > m."""
    enc = XPosEncoding(4, 1, dtype=torch.complex128)
    q = torch.ones(1, 1, 600, 4, dtype=torch.complex128)
    q2, k2, _ = enc.rotate(q, q, q)
    mod = (q2[0, 0, :, None, :] * k2[0, 0, None, [0, 299, 599], :].conj()).abs()  # (L, 3, Dh)
    zeta = torch.tensor([(j / 4 + 0.4) / 1.4 for j in range(4)], dtype=torch.float64)
    torch.testing.assert_close(mod[599, 0], zeta ** (599 / 512))
    torch.testing.assert_close(mod[0, 2], zeta ** (-599 / 512))
    assert (mod[1:, 0] < 1).all() and (mod[1:, 0].diff(dim=0) < 0).all()


@pytest.mark.parametrize("kind", [torch.complex64, torch.float32])
def test_memory_and_checks(kind):
    """No parameters; forward and backward never build a tensor larger than q (no (L, L, d) and
    no (L, L) either: xpos acts on q and k only); long inputs stay finite; bad options."""
    enc = create_encoding("xpos", d_model=8, num_heads=2, max_len=4, dtype=kind)
    assert not list(enc.parameters())
    q = torch.randn(1, 2, 3000, 4, dtype=kind, requires_grad=True)
    mode = MaxNumel()
    with mode:
        q2, k2, _ = enc.rotate(q, q, q)
        (pack(q2).sum() + pack(k2).sum()).backward()
    assert mode.max <= pack(q).numel(), mode.max
    assert torch.isfinite(pack(q2)).all() and torch.isfinite(pack(k2)).all()
    with pytest.raises(ValueError, match="scale_base"):
        XPosEncoding(8, 2, scale_base=0)
    with pytest.raises(ValueError, match="gamma"):
        XPosEncoding(8, 2, gamma=-1.0)
    other = torch.float32 if kind.is_complex else torch.complex64
    with pytest.raises(TypeError, match="built for (complex|real) heads"):
        enc.rotate(*(torch.randn(1, 2, 3, 4, dtype=other) for _ in range(3)))
