"""Relative schemes (shaw, xl, t5, deberta) against direct O(n^2) formulas written plainly.

Each scheme receives packed real q, k (complex model: width 2 Dh; real model: width Dh), so
every test runs for both kinds; only the content scale 1/sqrt(Dh) differs.
"""

import math

import numpy as np
import pytest
import torch
from max_numel import MaxNumel

from cplxnet.encodings import (
    AlibiEncoding,
    DebertaEncoding,
    ShawEncoding,
    T5Encoding,
    XLEncoding,
    make_log_bucket_position,
    relative_position_bucket,
)

B, H, Dh = 2, 2, 3  # Dh: complex head width (real model: head width 2 Dh, same packed width)
KINDS = [torch.complex128, torch.float64]


def setup(kind, lq=6, lk=8):
    """Encoding kwargs and random packed q, k for a complex or real model of the same packed
    width P = 2 Dh."""
    d_model = H * Dh if kind.is_complex else H * 2 * Dh
    P = 2 * Dh
    q = torch.randn(B, H, lq, P, dtype=torch.float64, requires_grad=True)
    k = torch.randn(B, H, lk, P, dtype=torch.float64, requires_grad=True)
    scale = 1 / math.sqrt(Dh if kind.is_complex else 2 * Dh)
    return dict(d_model=d_model, num_heads=H, dtype=kind), q, k, scale


def randomize(enc):
    with torch.no_grad():
        for p in enc.parameters():
            p.copy_(torch.randn_like(p))


def check_values_and_grads(enc, fast_fn, direct_fn, inputs):
    """Same values, and the same gradients w.r.t. inputs and every parameter."""
    fast, ref = fast_fn(), direct_fn()
    torch.testing.assert_close(fast, ref)
    probe = torch.randn_like(ref)
    params = [p for p in enc.parameters() if p.requires_grad]
    g_fast = torch.autograd.grad((fast * probe).sum(), inputs + params, allow_unused=True)
    g_ref = torch.autograd.grad((ref * probe).sum(), inputs + params, allow_unused=True)
    for a, b in zip(g_fast, g_ref):
        if a is None or b is None:
            assert (a is None or not a.any()) and (b is None or not b.any())
        else:
            torch.testing.assert_close(a, b)


# ------------------------------------------------------------------------------------ shaw


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("kmax", [0, 2, 16])
def test_shaw_logits_and_values_direct(kind, kmax):
    """e_ij += q_i . w^K[clip(j-p_i, -k, k)] / sqrt(Dh); z_i += sum_j a_ij w^V[clip(j-p_i, -k, k)]
    with the queries at the end of the keys, p_i = Lk - Lq + i."""
    kw, q, k, scale = setup(kind)
    enc = ShawEncoding(max_relative_position=kmax, **kw)
    randomize(enc)
    Lq, Lk = q.shape[2], k.shape[2]

    def direct_bias():
        out = torch.zeros(B, H, Lq, Lk, dtype=torch.float64)
        for i in range(Lq):
            for j in range(Lk):
                r = min(max(j - (Lk - Lq + i), -kmax), kmax) + kmax
                out[:, :, i, j] = (q[:, :, i, :] * enc.rel_keys[r]).sum(-1) * scale
        return out

    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct_bias, [q, k])

    a = torch.softmax(torch.randn(B, H, Lq, Lk, dtype=torch.float64), -1).requires_grad_()

    def direct_values():
        out = torch.zeros(B, H, Lq, 2 * Dh, dtype=torch.float64)
        for i in range(Lq):
            for j in range(Lk):
                r = min(max(j - (Lk - Lq + i), -kmax), kmax) + kmax
                out[:, :, i, :] += a[:, :, i, j, None] * enc.rel_values[r]
        return out

    check_values_and_grads(enc, lambda: enc.value_term(a), direct_values, [a])


def test_shaw_without_values():
    enc = ShawEncoding(8, 2, values=False)
    assert enc.acts_on == {"logits"} and not enc.has_value_term
    assert enc.value_term(torch.rand(1, 2, 3, 3)) is None


# -------------------------------------------------------------------------------------- xl


@pytest.mark.parametrize("kind", KINDS)
def test_xl_direct(kind):
    """extra_ij = [ (q_i + v) . W_{K,R} R_{i-j} + u . k_j ] / sqrt(Dh), with R_r the packed
    sinusoid [cos r w_0, sin r w_0, ...], w_m = 10000^(-m/n), n complex features of d_model;
    the Lq = 5 queries are the last key positions (i = Lk - Lq + 0 .. Lk - 1, Transformer-XL's
    memory before them)."""
    kw, q, k, scale = setup(kind, lq=5, lk=7)
    enc = XLEncoding(**kw)
    randomize(enc)
    n = kw["d_model"] if kind.is_complex else kw["d_model"] // 2
    w = [10000 ** (-m / n) for m in range(n)]
    W = enc.rel_proj.view(H, 2 * Dh, 2 * n)
    Lq, Lk = q.shape[2], k.shape[2]

    def sinusoid(r):
        vals = []
        for m in range(n):
            vals += [math.cos(r * w[m]), math.sin(r * w[m])]
        return torch.tensor(vals, dtype=torch.float64)

    def direct():
        out = torch.zeros(B, H, Lq, Lk, dtype=torch.float64)
        for h in range(H):
            for i in range(Lq):
                for j in range(Lk):
                    WR = W[h] @ sinusoid(Lk - Lq + i - j)
                    bd = ((q[:, h, i] + enc.v[h]) * WR).sum(-1)
                    c = (enc.u[h] * k[:, h, j]).sum(-1)
                    out[:, h, i, j] = (bd + c) * scale
        return out

    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [q, k])


