"""Rotary (RoPE) as one complex multiplication; real layouts as views of the same algebra."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cplxnet._utils import pack
from cplxnet.encodings import RotaryEncoding


def explicit_rope_half(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoFormer/GPT-NeoX ``rotate_half`` form, written out: x * cos + rotate_half(x) * sin with
    theta_j = base^(-2j/d), cos/sin repeated over both halves."""
    L, d = x.shape[-2], x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = torch.arange(L, dtype=torch.float64)[:, None] * theta
    cos = torch.cat((ang.cos(), ang.cos()), -1)
    sin = torch.cat((ang.sin(), ang.sin()), -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    rotate_half = torch.cat((-x2, x1), -1)
    return x * cos + rotate_half * sin


def explicit_rope_interleaved(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoFormer Eq. 34 (pairs (x_{2j}, x_{2j+1}) rotated by m theta_j), by loops."""
    L, d = x.shape[-2], x.shape[-1]
    out = torch.empty_like(x)
    for m in range(L):
        for j in range(d // 2):
            t = m * base ** (-2 * j / d)
            a, b = x[..., m, 2 * j], x[..., m, 2 * j + 1]
            out[..., m, 2 * j] = a * math.cos(t) - b * math.sin(t)
            out[..., m, 2 * j + 1] = a * math.sin(t) + b * math.cos(t)
    return out


def test_complex_rotary_is_one_multiplication():
    """``q_m -> q_m exp(i m theta)``, ``theta_j = base^(-j/Dh)`` for complex head width Dh."""
    B, H, L, Dh = 2, 3, 9, 4
    enc = RotaryEncoding(H * Dh, H, base=500.0, dtype=torch.complex128)
    q, k, v = (torch.randn(B, H, L, Dh, dtype=torch.complex128) for _ in range(3))
    q2, k2, v2 = enc.rotate(q, k, v)
    theta = 500.0 ** (-torch.arange(Dh, dtype=torch.float64) / Dh)
    rot = torch.exp(1j * torch.arange(L, dtype=torch.float64)[:, None] * theta)
    torch.testing.assert_close(q2, q * rot)
    torch.testing.assert_close(k2, k * rot)
    assert v2 is v
    assert len(enc.state_dict()) == 0


def test_interleaved_real_rope_is_the_complex_view():
    """Real heads of width d, interleaved: pairs are complex numbers (pack order), so the real
    result is ``pack(unpack(x) * exp(i m theta))`` with ``theta_j = base^(-2j/d)``: RoFormer's
    formula."""
    B, H, L, d = 2, 2, 7, 6
    enc = RotaryEncoding(H * d, H, dtype=torch.float64)
    x = torch.randn(B, H, L, d, dtype=torch.float64)
    out = enc.rotate_one(x)
    torch.testing.assert_close(out, explicit_rope_interleaved(x))
    cenc = RotaryEncoding(H * d // 2, H, dtype=torch.complex128)
    xc = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    torch.testing.assert_close(out, pack(cenc.rotate_one(xc)))


def test_half_layout_equals_complex_multiplication_after_permutation():
    """``rotate_half`` pairs feature j with j + d/2. With ``perm = [0, d/2, 1, d/2+1, ...]``
    (half -> interleaved order), ``half(x)[..., perm] = interleaved(x[..., perm])``."""
    B, H, L, d = 2, 2, 11, 8
    half = RotaryEncoding(H * d, H, layout="half", dtype=torch.float64)
    inter = RotaryEncoding(H * d, H, layout="interleaved", dtype=torch.float64)
    x = torch.randn(B, H, L, d, dtype=torch.float64)
    out = half.rotate_one(x)
    torch.testing.assert_close(out, explicit_rope_half(x))
    perm = torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), -1).flatten()
    torch.testing.assert_close(out[..., perm], inter.rotate_one(x[..., perm]))


def test_rotate_values_and_long_inputs():
    """``rotate_values`` rotates v by its position; inputs longer than the initial cache extend
    it with the same values."""
    H, Dh = 2, 3
    enc = RotaryEncoding(H * Dh, H, rotate_values=True, max_len=4, dtype=torch.complex128)
    q = torch.randn(1, H, 5, Dh, dtype=torch.complex128)
    k = torch.randn(1, H, 40, Dh, dtype=torch.complex128)
    v = torch.randn(1, H, 40, Dh, dtype=torch.complex128)
    q2, k2, v2 = enc.rotate(q, k, v)
    theta = 10000 ** (-torch.arange(Dh, dtype=torch.float64) / Dh)
    rot = torch.exp(1j * torch.arange(40, dtype=torch.float64)[:, None] * theta)
    torch.testing.assert_close(q2, q * rot[:5])
    torch.testing.assert_close(k2, k * rot)
    torch.testing.assert_close(v2, v * rot)
    for layout in ("interleaved", "half"):
        r = RotaryEncoding(H * 4, H, layout=layout, max_len=2, dtype=torch.float64)
        ref = RotaryEncoding(H * 4, H, layout=layout, max_len=64, dtype=torch.float64)
        x = torch.randn(1, H, 50, 4, dtype=torch.float64)
        torch.testing.assert_close(r.rotate_one(x), ref.rotate_one(x))


def test_strided_real_heads():
    """q, k as MultiheadAttention produces them (views of one projection) need no copy to work."""
    B, L, H, d = 2, 5, 2, 4
    qkv = torch.randn(B, L, 3 * H * d, dtype=torch.float64)
    q, k, v = (t.unflatten(-1, (H, d)).transpose(1, 2) for t in qkv.chunk(3, -1))
    enc = RotaryEncoding(H * d, H, dtype=torch.float64)
    q2, k2, _ = enc.rotate(q, k, v)
    torch.testing.assert_close(q2, explicit_rope_interleaved(q))


def test_checks():
    enc = RotaryEncoding(8, 2)
    with pytest.raises(TypeError, match="built for complex heads"):
        enc.rotate(*(torch.randn(1, 2, 3, 4) for _ in range(3)))
    with pytest.raises(ValueError, match=r"\(B, H, L, 4\)"):
        enc.rotate(*(torch.randn(1, 2, 3, 5, dtype=torch.cfloat) for _ in range(3)))
    with pytest.raises(ValueError, match="must be even"):
        RotaryEncoding(6, 2, dtype=torch.float32)


def _score(enc, q, k, m, n):
    """Re(<rot(q, m), rot(k, n)>) with q, k rotated by the public ``rotate`` of sequences."""
    L = max(m, n) + 1
    qs = q.expand(1, 1, L, q.shape[-1])
    ks = k.expand(1, 1, L, k.shape[-1])
    rq, rk, _ = enc.rotate(qs, ks, ks)
    return (pack(rq[0, 0, m]) * pack(rk[0, 0, n])).sum()


def _pairs(x, layout):
    """The complex numbers a layout rotates, and their frequencies ``theta_j``."""
    if layout == "complex":
        return x, 10000.0 ** (-torch.arange(x.shape[-1], dtype=torch.float64) / x.shape[-1])
    d = x.shape[-1]
    z = torch.complex(x[0::2], x[1::2]) if layout == "interleaved" else torch.complex(*x.chunk(2))
    return z, 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(0, 60),
    n=st.integers(0, 60),
    shift=st.integers(0, 60),
    layout=st.sampled_from(["complex", "interleaved", "half"]),
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_offset(m, n, shift, layout, seed):
    """``Re(q_m e^{im theta} (k_n e^{in theta})^H) = Re(q_m k_n^H e^{i(m-n) theta})``: the score
    is that formula, so shifting both positions by the same amount leaves it unchanged."""
    g = torch.Generator().manual_seed(seed)
    if layout == "complex":
        enc = RotaryEncoding(6, 1, dtype=torch.complex128)
        q = torch.randn(6, dtype=torch.complex128, generator=g)
        k = torch.randn(6, dtype=torch.complex128, generator=g)
    else:
        enc = RotaryEncoding(8, 1, layout=layout, dtype=torch.float64)
        q = torch.randn(8, dtype=torch.float64, generator=g)
        k = torch.randn(8, dtype=torch.float64, generator=g)
    (zq, theta), (zk, _) = _pairs(q, layout), _pairs(k, layout)
    want = (zq * zk.conj() * torch.exp(1j * (m - n) * theta)).real.sum()
    a = _score(enc, q, k, m, n)
    b = _score(enc, q, k, m + shift, n + shift)
    torch.testing.assert_close(a, want, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(b, want, atol=1e-10, rtol=1e-10)
