"""Combined encodings: one encoding applying each member at its own sites, equal to applying the
members by hand; the same-site errors; options addressing a member; the zoo with a combination."""

import dataclasses
import math

import pytest
import torch
from test_encoding_gradcheck import gradcheck_hook
from test_relative_encodings import randomize

from cplxnet import functional as CF
from cplxnet._utils import pack, unpack
from cplxnet.encodings import (
    CombinedEncoding,
    PositionalEncoding,
    RotaryEncoding,
    check_sites,
    create_encoding,
    encoding_members,
    encoding_option_parameters,
)
from cplxnet.models import build_model, make_config, sparse_parameters
from cplxnet.nn import MultiheadAttention

D, H = 8, 2
KINDS = [torch.complex128, torch.float64]
CTX = dict(d_model=D, num_heads=H, vocab_size=11, max_len=16)


def by_hand(mha, members, x):
    """Attention with each member applied at its sites by hand: the one "qk" member rotates,
    every member's logits bias and value term is added, the one member with a content scale sets
    it."""
    B, L, _ = x.shape
    Dh = D // H
    q, k, v = CF.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, -1)
    q, k, v = (t.unflatten(-1, (H, Dh)).transpose(1, 2) for t in (q, k, v))
    for m in members:
        if "qk" in m.acts_on:
            q, k, v = m.rotate(q, k, v)
    scale = math.prod(m.logit_scale for m in members)  # at most one differs from 1
    logits = torch.real(q @ k.conj().transpose(-1, -2)) * scale / math.sqrt(Dh)
    for m in members:
        if "logits" in m.acts_on:
            logits = logits + m.logits_bias(pack(q), pack(k))
    w = torch.softmax(logits, -1)
    out = w @ pack(v)
    for m in members:
        if "values" in m.acts_on:
            out = out + m.value_term(w)
    return mha.out_proj(unpack(out, v).transpose(1, 2).reshape(B, L, D))


ATTENTION_COMBOS = [
    ("rotary", "t5"),
    ("rotary", "shaw"),
    ("t5", "shaw", "tupe"),
    ("rotary", "xl", "deberta"),
]


@pytest.mark.parametrize("names", ATTENTION_COMBOS, ids="+".join)
@pytest.mark.parametrize("kind", KINDS)
def test_combination_in_attention_equals_members_by_hand(names, kind):
    torch.manual_seed(3)
    enc = create_encoding("+".join(names), dtype=kind, **CTX)
    randomize(enc)
    members = [enc.members[n] for n in names]
    assert isinstance(enc, CombinedEncoding) and enc.name == "+".join(names)
    assert enc.acts_on == frozenset().union(*(m.acts_on for m in members))
    mha = MultiheadAttention(D, H, dtype=kind, batch_first=True)
    x = torch.randn(2, 6, D, dtype=kind)
    torch.testing.assert_close(mha(x, encoding=enc)[0], by_hand(mha, members, x))