# -------------------------------------------------------------------------------------- t5


def test_t5_bucket_table_exact():
    """Bidirectional, 32 buckets, max distance 128, keys before the query (j < i):
    i - j = 0..7 -> 0..7; 8-11 -> 8; 12-15 -> 9; 16-22 -> 10; 23-30 -> 11. Equivalently
    unidirectional with 16 buckets."""
    expect = list(range(8)) + [8] * 4 + [9] * 4 + [10] * 7 + [11] * 8
    d = torch.arange(31)
    assert relative_position_bucket(-d, True, 32, 128).tolist() == expect
    assert relative_position_bucket(-d, False, 16, 128).tolist() == expect
    # keys after the query use the upper half of the buckets (bidirectional)
    assert relative_position_bucket(d[1:], True, 32, 128).tolist() == [16 + e for e in expect[1:]]
    # unidirectional: keys after the query share bucket 0
    assert relative_position_bucket(d, False, 32, 128).tolist() == [0] * 31


def t5_bucket_python(rel, bidirectional=True, num_buckets=32, max_distance=128):
    """Mesh TensorFlow's _relative_position_bucket, for one Python int (float64 logs)."""
    ret, n = 0, -rel
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(
        math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    )
    return ret + min(val, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 50), (8, 20)])
def test_t5_bucket_matches_reference(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-300, 301)
    ours = relative_position_bucket(rel, bidirectional, num_buckets, max_distance).tolist()
    ref = [t5_bucket_python(r, bidirectional, num_buckets, max_distance) for r in range(-300, 301)]
    assert ours == ref


@pytest.mark.parametrize("kind", KINDS)
def test_t5_direct(kind):
    """bias[h, i, j] = table[bucket(j - p_i), h] (p_i = Lk - Lq + i: the queries are the last Lq
    key positions), unscaled, independent of q, k values."""
    kw, q, k, _ = setup(kind, lq=40, lk=150)
    enc = T5Encoding(H, dtype=kind)
    randomize(enc)
    Lq, Lk = q.shape[2], k.shape[2]

    def direct():
        out = torch.zeros(1, H, Lq, Lk, dtype=torch.float64)
        for i in range(Lq):
            for j in range(Lk):
                out[0, :, i, j] = enc.weight[t5_bucket_python(j - (Lk - Lq + i))]
        return out

    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [])


@pytest.mark.parametrize("causal", [False, True])
def test_t5_follows_the_causal_context(causal):
    """A causal model (the registry's ``causal=True``) gets T5's decoder buckets (unidirectional:
    all buckets measure distances to earlier keys); an explicit ``bidirectional`` wins."""
    from cplxnet.encodings import create_encoding

    enc = create_encoding("t5", d_model=2 * H, num_heads=H, causal=causal)
    assert enc.bidirectional is (not causal)
    with torch.no_grad():
        enc.weight.copy_(torch.randn(enc.weight.shape, dtype=enc.weight.dtype))
    q = torch.zeros(1, H, 150, 2)
    bias = enc.logits_bias(q, q)
    for i, j in ((149, 0), (100, 37), (20, 3), (5, 5), (3, 20)):
        ref = enc.weight[t5_bucket_python(j - i, not causal)]
        assert torch.equal(bias[0, :, i, j], ref)
    forced = create_encoding("t5", d_model=2 * H, num_heads=H, causal=True, bidirectional=True)
    assert forced.bidirectional is True
    assert T5Encoding(H).bidirectional is True and T5Encoding(H, causal=True).bidirectional is False


# --------------------------------------------------------------------------------- deberta


def log_bucket_numpy(rel, bucket_size, max_position):
    """DeBERTa's official make_log_bucket_position (numpy, float64)."""
    sign = np.sign(rel)
    mid = bucket_size // 2
    abs_pos = np.where((rel < mid) & (rel > -mid), mid - 1, np.abs(rel))
    log_pos = np.ceil(np.log(abs_pos / mid) / np.log((max_position - 1) / mid) * (mid - 1)) + mid
    return np.where(abs_pos <= mid, rel, log_pos * sign).astype(np.int64)


