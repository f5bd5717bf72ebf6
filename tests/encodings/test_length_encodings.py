"""KERPLE, FIRE and CoPE against their papers' formulas written as plain O(n^2) loops (values
and gradients), causal and bidirectional, queries at the end of the keys when Lq != Lk, the
memory bound, and CoPE against x-transformers' CoPE for the same weights."""

import math

import pytest
import torch
from max_numel import MaxNumel
from test_relative_encodings import KINDS, B, H, check_values_and_grads, randomize, setup

from cplxnet.encodings import CopeEncoding, FireEncoding, KerpleEncoding, create_encoding

# ------------------------------------------------------------------------------------ kerple


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("variant", ["log", "power"])
def test_kerple_direct(kind, causal, variant):
    """b[h, i, j] = -r1 log(1 + r2 d) (log) or -r1 d^r2 (power), d = |p_i - j| (bidirectional)
    or max(p_i - j, 0) (causal), p_i = Lk - Lq + i; r = clamp(raw, 0.01) (power: r2 <= 2)."""
    _, q, k, _ = setup(kind, lq=5, lk=8)
    enc = KerpleEncoding(H, kind=variant, causal=causal, dtype=kind)
    with torch.no_grad():  # inside the bounds, except one head of r2 above 2 (power clamps it)
        enc.r1.copy_(torch.tensor([0.7, 1.9]))
        enc.r2.copy_(torch.tensor([0.3, 2.6 if variant == "power" else 0.8]))
    Lq, Lk = q.shape[2], k.shape[2]

    def direct():
        out = torch.zeros(1, H, Lq, Lk, dtype=torch.float64)
        r1 = enc.r1.clamp(min=0.01)
        r2 = enc.r2.clamp(min=0.01, max=2.0 if variant == "power" else None)
        for h in range(H):
            for i in range(Lq):
                for j in range(Lk):
                    p = Lk - Lq + i
                    d = max(p - j, 0) if causal else abs(p - j)
                    if variant == "log":
                        out[0, h, i, j] = -r1[h] * torch.log(1 + r2[h] * d)
                    else:
                        out[0, h, i, j] = -r1[h] * d ** r2[h]
        return out

    if variant == "power":
        assert float(enc.coefficients()[1][1].detach()) == 2.0  # the clamp acts
    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [])


def test_kerple_init_and_clamp():
    """The reference code's init: log r1 ~ U(0, 2), r2 ~ U(0, 1); power r1 ~ U(0, 1), r2 ~ U(0, 2);
    a raw value below eps is used as eps."""
    torch.manual_seed(0)
    log = KerpleEncoding(512, dtype=torch.float64)
    power = KerpleEncoding(512, kind="power", dtype=torch.float64)
    for t, hi in ((log.r1, 2), (log.r2, 1), (power.r1, 1), (power.r2, 2)):
        assert t.min() >= 0 and t.max() <= hi and t.max() > 0.9 * hi
    with torch.no_grad():
        log.r2.fill_(-3.0)
    assert torch.equal(log.coefficients()[1], torch.full((512,), 0.01, dtype=torch.float64))
    with pytest.raises(ValueError, match="KerpleEncoding: unknown kind 'exp'"):
        KerpleEncoding(2, kind="exp")


# -------------------------------------------------------------------------------------- fire


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("threshold", [3.0, 512.0])
def test_fire_direct(kind, threshold):
    """b[h, i, j] = MLP(psi(p_i - j) / (psi(max(L, p_i)) + 1e-6))_h, psi(x) = log(|c x| + 1),
    L = |m * threshold|, MLP = Linear(1, 32), ReLU, Linear(32, H); p_i = Lk - Lq + i. A small
    threshold puts the query positions on both sides of it."""
    _, q, k, _ = setup(kind, lq=6, lk=9)
    enc = FireEncoding(H, threshold=threshold, dtype=kind)
    randomize(enc)
    with torch.no_grad():
        enc.c.fill_(0.3)
        enc.threshold_multiplier.fill_(1.1)
    Lq, Lk = q.shape[2], k.shape[2]
    w1, b1, w2, b2 = enc.mlp[0].weight, enc.mlp[0].bias, enc.mlp[2].weight, enc.mlp[2].bias

    def direct():
        out = torch.zeros(1, H, Lq, Lk, dtype=torch.float64)
        thr = (enc.threshold_multiplier * threshold).abs()
        for i in range(Lq):
            p = Lk - Lq + i
            den = torch.log((enc.c * torch.maximum(torch.tensor(float(p)), thr)).abs() + 1) + 1e-6
            for j in range(Lk):
                x = torch.log((enc.c * (p - j)).abs() + 1) / den
                hidden = torch.relu(w1[:, 0] * x + b1)
                out[0, :, i, j] = w2 @ hidden + b2
        return out

    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [])


def test_fire_paper_init_and_progressive_interpolation():
    enc = FireEncoding(4, dtype=torch.float64)
    assert enc.mlp[0].out_features == 32 and float(enc.c.detach()) == 0.1
    assert float(enc.threshold_multiplier.detach()) == 1.0 and enc.threshold == 512.0
    x = enc.normalized_distance(3000, 3000, torch.float64).detach().tril()  # causal keys
    assert x.min() >= 0 and x.max() <= 1 and x[-1, 0] > 0.99  # bounded at any length
    assert torch.equal(x.diagonal(), torch.zeros(3000, dtype=torch.float64))


# -------------------------------------------------------------------------------------- cope