@pytest.mark.parametrize("kind", KINDS)
def test_embedding_sites_are_the_members_hooks(kind):
    """token + qk: embed is complex-order's, rotate is rotary's; input + logits: encode_input is
    sinusoidal's; layer (deberta's absolute layers) + qk: layer_input is deberta's."""
    co = create_encoding("complex-order+rotary", dtype=kind, **CTX)
    ids = torch.randint(0, 11, (2, 5))
    torch.testing.assert_close(co.embed(ids), co.members["complex_order"].embed(ids))
    q, k, v = (torch.randn(2, H, 5, D // H, dtype=kind) for _ in range(3))
    for a, b in zip(co.rotate(q, k, v), co.members["rotary"].rotate(q, k, v)):
        torch.testing.assert_close(a, b)
    x = torch.randn(2, 5, D, dtype=kind)
    assert co.encode_input(x) is x and co.layer_input(x, 0, 1) is x
    assert co.logits_bias(pack(q), pack(k)) is None and co.value_term(None) is None

    si = create_encoding("sinusoidal+t5", dtype=kind, **CTX)
    torch.testing.assert_close(si.encode_input(x), si.members["sinusoidal"].encode_input(x))
    with pytest.raises(NotImplementedError, match="does not replace the word embedding"):
        si.embed(ids)

    de = create_encoding(["deberta", "rotary"], dtype=kind, **CTX, deberta={"absolute_layers": 1})
    randomize(de)
    assert de.acts_on == {"logits", "layer", "qk"}
    torch.testing.assert_close(de.layer_input(x, 2, 3), de.members["deberta"].layer_input(x, 2, 3))
    torch.testing.assert_close(de.layer_input(x, 1, 3), x)


class LayerOnly(PositionalEncoding):
    name = "layer-only"
    acts_on = frozenset({"layer"})

    def __init__(self, dtype=torch.complex64):
        super().__init__()
        self._dtype = dtype


class QKOnly(LayerOnly):
    name = "qk-only"
    acts_on = frozenset({"qk"})


@pytest.mark.parametrize(
    "spec,first,second,site",
    [
        ("complex-order+complex-vanilla", "complex-order", "complex-vanilla", "token"),
        ("trainable+sinusoidal", "trainable", "sinusoidal", "input"),
        ("multiplicative+floater", "multiplicative", "floater", "input"),
        ([RotaryEncoding(D, H), QKOnly()], "rotary", "qk-only", "qk"),
        ([LayerOnly(), "deberta"], "layer-only", "deberta", "layer"),
    ],
)
def test_same_site_is_an_error_naming_both_and_the_site(spec, first, second, site):
    opts = {"deberta": {"absolute_layers": 1}} if "deberta" in spec else {}
    with pytest.raises(ValueError, match=rf"'{first}' and '{second}' both act on site '{site}'"):
        create_encoding(spec, **CTX, **opts)


def test_two_content_scales_are_an_error():
    with pytest.raises(ValueError, match=r"'deberta' .* and 'tupe' .* content score"):
        create_encoding("deberta+tupe", **CTX)
    assert create_encoding("tupe+t5", **CTX).logit_scale == pytest.approx(1 / math.sqrt(2))
    assert create_encoding("rotary+t5", **CTX).logit_scale == 1.0


def test_other_combination_errors():
    with pytest.raises(ValueError, match=r"'t5' appears twice"):
        create_encoding("t5+t5", **CTX)
    with pytest.raises(ValueError, match=r"unknown encoding 'rotry' in 't5\+rotry'"):
        create_encoding("t5+rotry", **CTX)
    with pytest.raises(ValueError, match="empty member name"):
        create_encoding("t5+", **CTX)
    with pytest.raises(TypeError, match="different dtypes"):
        create_encoding([RotaryEncoding(D, H, dtype=torch.float32), "t5"], **CTX)
    with pytest.raises(ValueError, match="at least two"):
        CombinedEncoding([RotaryEncoding(D, H)])
    assert isinstance(create_encoding(["rotary"], **CTX), RotaryEncoding)  # one member: itself


def test_options_address_a_member():
    dotted = create_encoding("complex-order+rotary", **CTX, **{"rotary.base": 500,
                             "complex-order.frequency": "shared"})  # fmt: skip
    nested = create_encoding("complex-order+rotary", **CTX, rotary={"base": 500},
                             complex_order={"frequency": "shared"})  # fmt: skip
    for enc in (dotted, nested):
        assert enc.members["rotary"].base == 500.0
        assert enc.members["complex_order"].frequency == "shared"
    with pytest.raises(TypeError, match=r"option 'base' must name its member: write rotary.base"):
        create_encoding("t5+rotary", **CTX, base=3)  # t5 has no base: only rotary's is suggested
    with pytest.raises(TypeError, match=r"option 'rotry.base' names no member; members: t5, "):
        create_encoding("t5+rotary", **CTX, **{"rotry.base": 3})
    with pytest.raises(TypeError, match=r"'t5\+rotary': encoding 'rotary' got unknown option"):
        create_encoding("t5+rotary", **CTX, **{"rotary.bse": 3})
    params = encoding_option_parameters("t5+rotary")
    assert "rotary.base" in params and "t5.num_buckets" in params and "rotary.d_model" not in params
    rotary = set(encoding_option_parameters("rotary"))
    assert {"base", "rotate_values", "layout", "scaling", "factor"} <= rotary
    assert not rotary & {"d_model", "num_heads", "max_len", "causal", "device", "dtype"}
    assert encoding_members("complex-order+rotary") == ("complex-order", "rotary")
    assert encoding_members("rotary") == ("rotary",)


def test_defaults_reach_only_the_members_that_take_them():
    enc = create_encoding("complex-order+rotary", **CTX, defaults={"padding_idx": 0, "sparse": 1})
    assert enc.members["complex_order"].padding_idx == 0 and enc.members["complex_order"].sparse
    user = create_encoding("complex-order+rotary", **CTX, defaults={"padding_idx": 0},
                           **{"complex-order.padding_idx": 3})  # fmt: skip
    assert user.members["complex_order"].padding_idx == 3


def test_check_sites_names_the_combination():
    check_sites("complex-order+rotary", {"token", "qk"}, "transformer")
    with pytest.raises(ValueError, match=r"encoding 'complex-order\+rotary' acts on .* 'cnn'"):
        check_sites("complex-order+rotary", {"token", "input"}, "cnn")
    with pytest.raises(ValueError, match=r"'complex-order\+rotary' acts on .* 'cnn'"):
        build_model(make_config("cnn", encoding="complex-order+rotary", vocab_size=11))


@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck_combination(kind):
    enc = create_encoding("rotary+shaw+t5", dtype=kind, d_model=4, num_heads=2,
                          **{"shaw.max_relative_position": 1, "t5.num_buckets": 4,
                             "t5.max_distance": 3})  # fmt: skip

    def hook(e, q, k, v):
        q, k, v = e.rotate(q, k, v)
        return e.logits_bias(pack(q), pack(k))

    qkv = [torch.randn(1, 2, 3, 2, dtype=kind) for _ in range(3)]
    gradcheck_hook(enc, hook, qkv)


@pytest.mark.parametrize("complex", [True, False], ids=["complex", "real"])
def test_zoo_transformer_with_complex_order_and_rotary(complex):
    """One training step; readable state_dict keys; the state_dict round-trips into a fresh
    model; the sparse per-word tables of complex-order are found inside the combination."""
    config = make_config(
        "transformer", d_model=8, num_heads=2, dim_feedforward=8, vocab_size=13, max_len=16,
        num_classes=3, complex=complex, dropout=0.0, attention_dropout=0.0,
        encoding="complex-order+rotary", encoding_options={"rotary.base": 500},
        sparse_embeddings=True,
    )  # fmt: skip
    model = build_model(config, dtype=torch.float64)
    keys = [k for k in model.state_dict() if k.startswith("encoding.")]
    assert keys and all(k.startswith("encoding.members.complex_order.") for k in keys)
    assert model.encoding.members["rotary"].base == 500.0
    assert model.embedding.word is None  # complex-order replaces the word table
    table = model.encoding.members["complex_order"].amplitude_weight
    assert any(p is table for p in sparse_parameters(model))
    ids = torch.randint(1, 13, (4, 7))
    mask = torch.zeros(4, 7, dtype=torch.bool)
    mask[1, 5:] = True
    before = table.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(ids, mask), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    opt.step()
    assert not torch.equal(before, table)
    model.eval()
    fresh = build_model(config, dtype=torch.float64).eval()
    fresh.load_state_dict(model.state_dict())
    torch.testing.assert_close(fresh(ids, mask), model(ids, mask))
    # the rotation is applied: the same model without rotary gives other logits
    plain_config = dataclasses.replace(config, encoding="complex-order", encoding_options={})
    plain = build_model(plain_config, dtype=torch.float64).eval()
    plain.load_state_dict(
        {k.replace("members.complex_order.", ""): v for k, v in model.state_dict().items()}
    )
    assert not torch.allclose(plain(ids, mask), model(ids, mask))


def test_word_vectors_reach_complex_order_inside_a_combination():
    config = make_config("transformer", d_model=8, num_heads=2, dim_feedforward=8, vocab_size=13,
                         encoding="complex-order+rotary")  # fmt: skip
    model = build_model(config)
    vectors = torch.randn(13, 8)
    assert model.load_word_vectors(vectors) == 12  # every row but padding
    table = model.encoding.members["complex_order"].amplitude_weight
    torch.testing.assert_close(table[1:], vectors[1:])
