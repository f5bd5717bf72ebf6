"""TransformerDecoderLayer, TransformerDecoder and Transformer: torch's modules (real weights on the
real twin), an explicit complex attention formula (values and gradients), every mask kind,
causality, pre/post-norm, the encodings of self- and cross-attention, torch's arguments in
torch's places, export, and the errors."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import cplxnet.nn as cnn
from cplxnet._utils import pack
from cplxnet.encodings import create_encoding

C, R = torch.complex128, torch.float64
D, H, B, T, S = 8, 2, 3, 4, 5
MASKS = ["none", "bool", "float", "causal", "3d", "memory_causal"]


def _randomize(module: nn.Module) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            gain = "norm" in name and name.endswith("weight")
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if gain else 0.0))


def _masks(kind: str) -> dict:
    """Masks of one kind, in torch's conventions (bool True = banned / padding). Key 0 is never
    banned or padded, so no query loses every key (torch gives NaN there)."""
    g = torch.Generator().manual_seed(1)
    if kind == "none":
        return {}
    if kind == "causal":
        return {"tgt_is_causal": True}
    if kind == "memory_causal_alone":  # cplxnet takes is_causal without a mask (torch: a hint)
        return {"memory_is_causal": True}
    if kind == "memory_causal":
        banned = torch.ones(T, S, dtype=torch.bool).triu(1)
        return {"memory_mask": banned, "memory_is_causal": True}
    if kind == "3d":
        tm = torch.randn(B * H, T, T, dtype=R, generator=g)
        mm = torch.rand(B * H, T, S, generator=g) < 0.4
        mm[..., 0] = False
        return {"tgt_mask": tm, "memory_mask": mm}
    tpad = torch.zeros(B, T, dtype=torch.bool)
    tpad[1, 2:] = True
    mpad = torch.zeros(B, S, dtype=torch.bool)
    mpad[0, 3:] = True
    mpad[2, 1:] = True
    tm = torch.rand(T, T, generator=g) < 0.4
    mm = torch.rand(T, S, generator=g) < 0.4
    tm[:, 0] = mm[:, 0] = False
    if kind == "float":
        tm = torch.randn(T, T, dtype=R, generator=g)
        mm = torch.randn(T, S, dtype=R, generator=g)
        tpad = tpad.to(R) * -2.0
        mpad = mpad.to(R) * -3.0
    return {
        "tgt_mask": tm,
        "memory_mask": mm,
        "tgt_key_padding_mask": tpad,
        "memory_key_padding_mask": mpad,
    }


def _for_torch(masks: dict) -> dict:
    """torch reads ``*_is_causal`` as a hint about the mask: give it the causal mask too."""
    masks = dict(masks)
    if masks.get("tgt_is_causal") and masks.get("tgt_mask") is None:
        masks["tgt_mask"] = nn.Transformer.generate_square_subsequent_mask(T, dtype=R)
    return masks


def _compare(got_fn, want_fn, inputs, got_params, want_params):
    """Equal outputs, and equal gradients (inputs and parameters) of a loss touching every part."""
    got, want = got_fn(), want_fn()
    torch.testing.assert_close(got, want)
    w = torch.randn_like(got)

    def loss(o):
        return (pack(o) * pack(w)).sum()

    g1 = torch.autograd.grad(loss(got), [*inputs, *got_params])
    g2 = torch.autograd.grad(loss(want), [*inputs, *want_params])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def _inputs(dtype, batch_first=True):
    tgt = torch.randn(B, T, D, dtype=dtype, requires_grad=True)
    mem = torch.randn(B, S, D, dtype=dtype, requires_grad=True)
    if batch_first:
        return tgt, mem
    return tgt.transpose(0, 1), mem.transpose(0, 1)


def _leaves(x):
    return x if x.is_leaf else x._base


# ---- against torch (real weights, real twin) ----
@pytest.mark.parametrize("masks", MASKS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_decoder_layer_and_decoder_equal_torch(batch_first, norm_first, masks):
    args = (D, H, 12, 0.0, "gelu", 1e-3, batch_first, norm_first)
    t = nn.TransformerDecoderLayer(*args, dtype=R)
    _randomize(t)
    m = cnn.TransformerDecoderLayer(*args, dtype=R)
    m.load_state_dict(t.state_dict())
    kw = _masks(masks)
    tgt, mem = _inputs(R, batch_first)
    leaves = [_leaves(tgt), _leaves(mem)]
    names = [n for n, _ in t.named_parameters()]
    mp = dict(m.named_parameters())
    _compare(
        lambda: m(tgt, mem, **kw),
        lambda: t(tgt, mem, **_for_torch(kw)),
        leaves,
        [mp[n] for n in names],
        list(t.parameters()),
    )
    # the stack, positionally as torch: (tgt, memory, tgt_mask, memory_mask,
    # tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal)
    dm = cnn.TransformerDecoder(m, 2, nn.LayerNorm(D, dtype=R))
    dt = nn.TransformerDecoder(t, 2, nn.LayerNorm(D, dtype=R))
    _randomize(dt)
    dm.load_state_dict(dt.state_dict())
    keys = [
        "tgt_mask",
        "memory_mask",
        "tgt_key_padding_mask",
        "memory_key_padding_mask",
        "tgt_is_causal",
        "memory_is_causal",
    ]
    tk = _for_torch(kw)
    pos = [kw.get(k) for k in keys[:4]] + [kw.get(k, False) for k in keys[4:]]
    tpos = [tk.get(k) for k in keys[:4]] + [tk.get(k, False) for k in keys[4:]]
    names = [n for n, _ in dt.named_parameters()]
    mp = dict(dm.named_parameters())
    _compare(
        lambda: dm(tgt, mem, *pos),
        lambda: dt(tgt, mem, *tpos),
        leaves,
        [mp[n] for n in names],
        list(dt.parameters()),
    )


@pytest.mark.parametrize("masks", ["bool", "float", "causal"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_equals_torch(batch_first, norm_first, masks):
    """torch's positional ``__init__`` and ``forward(src, tgt, src_mask, tgt_mask, memory_mask,
    src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask, src_is_causal,
    tgt_is_causal, memory_is_causal)``."""
    args = (D, H, 2, 2, 12, 0.0, "relu", None, None, 1e-3, batch_first, norm_first, True)
    t = nn.Transformer(*args, dtype=R)
    _randomize(t)
    m = cnn.Transformer(*args, dtype=R)
    assert list(m.state_dict()) == list(t.state_dict())
    m.load_state_dict(t.state_dict())
    kw = _masks(masks)
    tk = _for_torch(kw)
    src = torch.randn(B, S, D, dtype=R, requires_grad=True)
    tgt = torch.randn(B, T, D, dtype=R, requires_grad=True)
    s_, t_ = (x if batch_first else x.transpose(0, 1) for x in (src, tgt))
    spad = torch.zeros(B, S, dtype=torch.bool)
    spad[1, 4:] = True
    smask = torch.randn(S, S, dtype=R) if masks == "float" else None

    def call(mod, k):
        return mod(
            s_,
            t_,
            smask,
            k.get("tgt_mask"),
            k.get("memory_mask"),
            spad,
            k.get("tgt_key_padding_mask"),
            k.get("memory_key_padding_mask"),
            None,
            k.get("tgt_is_causal"),
            False,
        )

    names = [n for n, _ in t.named_parameters()]
    mp = dict(m.named_parameters())
    with torch.no_grad():  # torch's fast paths need no_grad; our values equal them too
        torch.testing.assert_close(call(m, kw), call(t, tk))
    _compare(
        lambda: call(m, kw),
        lambda: call(t, tk),
        [src, tgt],
        [mp[n] for n in names],
        list(t.parameters()),
    )


def test_transformer_init_is_torchs_glorot_and_mask_is_torchs():
    torch.manual_seed(0)
    m = cnn.Transformer(64, 4, 1, 1, 128, dtype=C)
    w = m.decoder.layers[0].multihead_attn.in_proj_weight  # (3D, D): fans D and 3D, as torch
    torch.testing.assert_close(w.abs().square().mean().item(), 2 / (64 + 192), rtol=0.05, atol=0)
    w = m.encoder.layers[0].linear1.weight
    torch.testing.assert_close(w.abs().square().mean().item(), 2 / (64 + 128), rtol=0.05, atol=0)
    r = cnn.Transformer(64, 4, 1, 1, 128, dtype=R).decoder.layers[0].linear2.weight
    bound = math.sqrt(6 / (64 + 128))
    assert r.abs().max() <= bound and r.abs().max() > 0.95 * bound
    mask = cnn.Transformer.generate_square_subsequent_mask(5, dtype=C)
    assert mask.dtype == R
    torch.testing.assert_close(mask, nn.Transformer.generate_square_subsequent_mask(5, dtype=R))


# ---- against an explicit complex formula ----
def _attention_ref(attn, x, kv, banned, add, qk=None, logits_bias=None):
    """Multi-head attention written out: complex projections, ``Re(q k^H) / sqrt(Dh)``, the
    float masks added, the bool ones set to ``-inf``, a softmax, the real weights on ``v``."""
    Dh = D // H
    wq, wk, wv = attn.in_proj_weight.chunk(3)
    bq, bk, bv = attn.in_proj_bias.chunk(3)

    def heads(y):
        return y.unflatten(-1, (H, Dh)).transpose(1, 2)

    q, k, v = heads(x @ wq.T + bq), heads(kv @ wk.T + bk), heads(kv @ wv.T + bv)
    if qk is not None:
        q, k = qk(q, k)
    logits = (q @ k.conj().transpose(-1, -2)).real / math.sqrt(Dh) + add
    if logits_bias is not None:
        logits = logits + logits_bias(q, k)
    a = logits.masked_fill(banned, float("-inf")).softmax(-1)
    out = (a.to(v.dtype) @ v).transpose(1, 2).flatten(-2)
    return out @ attn.out_proj.weight.T + attn.out_proj.bias


def _split_masks(kw: dict, lq: int, lk: int, which: str):
    """``(banned bool, added float)`` broadcasting to ``(B, H, lq, lk)`` for one attention."""
    banned = torch.zeros(1, 1, lq, lk, dtype=torch.bool)
    add = torch.zeros(1, 1, lq, lk, dtype=R)
    mask = kw.get(f"{which}_mask")
    pad = kw.get(f"{which}_key_padding_mask")
    if mask is not None:
        mask = mask.view(B, H, lq, lk) if mask.dim() == 3 else mask
        if mask.dtype == torch.bool:
            banned = banned | mask
        else:
            add = add + mask
    if pad is not None:
        if pad.dtype == torch.bool:
            banned = banned | pad[:, None, None, :]
        else:
            add = add + pad[:, None, None, :]
    if kw.get(f"{which}_is_causal"):
        banned = banned | torch.ones(lq, lk, dtype=torch.bool).triu(1)
    return banned, add


def _layer_ref(layer, tgt, mem, kw, qk_self=None, bias_self=None, qk_cross=None):
    sa_b, sa_a = _split_masks(kw, T, T, "tgt")
    ca_b, ca_a = _split_masks(kw, T, S, "memory")

    def sa(x):
        return _attention_ref(layer.self_attn, x, x, sa_b, sa_a, qk_self, bias_self)

    def ca(x):
        return _attention_ref(layer.multihead_attn, x, mem, ca_b, ca_a, qk_cross)

    def ff(x):
        h = layer.activation(x @ layer.linear1.weight.T + layer.linear1.bias)
        return h @ layer.linear2.weight.T + layer.linear2.bias

    n1, n2, n3 = layer.norm1, layer.norm2, layer.norm3
    x = tgt
    if layer.norm_first:
        x = x + sa(n1(x))
        x = x + ca(n2(x))
        return x + ff(n3(x))
    x = n1(x + sa(x))
    x = n2(x + ca(x))
    return n3(x + ff(x))


@pytest.mark.parametrize("masks", [*MASKS, "memory_causal_alone"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_the_explicit_complex_formula(norm_first, masks):
    layer = cnn.TransformerDecoderLayer(D, H, 12, 0.0, "relu", 1e-5, True, norm_first, dtype=C)
    _randomize(layer)
    kw = _masks(masks)
    tgt, mem = _inputs(C)
    params = list(layer.parameters())
    _compare(
        lambda: layer(tgt, mem, **kw),
        lambda: _layer_ref(layer, tgt, mem, kw),
        [tgt, mem],
        params,
        params,
    )


def test_decoder_stack_and_transformer_compose_their_parts():
    dec = cnn.TransformerDecoder.from_sizes(
        D, H, 2, final_norm="split", dim_feedforward=12, dropout=0.0, batch_first=True, dtype=C
    )
    _randomize(dec)
    kw = _masks("bool")
    tgt, mem = _inputs(C)
    params = list(dec.parameters())

    def ref():
        x = tgt
        for layer in dec.layers:
            x = _layer_ref(layer, x, mem, kw)
        return dec.norm(x)

    _compare(lambda: dec(tgt, mem, **kw), ref, [tgt, mem], params, params)
    m = cnn.Transformer(D, H, 1, 2, 12, 0.0, batch_first=True, dtype=C).eval()
    src = torch.randn(B, S, D, dtype=C)
    spad = torch.zeros(B, S, dtype=torch.bool)
    spad[0, 2:] = True
    memory = m.encoder(src, src_key_padding_mask=spad)
    want = m.decoder(tgt, memory, tgt_is_causal=True, memory_key_padding_mask=spad)
    got = m(src, tgt, src_key_padding_mask=spad, memory_key_padding_mask=spad, tgt_is_causal=True)
    torch.testing.assert_close(got, want)


# ---- encodings at every site ----
def _rotate(freqs, dtype):
    """Rotary written out: position ``p`` of its own sequence turns feature ``j`` by
    ``p * theta_j``."""

    def rot(x):
        pos = torch.arange(x.shape[-2], dtype=R)[:, None]
        return x * torch.polar(torch.ones_like(pos * freqs), pos * freqs).to(dtype)

    return lambda q, k: (rot(q), rot(k))


def test_encodings_in_self_and_cross_attention_equal_the_formula():
    """Rotary on the target's self-attention and on the cross-attention (queries turned by
    target positions, keys by source positions), T5's bias on the self-attention."""
    layer = cnn.TransformerDecoderLayer(D, H, 12, 0.0, batch_first=True, dtype=C)
    _randomize(layer)
    rot = create_encoding("rotary", d_model=D, num_heads=H, dtype=C)
    t5 = create_encoding("t5", d_model=D, num_heads=H, causal=True, dtype=C)
    with torch.no_grad():
        t5.weight.normal_()
    tgt, mem = _inputs(C)
    kw = _masks("causal")
    freqs = rot.frequencies
    params = list(layer.parameters())
    _compare(
        lambda: layer(tgt, mem, **kw, encoding=rot, memory_encoding=rot),
        lambda: _layer_ref(layer, tgt, mem, kw, _rotate(freqs, C), None, _rotate(freqs, C)),
        [tgt, mem],
        params,
        params,
    )
    _compare(
        lambda: layer(tgt, mem, **kw, encoding=t5),
        lambda: _layer_ref(
            layer, tgt, mem, kw, None, lambda q, k: t5.logits_bias(pack(q), pack(k))
        ),
        [tgt, mem],
        params,
        params,
    )
    plain = layer(tgt, mem, **kw)
    assert not torch.allclose(layer(tgt, mem, **kw, memory_encoding=rot), plain)
    # the stacks pass them on
    dec = cnn.TransformerDecoder(layer, 2)
    got = dec(tgt, mem, tgt_is_causal=True, encoding=t5, memory_encoding=rot)
    x = tgt
    for i, lyr in enumerate(dec.layers):
        x = lyr(x, mem, tgt_is_causal=True, encoding=t5, memory_encoding=rot, layer=i, num_layers=2)
    torch.testing.assert_close(got, x)
    m = cnn.Transformer(D, H, 1, 1, 12, 0.0, batch_first=True, dtype=C).eval()
    src = torch.randn(B, S, D, dtype=C)
    got = m(src, tgt, tgt_is_causal=True, src_encoding=t5, tgt_encoding=rot, memory_encoding=rot)
    want = m.decoder(
        tgt, m.encoder(src, encoding=t5), tgt_is_causal=True, encoding=rot, memory_encoding=rot
    )
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("spec", ["t5", "alibi", "shaw", "xl", "deberta", "rotary+t5"])
def test_relative_encodings_are_refused_in_cross_attention(spec):
    enc = create_encoding(spec, d_model=D, num_heads=H, causal=True, dtype=C)
    layer = cnn.TransformerDecoderLayer(D, H, 12, batch_first=True, dtype=C)
    tgt, mem = _inputs(C)
    with pytest.raises(
        ValueError, match="TransformerDecoderLayer: memory_encoding .* undefined in cross-attention"
    ):
        layer(tgt, mem, memory_encoding=enc)
    layer(tgt, mem, encoding=enc, tgt_is_causal=True)  # defined in the self-attention
    with pytest.raises(ValueError, match="TransformerDecoder: memory_encoding"):
        cnn.TransformerDecoder(layer, 1)(tgt, mem, memory_encoding=enc)
    with pytest.raises(ValueError, match="sinusoidal"):
        layer(tgt, mem, memory_encoding=create_encoding("sinusoidal", d_model=D, dtype=C))


