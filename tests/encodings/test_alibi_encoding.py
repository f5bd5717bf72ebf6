"""ALiBi: the paper's slopes, the bias against the O(n^2) formula, causal vs bidirectional, and
the site check of models without attention."""

import math

import pytest
import torch
from max_numel import MaxNumel

from cplxnet.encodings import AlibiEncoding, alibi_slopes, check_sites, create_encoding
from cplxnet.models import MODEL_CLASSES
from cplxnet.nn import MultiheadAttention

KINDS = [torch.complex128, torch.float64]


def reference_slopes(n):
    """The reference ``get_slopes`` (ofirpress/attention_with_linear_biases) as a plain formula:
    for n a power of two, 2^(-8h/n), h = 1..n; otherwise, with P the largest power of two below n,
    2^(-8h/P) for h = 1..P, then 2^(-8h/(2P)) for h = 1, 3, 5, ... (n - P of them)."""
    P = 2 ** math.floor(math.log2(n))
    out = [2 ** (-8 * h / P) for h in range(1, P + 1)]
    odd = [2 ** (-8 * h / (2 * P)) for h in range(1, 4 * P, 2)]
    return out + odd[: n - P]


@pytest.mark.parametrize("num_heads", range(1, 17))
def test_slopes_match_the_reference_rule(num_heads):
    assert alibi_slopes(num_heads) == pytest.approx(reference_slopes(num_heads), rel=1e-15)
    enc = AlibiEncoding(num_heads, dtype=torch.complex128)
    assert enc.slopes.tolist() == pytest.approx(reference_slopes(num_heads), rel=1e-15)


def test_slopes_known_values():
    """The paper's examples: 8 heads 1/2 .. 1/256; 16 heads start at 2^-0.5."""
    assert alibi_slopes(8) == [2.0**-h for h in range(1, 9)]
    assert alibi_slopes(16)[0] == pytest.approx(2**-0.5)
    assert alibi_slopes(6) == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True])
def test_bias_direct(kind, causal):
    """bias[h, i, j] = -m_h |p_i - j| (bidirectional) or -m_h (p_i - j) (causal) with the queries
    at the end of the keys, p_i = Lk - Lq + i, for Lq != Lk, and independent of the values of q
    and k; shape (1, H, Lq, Lk); no parameters."""
    H, Lq, Lk = 5, 6, 9
    enc = create_encoding("alibi", d_model=2 * H, num_heads=H, causal=causal, dtype=kind)
    assert enc.causal is causal and not list(enc.parameters()) and not enc.state_dict()
    q = torch.randn(2, H, Lq, 4, dtype=torch.float64)
    k = torch.randn(2, H, Lk, 4, dtype=torch.float64)
    bias = enc.logits_bias(q, k)
    m = reference_slopes(H)
    ref = torch.zeros(1, H, Lq, Lk, dtype=torch.float64)
    for h in range(H):
        for i in range(Lq):
            for j in range(Lk):
                p = Lk - Lq + i
                ref[0, h, i, j] = -m[h] * ((p - j) if causal else abs(p - j))
    torch.testing.assert_close(bias, ref)
    torch.testing.assert_close(enc.logits_bias(3 * q + 1, -k), ref)


@pytest.mark.parametrize("causal", [False, True])
def test_queries_are_aligned_with_the_end_of_the_keys(causal):
    """The last Lq rows of the full (L, L) bias are the bias of Lq queries against L keys (what a
    decoder with a cache of L - Lq keys computes), in x-transformers' convention."""
    H, L = 4, 9
    enc = AlibiEncoding(H, causal=causal, dtype=torch.float64)
    full = enc.logits_bias(torch.randn(1, H, L, 2), torch.randn(1, H, L, 2))
    for lq in (1, 3, L):
        tail = enc.logits_bias(torch.randn(1, H, lq, 2), torch.randn(1, H, L, 2))
        assert torch.equal(tail, full[:, :, L - lq :])
    m = torch.tensor(reference_slopes(H), dtype=torch.float64)
    q, k = torch.randn(1, H, 1, 2).double(), torch.randn(1, H, L, 2).double()
    one = enc.logits_bias(q, k)[0, :, 0]
    torch.testing.assert_close(one, -m[:, None] * (L - 1 - torch.arange(L)).double())


def _mha(kind, heads=4, width=8):
    torch.manual_seed(0)
    return MultiheadAttention(width, heads, dtype=kind, batch_first=True)


@pytest.mark.parametrize("kind", KINDS)
def test_causal_in_attention_equals_reference_code(kind):
    """Under a causal mask, causal ALiBi, bidirectional ALiBi (equal for j <= i) and the reference
    code's m_h * j bias (a per-row constant away) give the same outputs; without the mask the
    two forms differ, so the flag is not a no-op."""
    H, D, L = 4, 8, 7
    mha = _mha(kind, H, D)
    x = torch.randn(2, L, D, dtype=kind)
    causal = AlibiEncoding(H, causal=True, dtype=kind)
    bidir = AlibiEncoding(H, dtype=kind)
    out = mha(x, is_causal=True, encoding=causal)[0]
    torch.testing.assert_close(mha(x, is_causal=True, encoding=bidir)[0], out)
    m = torch.tensor(reference_slopes(H), dtype=torch.float64)
    fairseq = m[:, None, None] * torch.arange(L, dtype=torch.float64)  # (H, 1, L): m_h * j
    mask = torch.full((L, L), -math.inf, dtype=torch.float64).triu(1)
    torch.testing.assert_close(mha(x, attn_mask=mask + fairseq, encoding=None)[0], out)
    assert not torch.allclose(mha(x, encoding=causal)[0], mha(x, encoding=bidir)[0])


def test_memory_is_one_bias_per_head():
    """The largest tensor ever built is the (1, H, Lq, Lk) bias itself."""
    H, Lq, Lk = 4, 50, 70
    enc = AlibiEncoding(H, dtype=torch.complex64)
    mode = MaxNumel()
    with mode:
        bias = enc.logits_bias(torch.randn(3, H, Lq, 16), torch.randn(3, H, Lk, 16))
    assert bias.shape == (1, H, Lq, Lk) and mode.max == H * Lq * Lk


def test_create_with_model_context():
    """``causal`` is model context: passed to encodings that take it, ignored by the others, and
    not a user option."""
    ctx = dict(d_model=8, num_heads=2, vocab_size=5, max_len=16)
    assert create_encoding("alibi", causal=True, **ctx).causal
    assert not create_encoding("alibi", **ctx).causal
    create_encoding("rotary", causal=True, **ctx)
    with pytest.raises(TypeError) as info:
        create_encoding("alibi", slope=1.0, **ctx)
    assert "its options are: none" in str(info.value)


@pytest.mark.parametrize("family", ["cnn", "lstm", "fasttext"])
def test_models_without_attention_refuse_alibi(family):
    with pytest.raises(
        ValueError,
        match=f"encoding 'alibi' acts on attention logits, but model '{family}' has no attention",
    ):
        check_sites("alibi", MODEL_CLASSES[family].supported_sites, family)
    check_sites("alibi", MODEL_CLASSES["transformer"].supported_sites, "transformer")


def test_checks():
    with pytest.raises(ValueError, match="AlibiEncoding: num_heads"):
        AlibiEncoding(0)
    with pytest.raises(ValueError, match=r"\(B, 2, L, P\)"):
        AlibiEncoding(2).logits_bias(torch.randn(1, 3, 4, 2), torch.randn(1, 3, 4, 2))
