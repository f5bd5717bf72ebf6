"""MultiheadAttention: real twin vs torch, complex reductions, padding, encoding hooks, errors."""

import math

import pytest
import torch
from torch.func import functional_call

import cplxnet.nn as cnn
from cplxnet._utils import pack
from cplxnet.encodings.base import PositionalEncoding

D, H, B, L = 8, 2, 3, 5


def _padding(b=B, length=L):
    pad = torch.zeros(b, length, dtype=torch.bool)
    pad[0, length - 2 :] = True
    pad[2, length - 1 :] = True
    return pad


# ---------------------------------------------------------------------------------------------
# test-only encodings exercising each hook of the contract
# ---------------------------------------------------------------------------------------------


class ConstBias(PositionalEncoding):
    """Adds a fixed real table to the logits; records what the hook receives."""

    name = "test-const-bias"
    acts_on = frozenset({"logits"})

    def __init__(self, table):
        super().__init__()
        self.table = table  # (1, H, Lq, Lk)
        self.seen = None

    def logits_bias(self, q, k):
        self.seen = (q.dtype, tuple(q.shape), k.dtype, tuple(k.shape))
        return self.table


class ScaleQuery(PositionalEncoding):
    """Rotates only by scaling q: equivalent to multiplying the logits scale."""

    name = "test-scale-query"
    acts_on = frozenset({"qk"})

    def __init__(self, factor):
        super().__init__()
        self.factor = factor
        self.seen = None

    def rotate(self, q, k, v):
        self.seen = (q.dtype, tuple(q.shape), tuple(k.shape), tuple(v.shape))
        return q * self.factor, k, v


class LogitScale(PositionalEncoding):
    name = "test-logit-scale"
    acts_on = frozenset()

    def __init__(self, factor):
        super().__init__()
        self.logit_scale = factor


class ShiftValues(PositionalEncoding):
    """Adds r (per key position) to the values through rotate(): v_j + r_j."""

    name = "test-shift-values"
    acts_on = frozenset({"qk"})

    def __init__(self, r):
        super().__init__()
        self.r = r  # (Lk, Dh) in the model dtype

    def rotate(self, q, k, v):
        return q, k, v + self.r


class ValueTerm(PositionalEncoding):
    """Adds sum_j a_ij r_j via value_term(weights): must equal ShiftValues(r)."""

    name = "test-value-term"
    acts_on = frozenset({"values"})

    def __init__(self, r):
        super().__init__()
        self.r = r
        self.seen = None

    def value_term(self, weights):
        self.seen = (weights.dtype, tuple(weights.shape))
        return weights @ pack(self.r)  # (B, H, Lq, 2Dh) packed real, (.., Dh) for real


# ---------------------------------------------------------------------------------------------


def _torch_twin(m: cnn.MultiheadAttention) -> torch.nn.MultiheadAttention:
    t = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=m.dtype)
    t.load_state_dict(m.state_dict())
    return t.eval()


@pytest.mark.parametrize("bias", [True, False])
def test_real_dtype_equals_torch_multihead_attention(bias):
    m = cnn.MultiheadAttention(D, H, bias=bias, dtype=torch.float64, batch_first=True).eval()
    if bias:  # non-zero biases so that they are compared too
        torch.nn.init.normal_(m.in_proj_bias)
        torch.nn.init.normal_(m.out_proj.bias)
    t = torch.nn.MultiheadAttention(D, H, bias=bias, batch_first=True, dtype=torch.float64)
    t.load_state_dict(m.state_dict())
    x = torch.randn(B, L, D, dtype=torch.float64, requires_grad=True)
    pad = _padding()
    # the same bool attn_mask for both modules: True = not allowed to attend (here the future)
    future = torch.ones(L, L, dtype=torch.bool).triu(1)
    got = m(x, key_padding_mask=pad, attn_mask=future)[0]
    want = t(x, x, x, key_padding_mask=pad, attn_mask=future, need_weights=False)[0]
    torch.testing.assert_close(got, want)
    g1 = torch.autograd.grad(got.sum(), [x, m.in_proj_weight])
    g2 = torch.autograd.grad(want.sum(), [x, t.in_proj_weight])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)
    # is_causal and a float attn_mask
    fmask = torch.randn(L, L, dtype=torch.float64)
    torch.testing.assert_close(
        m(x, attn_mask=fmask)[0], t(x, x, x, attn_mask=fmask, need_weights=False)[0]
    )
    torch.testing.assert_close(
        m(x, is_causal=True)[0], t(x, x, x, attn_mask=future, need_weights=False)[0]
    )
    # a non-causal bool mask (random, every query keeps a key) and a per-head 3-d mask
    banned = torch.rand(L, L) < 0.4
    banned.fill_diagonal_(False)
    torch.testing.assert_close(
        m(x, key_padding_mask=pad, attn_mask=banned)[0],
        t(x, x, x, key_padding_mask=pad, attn_mask=banned, need_weights=False)[0],
    )
    banned3 = torch.rand(B * H, L, L) < 0.4
    banned3[:, :, 0] = False
    torch.testing.assert_close(
        m(x, attn_mask=banned3.view(B, H, L, L))[0],
        t(x, x, x, attn_mask=banned3, need_weights=False)[0],
    )