# ---- torch's arguments in torch's places ----
def _tdl_options(m: nn.Module) -> dict:
    act = m.activation
    return {
        "d_model": m.self_attn.embed_dim,
        "nhead": (m.self_attn.num_heads, m.multihead_attn.num_heads),
        "dim_feedforward": m.linear1.out_features,
        "dropout": (
            m.dropout.p,
            m.dropout1.p,
            m.dropout2.p,
            m.dropout3.p,
            m.self_attn.dropout,
            m.multihead_attn.dropout,
        ),
        "activation": "gelu"
        if isinstance(act, nn.GELU) or act is torch.nn.functional.gelu
        else "relu",
        "layer_norm_eps": (m.norm1.eps, m.norm2.eps, m.norm3.eps),
        "batch_first": m.batch_first if hasattr(m, "batch_first") else m.self_attn.batch_first,
        "norm_first": m.norm_first,
        "bias": (
            m.linear1.bias is not None,
            m.norm3.bias is not None,
            m.multihead_attn.in_proj_bias is not None,
        ),
    }


def _tf_options(m: nn.Module) -> dict:
    return {
        "enc": (
            len(m.encoder.layers),
            m.encoder.layers[0].linear1.out_features,
            m.encoder.layers[0].norm_first,
            m.encoder.norm.eps,
        ),
        "dec": (len(m.decoder.layers), _tdl_options(m.decoder.layers[0])),
        "batch_first": m.batch_first,
        "final_norm_bias": m.decoder.norm.bias is not None,
    }


