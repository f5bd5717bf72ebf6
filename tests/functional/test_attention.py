"""Complex attention kernel: packed fused kernel vs explicit reference, masks, gradients, errors."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import cplxnet.functional as CF

TOL = {
    torch.complex128: {"atol": 1e-10, "rtol": 1e-10},
    torch.complex64: {"atol": 2e-5, "rtol": 2e-5},
    torch.float64: {"atol": 1e-10, "rtol": 1e-10},
    torch.float32: {"atol": 2e-5, "rtol": 2e-5},
}

B, H, LQ, LK, DH = 2, 3, 5, 6, 4


def _qkv(dtype, lq=LQ, lk=LK, dh=DH, dv=DH, requires_grad=True):
    q = torch.randn(B, H, lq, dh, dtype=dtype)
    k = torch.randn(B, H, lk, dh, dtype=dtype)
    v = torch.randn(B, H, lk, dv, dtype=dtype)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def _real_of(dtype):
    return torch.empty(0, dtype=dtype).real.dtype


def _config(name, dtype, lq=LQ, lk=LK):
    """Keyword arguments of one masking configuration (float parts in the real dtype)."""
    rdtype = _real_of(dtype)
    if name == "none":
        return {}
    if name == "bool_mask":
        m = torch.rand(B, 1, lq, lk) > 0.3
        m[..., 0] = True  # every query keeps a key
        return {"attn_mask": m}
    if name == "float_mask":
        return {"attn_mask": torch.randn(lq, lk, dtype=rdtype)}
    if name == "bias":
        return {"bias": torch.randn(1, H, lq, lk, dtype=rdtype, requires_grad=True)}
    if name == "causal":
        return {"is_causal": True}
    if name == "key_padding":
        keep = torch.ones(B, lk, dtype=torch.bool)
        keep[0, lk - 2 :] = False
        return {"attn_mask": keep[:, None, None, :]}
    if name == "all":
        keep = torch.ones(B, lk, dtype=torch.bool)
        keep[1, lk - 3 :] = False
        return {
            "attn_mask": keep[:, None, None, :],
            "bias": torch.randn(B, H, lq, lk, dtype=rdtype, requires_grad=True),
            "is_causal": True,
        }
    raise AssertionError(name)


CONFIGS = ["none", "bool_mask", "float_mask", "bias", "causal", "key_padding", "all"]


def _loss_and_grads(fn, inputs, weight):
    out = fn()
    loss = (out * weight.conj()).real.sum() if out.is_complex() else (out * weight).sum()
    grads = torch.autograd.grad(loss, inputs)
    return out, grads


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64, torch.float64, torch.float32])
@pytest.mark.parametrize("score", ["real", "modulus"])
@pytest.mark.parametrize("config", CONFIGS)
def test_kernel_matches_reference_values_and_grads(dtype, score, config):
    q, k, v = _qkv(dtype)
    kw = _config(config, dtype)
    inputs = [q, k, v] + ([kw["bias"]] if "bias" in kw else [])
    weight = torch.randn(B, H, LQ, DH, dtype=dtype)
    out, grads = _loss_and_grads(
        lambda: CF.scaled_dot_product_attention(q, k, v, score=score, **kw), inputs, weight
    )
    ref, ref_grads = _loss_and_grads(
        lambda: CF.attention_reference(q, k, v, score=score, **kw)[0], inputs, weight
    )
    assert out.dtype == dtype and out.shape == (B, H, LQ, DH)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    for g, rg in zip(grads, ref_grads):
        torch.testing.assert_close(g, rg, **TOL[dtype])


@pytest.mark.parametrize("config", CONFIGS)
def test_real_inputs_equal_torch_sdpa(config):
    q, k, v = _qkv(torch.float64, requires_grad=False)
    kw = _config(config, torch.float64)
    mask = kw.get("attn_mask")
    if "bias" in kw:
        bias = kw["bias"].detach()
        mask = bias if mask is None else bias.masked_fill(~mask, -math.inf)
    if kw.get("is_causal"):
        causal = torch.ones(LQ, LK, dtype=torch.bool).tril()
        mask = (
            causal
            if mask is None
            else (
                mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, -math.inf)
            )
        )
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = CF.scaled_dot_product_attention(q, k, v, **{**kw, "bias": kw.get("bias")})
    torch.testing.assert_close(got, expected, **TOL[torch.float64])


def test_real_score_is_real_part_of_hermitian_product():
    q, k, v = _qkv(torch.complex128, requires_grad=False)
    s = 0.37
    logits = torch.einsum("bhid,bhjd->bhij", q, k.conj()).real * s
    expected = torch.softmax(logits, -1).to(v.dtype) @ v
    torch.testing.assert_close(CF.scaled_dot_product_attention(q, k, v, scale=s), expected)
    # the default scale uses the complex head width Dh, not the packed width 2 Dh
    logits = torch.einsum("bhid,bhjd->bhij", q, k.conj()).real / math.sqrt(DH)
    expected = torch.softmax(logits, -1).to(v.dtype) @ v
    torch.testing.assert_close(CF.scaled_dot_product_attention(q, k, v), expected)


def test_modulus_score_direct_formula():
    q, k, v = _qkv(torch.complex128, requires_grad=False)
    qr, qi, kr, ki = q.real, q.imag, k.real, k.imag
    re = qr @ kr.transpose(-2, -1) - qi @ ki.transpose(-2, -1)  # q k^T, no conjugate
    im = qr @ ki.transpose(-2, -1) + qi @ kr.transpose(-2, -1)
    w = torch.softmax(torch.sqrt(re**2 + im**2) / math.sqrt(DH), -1)
    expected = torch.complex(w @ v.real, w @ v.imag)
    torch.testing.assert_close(CF.scaled_dot_product_attention(q, k, v, score="modulus"), expected)
    torch.testing.assert_close(CF.attention_weights(q, k, score="modulus"), w)
    # the modulus score differs from |q k^H| (it is not conjugated)
    conj = (q @ k.conj().transpose(-2, -1)).abs()
    assert not torch.allclose(conj, torch.sqrt(re**2 + im**2))


@pytest.mark.parametrize("score", ["real", "modulus"])
def test_gradcheck_kernel_complex128(score):
    q, k, v = _qkv(torch.complex128, lq=3, lk=4, dh=2, dv=3)
    q, k, v = (t[:1, :2].detach().requires_grad_() for t in (q, k, v))
    bias = torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([True, True, True, False])[None, None, None, :]

    def fn(q, k, v, bias):
        return CF.scaled_dot_product_attention(
            q, k, v, attn_mask=keep, bias=bias, is_causal=False, score=score
        )

    assert torch.autograd.gradcheck(fn, (q, k, v, bias))
    assert torch.autograd.gradcheck(
        lambda q, k, v: CF.scaled_dot_product_attention(q, k, v, is_causal=True, score=score),
        (q, k, v),
    )


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64, torch.float32])
@pytest.mark.parametrize("score", ["real", "modulus"])
@pytest.mark.parametrize("how", ["bool", "float", "causal_and_mask"])
def test_fully_masked_rows_give_zero_and_finite_grads(dtype, score, how):
    q, k, v = _qkv(dtype)
    bias = torch.randn(1, H, LQ, LK, dtype=_real_of(dtype), requires_grad=True)
    if how == "bool":
        mask = torch.ones(B, 1, LQ, LK, dtype=torch.bool)
        mask[0, :, 2] = False  # query 2 of batch 0 sees no key
        kw = {"attn_mask": mask}
    elif how == "float":
        mask = torch.zeros(B, 1, LQ, LK, dtype=_real_of(dtype))
        mask[0, :, 2] = -math.inf
        kw = {"attn_mask": mask}
    else:  # causal lets query 0 see key 0 only; the mask removes key 0 for batch 0
        mask = torch.ones(B, 1, 1, LK, dtype=torch.bool)
        mask[0, ..., 0] = False
        kw = {"attn_mask": mask, "is_causal": True}
    dead = (0, slice(None), 2) if how != "causal_and_mask" else (0, slice(None), 0)

    def reference(*args, **kwargs):
        return CF.attention_reference(*args, **kwargs)[0]

    for fn in (CF.scaled_dot_product_attention, reference):
        out = fn(q, k, v, bias=bias, score=score, **kw)
        assert torch.isfinite(out).all()
        assert (out[dead] == 0).all()
        grads = torch.autograd.grad(out.abs().sum(), (q, k, v, bias))
        for g in grads:
            assert torch.isfinite(g).all()
        assert (grads[0][dead] == 0).all()  # a dead query receives no gradient
    w = CF.attention_weights(q, k, bias=bias, score=score, **kw)
    assert (w[dead] == 0).all()
    live = torch.ones_like(w[..., 0], dtype=torch.bool)
    live[dead] = False
    torch.testing.assert_close(w.sum(-1)[live], torch.ones_like(w.sum(-1)[live]))


@pytest.mark.parametrize("score", ["real", "modulus"])
def test_attention_weights_match_reference_and_value_identity(score):
    q, k, v = _qkv(torch.complex128, requires_grad=False)
    kw = _config("all", torch.complex128)
    w = CF.attention_weights(q, k, score=score, **kw)
    out_ref, w_ref = CF.attention_reference(q, k, v, score=score, **kw)
    torch.testing.assert_close(w, w_ref.detach())
    # out = unpack(w @ pack(v)) -- what modules use with a value term
    packed = w @ torch.view_as_real(v).flatten(-2)
    out = torch.view_as_complex(packed.unflatten(-1, (-1, 2)).contiguous())
    torch.testing.assert_close(out, out_ref.detach())


@pytest.mark.parametrize("score", ["real", "modulus"])
def test_dropout_is_unbiased_and_active(score):
    n = 3000
    q, k, v = (t.detach() for t in _qkv(torch.complex128, lq=3, lk=4, dh=2, dv=2))
    q, k, v = (t[:1, :1].expand(n, 1, -1, -1) for t in (q, k, v))
    plain = CF.scaled_dot_product_attention(q[:1], k[:1], v[:1], score=score)
    dropped = CF.scaled_dot_product_attention(q, k, v, dropout_p=0.3, score=score)
    assert not torch.allclose(dropped[0], plain[0])  # dropout acted
    spread = (dropped - plain).abs().max()
    assert spread > 0.1
    # the mean over independent dropout draws approaches the output without dropout
    atol = 6 * spread / n**0.5
    torch.testing.assert_close(dropped.mean(0, keepdim=True), plain, atol=atol, rtol=0)


@settings(max_examples=25, deadline=None)
@given(
    lq=st.integers(1, 5),
    lk=st.integers(1, 5),
    dh=st.integers(1, 4),
    dv=st.integers(1, 3),
    causal=st.booleans(),
    score=st.sampled_from(["real", "modulus"]),
    seed=st.integers(0, 2**16),
)
def test_property_kernel_equals_reference(lq, lk, dh, dv, causal, score, seed):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, dtype=torch.complex128, generator=g)

    q, k, v = rnd(2, 2, lq, dh), rnd(2, 2, lk, dh), rnd(2, 2, lk, dv)
    mask = torch.rand(2, 1, lq, lk, generator=g) > 0.4  # may leave rows fully masked
    out = CF.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, score=score)
    ref, _ = CF.attention_reference(q, k, v, attn_mask=mask, is_causal=causal, score=score)
    torch.testing.assert_close(out, ref, **TOL[torch.complex128])


def test_errors():
    q, k, v = _qkv(torch.complex64, requires_grad=False)
    with pytest.raises(TypeError, match="all be complex or all be real"):
        CF.scaled_dot_product_attention(q, k.real, v)
    with pytest.raises(TypeError, match="same dtype"):
        CF.scaled_dot_product_attention(q, k.to(torch.complex128), v)
    with pytest.raises(ValueError, match=r"same head width.*k=\(2, 3, 6, 3\)"):
        CF.scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match=r"same length.*v=\(2, 3, 5, 4\)"):
        CF.scaled_dot_product_attention(q, k, v[..., :5, :])
    with pytest.raises(ValueError, match="leading"):
        CF.scaled_dot_product_attention(q, k[:1], v[:1])
    with pytest.raises(TypeError, match="bool tensor .* or a real floating"):
        CF.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(LQ, LK, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"shape \(5, 5\) does not broadcast .*\(2, 3, 5, 6\)"):
        CF.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(LQ, LQ, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"bias of shape \(4, 6\)"):
        CF.scaled_dot_product_attention(q, k, v, bias=torch.zeros(4, LK))
    with pytest.raises(TypeError, match="bias must be a real floating"):
        CF.scaled_dot_product_attention(q, k, v, bias=torch.zeros(LQ, LK, dtype=torch.cfloat))
    valid = "unknown score 'cosine'; valid scores are 'real', 'modulus'"
    with pytest.raises(ValueError, match=valid):
        CF.scaled_dot_product_attention(q, k, v, score="cosine")
    with pytest.raises(ValueError, match="unknown score"):
        CF.attention_weights(q, k, score="cosine")
    with pytest.raises(ValueError, match="dropout_p"):
        CF.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(TypeError, match="complex or floating"):
        CF.scaled_dot_product_attention(q, k, torch.ones(B, H, LK, DH, dtype=torch.int64))
