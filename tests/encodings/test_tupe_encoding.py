"""tupe (Ke et al., ICLR 2021) against the untied formula written as a plain O(n^2) loop, in values
and gradients, complex and real; inside attention; gradcheck; memory."""

import math

import pytest
import torch
from test_encoding_gradcheck import gradcheck_hook
from test_relative_encodings import (
    MaxNumel,
    check_values_and_grads,
    randomize,
    t5_bucket_python,
)

from cplxnet import functional as CF
from cplxnet._utils import pack
from cplxnet.encodings import T5Encoding, TupeEncoding, create_encoding
from cplxnet.nn import MultiheadAttention, TransformerEncoder

H, Dh = 2, 3  # heads, head width in the model's own numbers
KINDS = [torch.complex128, torch.float64]


def packed_qk(kind, lq, lk):
    P = 2 * Dh if kind.is_complex else Dh
    q = torch.randn(2, H, lq, P, dtype=torch.float64)
    k = torch.randn(2, H, lk, P, dtype=torch.float64)
    return q, k


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize("lq,lk", [(5, 5), (4, 7)])
def test_tupe_direct(kind, relative, lq, lk):
    """bias[h, i, j] = Re(sum_e (p_i U^Q)_{h,e} conj((p_j U^K)_{h,e})) / sqrt(2 Dh)
    [+ t5 table[bucket(j - i), h]], with (p U)_{h,e} = sum_d p_d U[h Dh + e, d]."""
    enc = TupeEncoding(H * Dh, H, max_len=9, relative=relative, num_buckets=8, max_distance=6,
                       dtype=kind)  # fmt: skip
    randomize(enc)
    q, k = packed_qk(kind, lq, lk)
    p, Uq, Uk = enc.position_embeddings, enc.pos_query_proj, enc.pos_key_proj

    def direct():
        out = torch.zeros(1, H, lq, lk, dtype=torch.float64)
        for h in range(H):
            for i in range(lq):
                for j in range(lk):
                    s = 0
                    for e in range(Dh):
                        a = (p[lk - lq + i] * Uq[h * Dh + e]).sum()  # queries end-aligned
                        b = (p[j] * Uk[h * Dh + e]).sum()
                        s = s + (a * b.conj()).real if kind.is_complex else s + a * b
                    out[0, h, i, j] = s / math.sqrt(2 * Dh)
                    if relative:
                        bucket = t5_bucket_python(j - (lk - lq + i), True, 8, 6)
                        out[0, h, i, j] = out[0, h, i, j] + enc.relative.weight[bucket, h]
        return out

    check_values_and_grads(enc, lambda: enc.logits_bias(q, k), direct, [])


def test_tupe_content_scale_and_shapes():
    enc = TupeEncoding(8, 2)
    assert enc.logit_scale == pytest.approx(1 / math.sqrt(2))
    assert enc.content_scale(2 * 4) == pytest.approx(1 / math.sqrt(2 * 4))  # 1/sqrt(2 Dh)
    assert enc.position_embeddings.dtype == torch.complex64
    real = TupeEncoding(8, 2, dtype=torch.float32)
    assert real.position_embeddings.dtype == torch.float32 and not real.complex_model
    assert enc.relative is None and "relative=False" in repr(enc)


def test_tupe_relative_is_t5_bias_added():
    """relative=True adds exactly a T5Encoding's bias (its table under ``relative.weight``)."""
    enc = TupeEncoding(6, H, relative=True, dtype=torch.float64)
    plain = TupeEncoding(6, H, dtype=torch.float64)
    plain.load_state_dict({k: v for k, v in enc.state_dict().items() if "relative" not in k})
    t5 = T5Encoding(H, dtype=torch.float64)
    t5.weight.data.copy_(torch.randn_like(t5.weight))
    enc.relative.load_state_dict(t5.state_dict())
    assert set(enc.state_dict()) == set(plain.state_dict()) | {"relative.weight"}
    q, k = packed_qk(torch.float64, 5, 6)
    expect = plain.logits_bias(q, k) + t5.logits_bias(q, k)
    torch.testing.assert_close(enc.logits_bias(q, k), expect)