def test_log_buckets_match_numpy():
    rel = np.arange(-700, 701)
    for size, maxpos in [(256, 512), (8, 32), (16, 100)]:
        ours = make_log_bucket_position(torch.from_numpy(rel), size, maxpos).numpy()
        assert (ours == log_bucket_numpy(rel, size, maxpos)).all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "opts",
    [
        dict(max_relative_positions=3),
        dict(max_relative_positions=64),
        dict(max_relative_positions=12, position_buckets=4),
        dict(max_relative_positions=4, p2c_index="paper"),
        dict(max_relative_positions=12, position_buckets=4, p2c_index="paper"),
    ],
)
def test_deberta_direct(kind, opts):
    """extra_ij = [q_i . K_r[d(i,j)] + k_j . Q_r[d'(i,j)]] / sqrt(3 Dh), K_r = P W_kr^T,
    Q_r = P W_qr^T + b, d(i,j) = clamp(rel(i,j) + k, 0, 2k-1) with rel = i - j (log-bucketed
    when position_buckets > 0); d' = d (released code) or clamp(rel(j,i) + k) (paper Eq. 4)."""
    kw, q, k, scale = setup(kind, lq=7, lk=9)
    enc = DebertaEncoding(**kw, **opts)
    randomize(enc)
    assert enc.logit_scale == pytest.approx(1 / math.sqrt(3))
    span = enc.span
    P = 2 * Dh
    Wk = enc.pos_key_proj.view(H, P, -1)
    Wq = enc.pos_query_proj.view(H, P, -1)
    bq = enc.pos_query_bias.view(H, P)
    Lq, Lk = q.shape[2], k.shape[2]

    def rel(a, b):
        r = a - b
        if enc.position_buckets > 0:
            r = int(log_bucket_numpy(np.array(r), enc.position_buckets, enc.max_relative_positions))
        return r

    def delta(a, b):
        return min(max(rel(a, b) + span, 0), 2 * span - 1)

    def direct():
        out = torch.zeros(B, H, Lq, Lk, dtype=torch.float64)
        for h in range(H):
            for i in range(Lq):
                for j in range(Lk):
                    pi = Lk - Lq + i  # the queries are the last Lq key positions
                    Kr = Wk[h] @ enc.rel_embeddings[delta(pi, j)]
                    dp = delta(pi, j) if enc.p2c_index == "code" else delta(j, pi)
                    Qr = Wq[h] @ enc.rel_embeddings[dp] + bq[h]
                    c2p = (q[:, h, i] * Kr).sum(-1)
                    p2c = (k[:, h, j] * Qr).sum(-1)
                    out[:, h, i, j] = (c2p + p2c) * scale / math.sqrt(3)
        return out

    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [q, k])


@pytest.mark.parametrize("kind", [torch.complex128, torch.float64])
def test_deberta_absolute_layers(kind):
    """absolute_layers=2 of 5: layers 3 and 4 get x + p[:L], earlier layers x unchanged."""
    enc = DebertaEncoding(8, 2, absolute_layers=2, max_len=10, dtype=kind)
    assert enc.acts_on == {"logits", "layer"}
    x = torch.randn(2, 6, 8, dtype=kind)
    for layer in range(5):
        y = enc.layer_input(x, layer, 5)
        expect = x + enc.abs_embeddings[:6] if layer >= 3 else x
        torch.testing.assert_close(y, expect)
    with pytest.raises(ValueError, match="max_len=10"):
        enc.layer_input(torch.randn(1, 11, 8, dtype=kind), 4, 5)


# ---------------------------------------------------------------------------------- memory


@pytest.mark.parametrize("name", ["shaw", "xl", "t5", "alibi", "deberta"])
@pytest.mark.parametrize("kind", KINDS)
def test_no_n_n_d_tensor(name, kind):
    """Forward and backward of every relative scheme stay O(B H L^2 + L d): no op ever produces
    a tensor of B*H*L*L*P elements (what a naive (L, L, d) formulation needs)."""
    cls = {
        "shaw": ShawEncoding,
        "xl": XLEncoding,
        "t5": T5Encoding,
        "alibi": AlibiEncoding,
        "deberta": DebertaEncoding,
    }
    L, P = 64, 32
    d_model = H * (P // 2 if kind.is_complex else P)
    opts = {"max_relative_positions": 128} if name == "deberta" else {}
    if name == "shaw":
        opts = {"max_relative_position": 64}
    if name not in ("t5", "alibi"):
        opts["d_model"] = d_model
    enc = cls[name](num_heads=H, dtype=kind, **opts)
    q = torch.randn(1, H, L, P, requires_grad=True)
    k = torch.randn(1, H, L, P, requires_grad=True)
    mode = MaxNumel()
    with mode:
        out = enc.logits_bias(q, k)
        if enc.has_value_term:
            out = out + enc.value_term(torch.softmax(out, -1)).sum()
        if out.requires_grad:  # alibi: a constant bias, nothing to differentiate
            out.sum().backward()
    assert mode.max < H * L * L * P / 4, mode.max