CASES = [
    (
        cnn.TransformerDecoderLayer,
        nn.TransformerDecoderLayer,
        (D, H, 16, 0.2, "gelu", 1e-3, True, True, False),
        _tdl_options,
    ),
    (
        cnn.TransformerDecoderLayer,
        nn.TransformerDecoderLayer,
        (D, H, 12, 0.3, "relu", 1e-4, False, False, True),
        _tdl_options,
    ),
    (
        cnn.Transformer,
        nn.Transformer,
        (D, H, 2, 3, 16, 0.2, "gelu", None, None, 1e-3, True, True, False),
        _tf_options,
    ),
    (
        cnn.Transformer,
        nn.Transformer,
        (D, H, 1, 2, 12, 0.3, "relu", None, None, 1e-4, False, False, True),
        _tf_options,
    ),
]


@pytest.mark.parametrize(("ours", "theirs", "args", "options"), CASES)
def test_positional_arguments_land_where_torch_puts_them(ours, theirs, args, options):
    m, t = ours(*args, dtype=R), theirs(*args, dtype=R)
    assert options(m) == options(t)
    assert {k: v.shape for k, v in m.state_dict().items()} == {
        k: v.shape for k, v in t.state_dict().items()
    }
    m.load_state_dict(t.state_dict())


def test_defaults_are_torchs():
    got, want = (
        _tdl_options(cnn.TransformerDecoderLayer(D, H, dtype=R)),
        _tdl_options(nn.TransformerDecoderLayer(D, H, dtype=R)),
    )
    assert got.pop("batch_first") is False and want.pop("batch_first") is False
    assert got == want
    m, t = cnn.Transformer(dtype=R), nn.Transformer(dtype=R)
    assert (m.d_model, m.nhead, m.batch_first) == (t.d_model, t.nhead, t.batch_first)
    assert _tf_options(m)["enc"][:2] == _tf_options(t)["enc"][:2] == (6, 2048)
    assert len(m.decoder.layers) == 6
    custom = cnn.TransformerEncoder(cnn.TransformerEncoderLayer(D, H, dtype=C), 1)
    assert cnn.Transformer(D, H, custom_encoder=custom, dtype=C).encoder is custom