@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
def test_bool_attn_mask_true_means_not_allowed(dtype):
    """Bool True = banned pair: equals a float mask of -inf there, and the kernel called with the
    complement (the SDPA convention, True = may attend)."""
    from cplxnet.functional import scaled_dot_product_attention

    m = cnn.MultiheadAttention(D, H, dtype=dtype, batch_first=True).eval()
    x = torch.randn(B, L, D, dtype=dtype)
    banned = torch.ones(L, L, dtype=torch.bool).triu(1)
    fmask = torch.zeros(L, L, dtype=torch.float64).masked_fill(banned, -math.inf)
    got = m(x, attn_mask=banned)[0]
    torch.testing.assert_close(got, m(x, attn_mask=fmask)[0])
    torch.testing.assert_close(got, m(x, is_causal=True)[0])
    q, k, v = (
        t.unflatten(-1, (H, D // H)).transpose(1, 2)
        for t in (x @ m.in_proj_weight.T + m.in_proj_bias).chunk(3, -1)
    )
    out = scaled_dot_product_attention(q, k, v, attn_mask=~banned)
    want = m.out_proj(out.transpose(1, 2).reshape(B, L, D))
    torch.testing.assert_close(got, want)
    assert not torch.allclose(got, m(x, attn_mask=~banned)[0])


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("appended", [{"add_bias_kv": True}, {"add_zero_attn": True}])
def test_is_causal_leaves_the_appended_keys_open(appended, need_weights):
    """is_causal restricts the given keys only: the key of add_bias_kv / add_zero_attn stays open
    to every query, as torch's padded attn_mask (with is_causal as its hint) leaves it."""
    m = cnn.MultiheadAttention(D, H, dtype=torch.float64, batch_first=True, **appended).eval()
    t = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64, **appended)
    t.load_state_dict(m.state_dict())
    x = torch.randn(B, L, D, dtype=torch.float64)
    future = torch.ones(L, L, dtype=torch.bool).triu(1)
    want, want_w = t.eval()(x, x, x, attn_mask=future, is_causal=True)  # the padded-mask path
    got, got_w = m(x, is_causal=True, need_weights=need_weights)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(m(x, attn_mask=future, is_causal=True)[0], want)
    if need_weights:
        torch.testing.assert_close(got_w, want_w)
        assert (got_w[..., L] > 0).all()
    xc = x.to(torch.complex128)
    mc = cnn.MultiheadAttention(D, H, dtype=torch.complex128, batch_first=True, **appended).eval()
    causal = mc(xc, is_causal=True, need_weights=need_weights)[0]
    torch.testing.assert_close(causal, mc(xc, attn_mask=future, need_weights=need_weights)[0])


def test_real_dtype_cross_attention_equals_torch():
    m = cnn.MultiheadAttention(D, H, dtype=torch.float64, batch_first=True).eval()
    torch.nn.init.normal_(m.in_proj_bias)
    t = _torch_twin(m)
    x = torch.randn(B, 4, D, dtype=torch.float64)
    key = torch.randn(B, 6, D, dtype=torch.float64)
    value = torch.randn(B, 6, D, dtype=torch.float64)
    pad = _padding(length=6)
    got = m(x, key_padding_mask=pad, key=key, value=value)[0]
    want = t(x, key, value, key_padding_mask=pad, need_weights=False)[0]
    torch.testing.assert_close(got, want)
    assert got.shape == (B, 4, D)
    torch.testing.assert_close(m(x, key=key)[0], t(x, key, key, need_weights=False)[0])


def test_complex_with_zero_imaginary_parts_reduces_to_real_attention():
    mc = cnn.MultiheadAttention(D, H, dtype=torch.complex128, batch_first=True).eval()
    mr = cnn.MultiheadAttention(D, H, dtype=torch.float64, batch_first=True).eval()
    with torch.no_grad():
        for pc, pr in zip(mc.parameters(), mr.parameters()):
            pr.copy_(torch.randn_like(pr))
            pc.copy_(torch.complex(pr, torch.zeros_like(pr)))
    x = torch.randn(B, L, D, dtype=torch.float64)
    pad = _padding()
    out_c = mc(x.to(torch.complex128), key_padding_mask=pad)[0]
    out_r = mr(x, key_padding_mask=pad)[0]
    torch.testing.assert_close(out_c.real, out_r)
    assert out_c.imag.abs().max() == 0
    torch.testing.assert_close(out_r, _torch_twin(mr)(x, x, x, key_padding_mask=pad)[0])


def test_complex_mha_matches_explicit_formula():
    m = cnn.MultiheadAttention(D, H, dtype=torch.complex128, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_bias.normal_()
    x = torch.randn(B, L, D, dtype=torch.complex128)
    y = x @ m.in_proj_weight.T + m.in_proj_bias
    q, k, v = (t.reshape(B, L, H, D // H).transpose(1, 2) for t in y.chunk(3, -1))
    logits = (q @ k.conj().transpose(-2, -1)).real / math.sqrt(D // H)
    out = torch.softmax(logits, -1).to(v.dtype) @ v
    out = out.transpose(1, 2).reshape(B, L, D) @ m.out_proj.weight.T + m.out_proj.bias
    torch.testing.assert_close(m(x)[0], out)


@pytest.mark.parametrize("score", ["real", "modulus"])
def test_gradcheck_complex128_eval(score):
    m = cnn.MultiheadAttention(4, 2, score=score, dtype=torch.complex128, batch_first=True).eval()
    params = dict(m.named_parameters())
    names = ["in_proj_weight", "in_proj_bias", "out_proj.weight"]
    x = torch.randn(2, 3, 4, dtype=torch.complex128, requires_grad=True)
    pad = torch.tensor([[False, False, True], [False, False, False]])

    def fn(x, *ps):
        return functional_call(
            m, {**params, **dict(zip(names, ps))}, (x,), {"key_padding_mask": pad}
        )

    inputs = (x, *(params[n].detach().clone().requires_grad_() for n in names))
    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
@pytest.mark.parametrize("score", ["real", "modulus"])
def test_padding_never_influences_real_positions(dtype, score):
    m = cnn.MultiheadAttention(D, H, score=score, dtype=dtype, batch_first=True).eval()
    x = torch.randn(B, L, D, dtype=dtype)
    pad = _padding()
    y = x.clone()
    y[pad] = torch.randn_like(y[pad]) * 100
    out_x, out_y = m(x, key_padding_mask=pad)[0], m(y, key_padding_mask=pad)[0]
    torch.testing.assert_close(out_x[~pad], out_y[~pad])
    assert not torch.allclose(out_x[pad], out_y[pad])
    # the gradient w.r.t. padded inputs of a loss over real positions is zero
    x.requires_grad_()
    (g,) = torch.autograd.grad(m(x, key_padding_mask=pad)[0][~pad].abs().sum(), x)
    assert g[pad].abs().max() == 0 and g[~pad].abs().max() > 0


@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
def test_encoding_contract(dtype):
    m = cnn.MultiheadAttention(D, H, dtype=dtype, batch_first=True).eval()
    x = torch.randn(B, L, D, dtype=dtype)
    pad = _padding()
    Dh = D // H
    width = 2 * Dh if dtype.is_complex else Dh
    rdtype = torch.float64

    # logits: a constant bias equals a float attn_mask; q, k arrive packed real
    table = torch.randn(1, H, L, L, dtype=rdtype)
    enc = ConstBias(table)
    torch.testing.assert_close(
        m(x, key_padding_mask=pad, encoding=enc)[0], m(x, key_padding_mask=pad, attn_mask=table)[0]
    )
    assert enc.seen == (rdtype, (B, H, L, width), rdtype, (B, H, L, width))

    # qk: rotate receives (B, H, L, Dh) in the model dtype; scaling q == logit_scale
    rot = ScaleQuery(1.7)
    out_rot = m(x, key_padding_mask=pad, encoding=rot)[0]
    assert rot.seen == (dtype, (B, H, L, Dh), (B, H, L, Dh), (B, H, L, Dh))
    torch.testing.assert_close(out_rot, m(x, key_padding_mask=pad, encoding=LogitScale(1.7))[0])
    assert not torch.allclose(out_rot, m(x, key_padding_mask=pad)[0])

    # values: value_term(weights) adds sum_j a_ij r_j == shifting the values by r
    r = torch.randn(L, Dh, dtype=dtype)
    vt = ValueTerm(r)
    out_vt = m(x, key_padding_mask=pad, encoding=vt)[0]
    assert vt.seen == (rdtype, (B, H, L, L))
    torch.testing.assert_close(out_vt, m(x, key_padding_mask=pad, encoding=ShiftValues(r))[0])
    # the value-term path without a term is the fused path
    torch.testing.assert_close(
        m(x, key_padding_mask=pad, encoding=ValueTerm(torch.zeros_like(r)))[0],
        m(x, key_padding_mask=pad)[0],
    )

    # the encoding is not registered in the attention's state_dict
    assert set(m.state_dict()) == {
        "in_proj_weight",
        "in_proj_bias",
        "out_proj.weight",
        "out_proj.bias",
    }


def test_value_term_path_uses_padding_and_dropout():
    m = cnn.MultiheadAttention(D, H, dropout=0.5, dtype=torch.complex128, batch_first=True)
    x = torch.randn(B, L, D, dtype=torch.complex128)
    pad = _padding()
    vt = ValueTerm(torch.zeros(L, D // H, dtype=torch.complex128))
    m.train()
    kw = {"key_padding_mask": pad, "encoding": vt}
    assert not torch.allclose(m(x, **kw)[0], m(x, **kw)[0])
    m.eval()
    y = x.clone()
    y[pad] = 50.0
    torch.testing.assert_close(m(x, **kw)[0][~pad], m(y, **kw)[0][~pad])


def test_dropout_train_vs_eval():
    m = cnn.MultiheadAttention(D, H, dropout=0.5, batch_first=True)
    x = torch.randn(B, L, D, dtype=torch.complex64)
    assert not torch.allclose(m(x)[0], m(x)[0])
    m.eval()
    torch.testing.assert_close(m(x)[0], m(x)[0])


def test_defaults_init_and_repr():
    m = cnn.MultiheadAttention(64, 4, batch_first=True)
    assert m.in_proj_weight.dtype == torch.complex64 and m.out_proj.weight.dtype == torch.complex64
    assert isinstance(m.out_proj, cnn.Linear)
    # complex Glorot per (D, D) block: E|w|^2 = 2 / (D + D)
    for block in m.in_proj_weight.detach().chunk(3):
        assert abs(block.abs().pow(2).mean().item() * 64 - 1.0) < 0.1
    assert (m.in_proj_bias == 0).all()
    assert "score='real'" in repr(m) and "num_heads=4" in repr(m)
    mr = cnn.MultiheadAttention(64, 4, dtype=torch.float32, batch_first=True)
    assert isinstance(mr.out_proj, torch.nn.Linear) and mr.in_proj_weight.dtype == torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert (
            cnn.MultiheadAttention(8, 2, batch_first=True).in_proj_weight.dtype == torch.complex128
        )
    finally:
        torch.set_default_dtype(old)


def test_errors():
    m = cnn.MultiheadAttention(D, H, batch_first=True)
    x = torch.randn(B, L, D, dtype=torch.complex64)
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be a positive multiple"):
        cnn.MultiheadAttention(10, 3, batch_first=True)
    with pytest.raises(ValueError, match="MultiheadAttention: embed_dim must be a positive int"):
        cnn.MultiheadAttention(8.0, 2, batch_first=True)
    with pytest.raises(ValueError, match="MultiheadAttention: num_heads must be a positive int"):
        cnn.MultiheadAttention(8, 0, batch_first=True)
    with pytest.raises(ValueError, match="unknown score 'dot'; valid scores are"):
        cnn.MultiheadAttention(D, H, score="dot", batch_first=True)
    with pytest.raises(TypeError, match="dtype must be a floating or complex"):
        cnn.MultiheadAttention(D, H, dtype=torch.int64, batch_first=True)
    with pytest.raises(TypeError, match=r"query has dtype torch.float32 but this complex layer"):
        m(x.real)[0]
    with pytest.raises(ValueError, match=r"expected query of shape \(B, L, 8\).*, got \(3, 5, 4\)"):
        m(x[..., :4])[0]
    with pytest.raises(TypeError, match="key_padding_mask must be a bool .* got torch.int64"):
        m(x, key_padding_mask=torch.zeros(B, L, dtype=torch.long))[0]
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(3, 5\)"):
        m(x, key_padding_mask=torch.zeros(B, L + 1, dtype=torch.bool))[0]
    with pytest.raises(ValueError, match="value was given without key"):
        m(x, value=x)[0]
    with pytest.raises(TypeError, match="encoding must be a cplxnet.encodings.base"):
        m(x, encoding=object())[0]
    with pytest.raises(TypeError, match="attn_mask must be a bool"):
        m(x, attn_mask=torch.ones(L, L, dtype=torch.int32))[0]
    with pytest.raises(TypeError, match="attn_mask must be a bool .* got list"):
        m(x, attn_mask=[[True]])[0]
    with pytest.raises(ValueError, match="MultiheadAttention: attn_mask .* does not broadcast"):
        m(x, attn_mask=torch.ones(L, L + 1, dtype=torch.bool))[0]
    with pytest.raises(ValueError, match="MultiheadAttention: attn_mask .* does not broadcast"):
        m(x, attn_mask=torch.zeros(L + 1, L), encoding=ConstBias(torch.zeros(1, H, L, L)))[0]


def _copy_as_complex(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    """dst's (complex) parameters := src's, real weights W becoming W + 0i."""
    with torch.no_grad():
        for name, p in src.named_parameters():
            dst.get_parameter(name).copy_(p.to(dst.get_parameter(name).dtype))


def test_real_projection_is_complex_projection_with_real_weights():
    """projection="real": the four projection weights are real (state_dict, factory dtype),
    and the layer equals the complex-weight layer whose weights are W + 0i."""
    torch.manual_seed(0)
    m = cnn.MultiheadAttention(
        8, 2, projection="real", dtype=torch.complex128, batch_first=True
    ).eval()
    assert m.in_proj_weight.dtype == m.out_proj.weight.dtype == torch.float64
    assert m.in_proj_bias.dtype == m.out_proj.bias.dtype == torch.complex128
    assert "projection='real'" in repr(m)
    with torch.no_grad():
        m.in_proj_bias.normal_()
    ref = cnn.MultiheadAttention(8, 2, dtype=torch.complex128, batch_first=True).eval()
    assert list(ref.state_dict()) == list(m.state_dict())
    _copy_as_complex(ref, m)
    x = torch.randn(2, 5, 8, dtype=torch.complex128)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    torch.testing.assert_close(m(x, key_padding_mask=pad)[0], ref(x, key_padding_mask=pad)[0])
    kv = torch.randn(2, 4, 8, dtype=torch.complex128)
    torch.testing.assert_close(m(x, key=kv)[0], ref(x, key=kv)[0])
    # a real layer's weights are real anyway: the option changes nothing there
    torch.manual_seed(1)
    a = cnn.MultiheadAttention(8, 2, projection="real", dtype=torch.float64, batch_first=True)
    torch.manual_seed(1)
    b = cnn.MultiheadAttention(8, 2, dtype=torch.float64, batch_first=True)
    xr = x.real.contiguous()
    torch.testing.assert_close(a(xr)[0], b(xr)[0])
    with pytest.raises(ValueError, match="unknown projection 'shared'"):
        cnn.MultiheadAttention(8, 2, projection="shared", batch_first=True)
