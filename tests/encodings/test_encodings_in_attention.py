"""Every attention-site encoding inside cplxnet.nn.MultiheadAttention (complex and real): the
wiring of the hook contract, and key padding never changing the outputs of real tokens."""

import math
import re

import pytest
import torch

from cplxnet import functional as CF
from cplxnet._utils import pack, unpack
from cplxnet.encodings import DebertaEncoding, create_encoding
from cplxnet.nn import MultiheadAttention, TransformerEncoder

D, H = 8, 2
CASES = [
    ("none", {}),
    ("rotary", {}),
    ("rotary", {"rotate_values": True}),
    ("rotary", {"layout": "half"}),
    ("rotary", {"scaling": "yarn", "factor": 4.0, "original_max_len": 4}),
    ("xpos", {}),
    ("xpos", {"layout": "half", "scale_base": 8.0, "scaling": "linear", "factor": 2.0}),
    ("shaw", {"max_relative_position": 2}),
    ("shaw", {"values": False}),
    ("xl", {}),
    ("t5", {"num_buckets": 8, "max_distance": 10}),
    ("alibi", {}),
    ("alibi", {"causal": True}),
    ("deberta", {"max_relative_positions": 3}),
    ("deberta", {"max_relative_positions": 16, "position_buckets": 4}),
]
KINDS = [torch.complex128, torch.float64]


def build(name, opts, kind):
    torch.manual_seed(1)
    mha = MultiheadAttention(D, H, dtype=kind, batch_first=True)
    enc = create_encoding(name, d_model=D, num_heads=H, max_len=32, dtype=kind, **opts)
    with torch.no_grad():  # non-trivial biases, u/v, tables
        for p in list(mha.parameters()) + list(enc.parameters()):
            p.add_(0.3 * torch.randn_like(p))
    return mha, enc


def reference(mha, enc, x, key_padding_mask):
    """The contract spelled out: project, rotate, Re(q k^H) * logit_scale / sqrt(Dh) + bias, mask
    padded keys, softmax, weights @ v (+ value_term), output projection."""
    B, L, _ = x.shape
    Dh = D // H
    q, k, v = CF.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, -1)
    q, k, v = (t.unflatten(-1, (H, Dh)).transpose(1, 2) for t in (q, k, v))
    q, k, v = enc.rotate(q, k, v)
    logits = torch.real(q @ k.conj().transpose(-1, -2)) * enc.logit_scale / math.sqrt(Dh)
    bias = enc.logits_bias(pack(q), pack(k))
    if bias is not None:
        logits = logits + bias
    logits = logits.masked_fill(key_padding_mask[:, None, None, :], -math.inf)
    w = torch.softmax(logits, -1)
    out = w @ pack(v)
    if enc.has_value_term:
        out = out + enc.value_term(w)
    out = unpack(out, v).transpose(1, 2).reshape(B, L, D)
    return mha.out_proj(out)


@pytest.mark.parametrize("name,opts", CASES)
@pytest.mark.parametrize("kind", KINDS)
def test_mha_with_encoding_matches_contract(name, opts, kind):
    mha, enc = build(name, opts, kind)
    x = torch.randn(3, 7, D, dtype=kind)
    kpm = torch.zeros(3, 7, dtype=torch.bool)
    kpm[1, 5:] = True
    kpm[2, 2:] = True
    out = mha(x, key_padding_mask=kpm, encoding=enc)[0]
    torch.testing.assert_close(out, reference(mha, enc, x, kpm))


@pytest.mark.parametrize("name,opts", CASES)
@pytest.mark.parametrize("kind", KINDS)
def test_key_padding_never_changes_real_tokens(name, opts, kind):
    """Sequence 1 has 4 real tokens and 5 padded ones: its first 4 outputs equal those of the
    unpadded 4-token sequence, whatever the padding holds (positions are 0..L-1 in both)."""
    mha, enc = build(name, opts, kind)
    x = torch.randn(2, 9, D, dtype=kind)
    kpm = torch.zeros(2, 9, dtype=torch.bool)
    kpm[1, 4:] = True
    out = mha(x, key_padding_mask=kpm, encoding=enc)[0]
    alone = mha(x[1:, :4], encoding=enc)[0]
    torch.testing.assert_close(out[1, :4], alone[0])
    x2 = x.clone()
    x2[1, 4:] = 100 * torch.randn(5, D, dtype=kind)
    out2 = mha(x2, key_padding_mask=kpm, encoding=enc)[0]
    torch.testing.assert_close(out2[1, :4], out[1, :4])
    torch.testing.assert_close(out2[0], out[0])
    out.abs().sum().backward()  # trains end to end
    assert all(p.grad is not None for p in enc.parameters())


def test_complex64_model_runs_every_attention_encoding():
    for name, opts in CASES:
        mha = MultiheadAttention(D, H, batch_first=True)
        enc = create_encoding(name, d_model=D, num_heads=H, **opts)
        x = torch.randn(2, 6, D, dtype=torch.complex64)
        kpm = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])
        y = mha(x, key_padding_mask=kpm, encoding=enc)[0]
        assert y.dtype == torch.complex64 and torch.isfinite(torch.view_as_real(y)).all()