# ---- export and errors ----
def test_decoder_layer_exports_with_dynamic_lengths():
    layer = cnn.TransformerDecoderLayer(D, H, 12, batch_first=True, dtype=torch.complex64).eval()
    tgt = torch.randn(2, 5, D, dtype=torch.complex64)
    mem = torch.randn(2, 6, D, dtype=torch.complex64)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    t_len, s_len = torch.export.Dim("t", min=2, max=64), torch.export.Dim("s", min=2, max=64)
    program = torch.export.export(
        layer,
        (tgt, mem),
        {"memory_key_padding_mask": pad, "tgt_is_causal": True},
        dynamic_shapes={
            "tgt": {1: t_len},
            "memory": {1: s_len},
            "memory_key_padding_mask": {1: s_len},
            "tgt_is_causal": None,
        },
    )
    tgt, mem = (
        torch.randn(2, 7, D, dtype=torch.complex64),
        torch.randn(2, 3, D, dtype=torch.complex64),
    )
    pad = torch.zeros(2, 3, dtype=torch.bool)
    pad[0, 2:] = True
    torch.testing.assert_close(
        program.module()(tgt, mem, memory_key_padding_mask=pad, tgt_is_causal=True),
        layer(tgt, mem, memory_key_padding_mask=pad, tgt_is_causal=True),
    )