def cope_direct(q, k, table, scale, causal, npos):
    """The paper's Eq. 3-5 for each (b, h, i, j), looping over the counted keys t."""
    Bq, Hq, Lq, _ = q.shape
    Lk = k.shape[2]
    out = torch.zeros(Bq, Hq, Lq, Lk, dtype=torch.float64)
    for b in range(Bq):
        for h in range(Hq):
            for i in range(Lq):
                p_i = Lk - Lq + i
                g = torch.sigmoid((q[b, h, i] * k[b, h]).sum(-1) * scale)  # (Lk,)
                for j in range(Lk):
                    if causal and j > p_i:
                        span = []
                    else:
                        span = range(j, p_i + 1) if j <= p_i else range(p_i, j + 1)
                    pos = sum((g[t] for t in span), torch.zeros((), dtype=torch.float64))
                    pos = pos.clamp(max=npos - 1)
                    lo, hi = math.floor(float(pos.detach())), math.ceil(float(pos.detach()))
                    w = pos - lo
                    e = table[hi] * w + table[lo] * (1 - w)  # interpolated embedding
                    out[b, h, i, j] = (q[b, h, i] * e).sum()
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("npos", [3, 64])
def test_cope_direct(kind, causal, npos):
    """npos=3 clamps most positions; 64 clamps none."""
    kw, q, k, scale = setup(kind, lq=5, lk=7)
    enc = CopeEncoding(npos_max=npos, causal=causal, **kw)
    randomize(enc)
    direct = lambda: cope_direct(q, k, enc.pos_emb, scale, causal, npos)  # noqa: E731
    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [q, k])


@pytest.mark.parametrize("kind", KINDS)
def test_cope_equals_x_transformers(kind):
    """x-transformers' CoPE(dim, heads, max_pos) called as its Attend calls it: on the unscaled
    queries and the scaled logits with the causal mask filled by -finfo.max."""
    xt = pytest.importorskip("x_transformers.x_transformers")
    kw, q, k, scale = setup(kind, lq=9, lk=9)
    npos = 6
    enc = CopeEncoding(npos_max=npos, causal=True, **kw)
    randomize(enc)
    P = q.shape[-1]
    theirs = xt.CoPE(P, H, npos).double()
    with torch.no_grad():
        theirs.pos_emb.copy_(enc.pos_emb)
    sim = (q @ k.transpose(-1, -2)) * scale
    mask = torch.ones(9, 9, dtype=torch.bool).triu(1)
    sim = sim.masked_fill(mask, -torch.finfo(sim.dtype).max)
    torch.testing.assert_close(enc.logits_bias(q, k), theirs(q, sim), rtol=1e-12, atol=1e-12)


def test_cope_in_a_model_is_causal_by_context():
    assert create_encoding("cope", d_model=8, num_heads=2, causal=True).causal
    assert not create_encoding("cope", d_model=8, num_heads=2).causal


# ---------------------------------------------------------------------------------- memory


@pytest.mark.parametrize("name", ["kerple", "fire", "cope"])
@pytest.mark.parametrize("kind", KINDS)
def test_no_n_n_d_tensor(name, kind):
    """kerple: the (1, H, L, L) bias is the largest tensor; fire: its MLP's (L, L, hidden) hidden
    layer (no batch or head dimension); cope: (B, H, L, L) gates; never B*H*L*L*P."""
    L, P = 48, 32
    d_model = H * (P // 2 if kind.is_complex else P)
    enc = create_encoding(name, d_model=d_model, num_heads=H, dtype=kind, causal=True)
    randomize(enc)
    q = torch.randn(B, H, L, P, requires_grad=True)
    k = torch.randn(B, H, L, P, requires_grad=True)
    mode = MaxNumel()
    with mode:
        enc.logits_bias(q, k).square().sum().backward()
    bound = {"kerple": B * H * L * L, "fire": max(B * H, 32) * L * L}
    bound["cope"] = B * H * L * max(L, 64)  # gates, and q @ E^T of the 64 position embeddings
    assert mode.max <= bound[name], mode.max


def test_complextorchs_cope_is_a_learned_absolute_rotor_not_contextual():
    """complextorch.nn.CoPE (2.1.1) multiplies x_n by e^{i(w n + phi)} with learned w, phi: at its
    init (RoPE frequencies, phi = 0) it is cplxnet's ``multiplicative`` sinusoidal rotor on the
    embeddings, position-only. So it has no weights in common with Golovneva et al.'s CoPE to
    compare: cplxnet's ``cope`` is contextual (a logit at (i, j) moves when a key between j and i
    changes, although neither q_i nor k_j does), the rotor is not."""
    ct = pytest.importorskip("complextorch.nn")
    x = torch.randn(2, 7, 6, dtype=torch.complex64)
    ours = create_encoding("multiplicative", d_model=6, dtype=torch.complex64)
    torch.testing.assert_close(ct.CoPE(6)(x), ours.encode_input(x))
    enc = CopeEncoding(8, 2, causal=True, dtype=torch.float64)
    randomize(enc)
    q = torch.randn(1, 2, 6, 4, dtype=torch.float64)
    k = torch.randn(1, 2, 6, 4, dtype=torch.float64)
    before = enc.logits_bias(q, k)[0, :, 5, 1]
    k2 = k.clone()
    k2[:, :, 3] += 1.0  # a key between j = 1 and i = 5
    assert not torch.allclose(enc.logits_bias(q, k2)[0, :, 5, 1], before)