@pytest.mark.parametrize("causal", [False, True])
def test_tupe_relative_follows_the_model_context(causal):
    """In a causal model (``causal=True`` from the registry's context) TUPE-R's bias uses T5's
    unidirectional buckets, as T5's decoder; keys after the query do not change a score."""
    enc = create_encoding("tupe", d_model=6, num_heads=H, relative=True, causal=causal,
                          dtype=torch.float64)  # fmt: skip
    t5 = T5Encoding(H, causal=causal, dtype=torch.float64)
    enc.relative.load_state_dict(t5.state_dict())
    q = torch.randn(2, H, 5, 6 // H, dtype=torch.float64)
    bias = enc.relative.logits_bias(q, q)
    torch.testing.assert_close(bias, t5.logits_bias(q, q))
    assert enc.relative.bidirectional is not causal
    future = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    same_as_diagonal = bias[0, 0][future] == bias[0, 0, 0, 0]
    assert bool(same_as_diagonal.all()) is causal  # causal: keys after the query share bucket 0


def test_tupe_longer_than_max_len_is_an_error():
    enc = TupeEncoding(6, H, max_len=4, dtype=torch.float64)
    q, k = packed_qk(torch.float64, 3, 5)
    with pytest.raises(ValueError, match="input length 5 exceeds max_len=4"):
        enc.logits_bias(q, k)


@pytest.mark.parametrize("kind", KINDS)
def test_tupe_in_attention_is_the_untied_sum(kind):
    """MultiheadAttention with tupe: softmax((Re(q k^H) + Re(pU^Q (pU^K)^H)) / sqrt(2 Dh)) v,
    written from the parameters (no encoding hook)."""
    D = H * Dh if kind.is_complex else 2 * H * Dh
    dh = D // H
    mha = MultiheadAttention(D, H, dtype=kind, batch_first=True)
    enc = TupeEncoding(D, H, max_len=8, dtype=kind)
    randomize(enc)
    x = torch.randn(2, 6, D, dtype=kind)
    out = mha(x, encoding=enc)[0]

    q, k, v = CF.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, -1)
    q, k, v = (t.unflatten(-1, (H, dh)).transpose(1, 2) for t in (q, k, v))
    pq = (enc.position_embeddings[:6] @ enc.pos_query_proj.T).view(6, H, dh).transpose(0, 1)
    pk = (enc.position_embeddings[:6] @ enc.pos_key_proj.T).view(6, H, dh).transpose(0, 1)
    content = torch.real(q @ k.conj().transpose(-1, -2))
    position = torch.real(pq @ pk.conj().transpose(-1, -2))
    w = torch.softmax((content + position) / math.sqrt(2 * dh), -1).to(kind)
    expect = mha.out_proj((w @ v).transpose(1, 2).reshape(2, 6, D))
    torch.testing.assert_close(out, expect)


def test_tupe_one_instance_serves_every_layer():
    """A 3-layer encoder holds no tupe parameters of its own; every layer gets the same term and
    each layer's gradient reaches the one shared table."""
    enc = TupeEncoding(8, 2, max_len=8, dtype=torch.float64)
    encoder = TransformerEncoder.from_sizes(
        8, 2, 3, dim_feedforward=8, dropout=0.0, dtype=torch.float64, batch_first=True
    )
    assert not any(p is enc.position_embeddings for p in encoder.parameters())
    y = encoder(torch.randn(2, 5, 8, dtype=torch.float64), encoding=enc)
    y.sum().backward()
    assert enc.position_embeddings.grad[:5].abs().sum() > 0
    assert enc.position_embeddings.grad[5:].abs().sum() == 0  # rows past the length: unused


@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize("kind", [torch.complex128, torch.float64])
def test_tupe_gradcheck(relative, kind):
    enc = create_encoding("tupe", d_model=4, num_heads=2, max_len=4, dtype=kind,
                          relative=relative, num_buckets=4, max_distance=3)  # fmt: skip
    q = torch.randn(1, 2, 3, 2, dtype=kind)
    k = torch.randn(1, 2, 4, 2, dtype=kind)
    gradcheck_hook(enc, lambda e, q, k: e.logits_bias(pack(q), pack(k)), [q, k])


@pytest.mark.parametrize("kind", KINDS)
def test_tupe_no_n_n_d_tensor(kind):
    L, P = 64, 32
    d_model = H * (P // 2 if kind.is_complex else P)
    enc = TupeEncoding(d_model, H, max_len=L, relative=True, dtype=kind)
    q = torch.randn(1, H, L, P, requires_grad=True)
    k = torch.randn(1, H, L, P, requires_grad=True)
    mode = MaxNumel()
    with mode:
        enc.logits_bias(q, k).sum().backward()
    assert mode.max < H * L * L * P / 4, mode.max