@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched_inputs_are_a_batch_of_one(batch_first):
    """torch's unbatched ``(L, D)`` inputs (key padding masks ``(L,)``) for every layer and stack:
    the batch-of-one result without its batch dim, in values and input gradients."""
    kw = {"batch_first": batch_first, "dtype": C}
    enc_layer = cnn.TransformerEncoderLayer(D, H, 12, 0.0, **kw)
    dec_layer = cnn.TransformerDecoderLayer(D, H, 12, 0.0, **kw)
    modules = {
        "encoder_layer": (enc_layer, 1),
        "encoder": (cnn.TransformerEncoder(enc_layer, 2), 1),
        "decoder_layer": (dec_layer, 2),
        "decoder": (cnn.TransformerDecoder(dec_layer, 2), 2),
        "transformer": (cnn.Transformer(D, H, 1, 1, 12, 0.0, **kw), 2),
    }
    src_pad = torch.tensor([False, False, True, False, True])  # (S,)
    tgt_pad = torch.tensor([False, True, False, False])  # (T,)
    encoder_masks = {"src_key_padding_mask": src_pad}
    decoder_masks = {"tgt_key_padding_mask": tgt_pad, "memory_key_padding_mask": src_pad}
    batch_dim = 0 if batch_first else 1
    for name, (m, n_in) in modules.items():
        _randomize(m)
        masks = {1: encoder_masks, 2: decoder_masks}[n_in]
        if name == "transformer":
            masks = {**encoder_masks, **decoder_masks}
        one = [torch.randn(L, D, dtype=C, requires_grad=True) for L in (S, T)[:n_in]]
        if name.startswith("decoder"):
            one = one[::-1]  # (tgt, memory)
        got = m(*one, **masks)
        want = m(*(x.unsqueeze(batch_dim) for x in one), **{k: v[None] for k, v in masks.items()})
        assert got.shape == want.shape[:batch_dim] + want.shape[batch_dim + 1 :], name
        torch.testing.assert_close(got, want.squeeze(batch_dim))
        probe = torch.randn_like(got)
        g = torch.autograd.grad((got * probe.conj()).real.sum(), one)
        w = torch.autograd.grad((want.squeeze(batch_dim) * probe.conj()).real.sum(), one)
        for a, b in zip(g, w):
            torch.testing.assert_close(a, b)