@pytest.mark.parametrize("kind", KINDS)
def test_deberta_absolute_layers_in_encoder(kind):
    """With absolute_layers=1 of 2, the encoder adds the absolute table to the input of the last
    layer only (``layer_input``), and the relative terms act in both."""
    torch.manual_seed(0)
    enc = TransformerEncoder.from_sizes(
        D, H, 2, dim_feedforward=16, dropout=0.0, dtype=kind, batch_first=True
    ).eval()
    with_abs = DebertaEncoding(D, H, max_relative_positions=4, absolute_layers=1, dtype=kind)
    plain = DebertaEncoding(D, H, max_relative_positions=4, dtype=kind)
    plain.load_state_dict(with_abs.state_dict(), strict=False)
    x = torch.randn(2, 5, D, dtype=kind)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    h = enc.layers[0](x, src_key_padding_mask=pad, encoding=plain)
    h = enc.layers[1](h + with_abs.abs_embeddings[:5], src_key_padding_mask=pad, encoding=plain)
    if enc.norm is not None:
        h = enc.norm(h)
    torch.testing.assert_close(enc(x, src_key_padding_mask=pad, encoding=with_abs), h)


def _every_encoding(kind):
    """One instance of every registered encoding, for a (D, H) model of dtype ``kind``."""
    from cplxnet.encodings import available_encodings

    return [
        create_encoding(n, d_model=D, num_heads=H, vocab_size=11, max_len=16, dtype=kind)
        for n in available_encodings()
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_encoding_without_an_applied_site_raises_instead_of_doing_nothing(kind):
    """An encoding passed to a layer that applies none of its sites (sinusoidal, trainable: input;
    complex-order: token) raises, naming the encoding, its sites and where to apply it; one that
    acts on a site the layer applies (or on none: ``none``) is accepted."""
    from cplxnet.nn import ATTENTION_SITES, ENCODER_SITES, TransformerEncoderLayer

    mha = MultiheadAttention(D, H, dtype=kind, batch_first=True)
    layer = TransformerEncoderLayer(D, H, 16, dtype=kind, batch_first=True)
    encoder = TransformerEncoder(layer, 2)
    x = torch.randn(2, 5, D, dtype=kind)
    inert = 0
    for enc in _every_encoding(kind):
        for module, sites in (
            (mha, ATTENTION_SITES),
            (layer, ENCODER_SITES),
            (encoder, ENCODER_SITES),
        ):
            if not enc.acts_on or enc.acts_on & sites:
                if enc.name == "randomized":  # its input hook draws the forward's positions
                    x = enc.encode_input(x)
                module(x, encoding=enc)
                continue
            inert += 1
            owner = type(module).__name__
            with pytest.raises(ValueError) as err:
                module(x, encoding=enc)
            msg = str(err.value)
            assert msg.startswith(f"{owner}: encoding {enc.name!r} acts on {sorted(enc.acts_on)}")
            assert f"none of which {owner} applies" in msg
            site = sorted(enc.acts_on)[0]
            hook = {"token": "encoding.embed(ids)", "input": "encoding.encode_input(x)"}[site]
            assert hook in msg
    assert inert >= 3 * 5  # trainable, hierarchical, sinusoidal, floater, multiplicative, c-o...


@pytest.mark.parametrize("name", ["rotary", "xpos", "complex-order+rotary", "randomized"])
def test_modulus_score_refuses_encodings_that_rotate_q_and_k(name):
    """|q k^T| does not conjugate k: rotations by e^{i m theta}, e^{i n theta} would make the
    score depend on m + n (measured: shifting both positions changes it), so the attention
    layer and the models refuse the pair, naming the fix; bias encodings stay allowed."""
    from cplxnet.models import build_model, make_config

    enc = create_encoding(name, d_model=D, num_heads=H, vocab_size=11, max_len=16)
    x = torch.randn(1, 4, D, dtype=torch.complex64)
    mha = MultiheadAttention(D, H, batch_first=True, score="modulus")
    with pytest.raises(ValueError, match=re.escape(f"encoding '{name}' rotates q and k")) as err:
        mha(x, x, x, encoding=enc)
    assert "use score='real'" in str(err.value)
    mha(x, x, x, encoding=create_encoding("alibi", num_heads=H))
    sizes = dict(d_model=D, num_heads=H, dim_feedforward=16, vocab_size=11, max_len=16)
    for family, extra in (("transformer", {"num_classes": 2}), ("decoder", {})):
        config = make_config(family, encoding=name, score="modulus", **sizes, **extra)
        with pytest.raises(ValueError, match=re.escape(f"{family}: encoding '{name}' rotates")):
            build_model(config)
        build_model(make_config(family, encoding="alibi", score="modulus", **sizes, **extra))


def test_under_the_modulus_score_rotary_would_depend_on_absolute_positions():
    """Why the pair is refused: |q_m k_n^T| after rotary changes when m and n shift together."""
    enc = create_encoding("rotary", d_model=D, num_heads=H, dtype=torch.complex128)
    q, k = torch.randn(2, 1, H, 4, D // H, dtype=torch.complex128)

    def scores(offset, score):
        q2, k2, _ = enc.rotate(q, k, k, offset=offset)
        return CF.attention_weights(q2, k2, score=score)

    torch.testing.assert_close(scores(0, "real"), scores(5, "real"))
    assert (scores(0, "modulus") - scores(5, "modulus")).abs().max() > 1e-3