def test_bad_input_is_one_clear_error():
    layer = cnn.TransformerDecoderLayer(D, H, 12, batch_first=True, dtype=C)
    tgt, mem = _inputs(C)
    with pytest.raises(
        ValueError,
        match="TransformerDecoderLayer: tgt and memory must have the same batch size, got 3 and 2",
    ):
        layer(tgt, mem[:2])
    with pytest.raises(
        ValueError,
        match=r"expected memory of shape \(B, L, 8\) or unbatched \(L, 8\), got \(3, 5, 4\)",
    ):
        layer(tgt, mem[..., :4])
    with pytest.raises(ValueError, match="tgt and memory must both be batched .3-D. or both unb"):
        layer(tgt[0], mem)
    with pytest.raises(TypeError, match="TransformerDecoderLayer: memory has dtype torch.compl"):
        layer(tgt, mem.to(torch.complex64))
    with pytest.raises(ValueError, match=r"memory_key_padding_mask must have shape \(3, 5\)"):
        layer(tgt, mem, memory_key_padding_mask=torch.zeros(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"decoder_layer must be a layer module.*from_sizes"):
        cnn.TransformerDecoder("layer", 2)
    m = cnn.Transformer(D, H, 1, 1, 12, batch_first=True, dtype=C)
    with pytest.raises(ValueError, match="Transformer: src and tgt must have the same batch"):
        m(torch.randn(2, S, D, dtype=C), tgt)
    with pytest.raises(ValueError, match=r"Transformer: expected tgt of shape \(B, L, 8\)"):
        m(torch.randn(B, S, D, dtype=C), tgt[..., :4])
    with pytest.raises(ValueError, match="Transformer: src and tgt must both be batched .3-D. or"):
        m(torch.randn(S, D, dtype=C), tgt)
    with pytest.raises(TypeError, match="Transformer: src must be a complex tensor"):
        m(torch.randn(B, S, D), tgt)


@pytest.mark.slow
def test_transformer_compiles_fullgraph_and_exports_with_padding():
    m = cnn.Transformer(D, H, 1, 1, 12, batch_first=True, dtype=torch.complex64).eval()
    src = torch.randn(2, 6, D, dtype=torch.complex64)
    tgt = torch.randn(2, 4, D, dtype=torch.complex64)
    spad = torch.zeros(2, 6, dtype=torch.bool)
    spad[1, 3:] = True
    kw = {"src_key_padding_mask": spad, "memory_key_padding_mask": spad, "tgt_is_causal": True}
    want = m(src, tgt, **kw)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(src, tgt, **kw), want)
    s_len = torch.export.Dim("s", min=2, max=64)
    t_len = torch.export.Dim("t", min=2, max=64)
    program = torch.export.export(
        m,
        (src, tgt),
        kw,
        dynamic_shapes={
            "src": {1: s_len},
            "tgt": {1: t_len},
            "src_key_padding_mask": {1: s_len},
            "memory_key_padding_mask": {1: s_len},
            "tgt_is_causal": None,
        },
    )
    src, tgt = (
        torch.randn(2, 9, D, dtype=torch.complex64),
        torch.randn(2, 3, D, dtype=torch.complex64),
    )
    spad = torch.zeros(2, 9, dtype=torch.bool)
    spad[0, 5:] = True
    kw = {"src_key_padding_mask": spad, "memory_key_padding_mask": spad, "tgt_is_causal": True}
    torch.testing.assert_close(program.module()(src, tgt, **kw), m(src, tgt, **kw))
