"""The registry: names, classes, instances, strict options and the site check."""

import inspect
import math
import re

import numpy as np
import pytest
import torch

import cplxnet.encodings as E
from cplxnet.encodings import (
    PositionalEncoding,
    RotaryEncoding,
    check_sites,
    create_encoding,
    register_encoding,
)

NAMES = (
    "none", "trainable", "hierarchical", "sinusoidal", "floater", "multiplicative",
    "complex-order", "complex-vanilla", "rotary", "xpos", "shaw", "xl", "t5", "alibi",
    "deberta", "tupe", "kerple", "fire", "cope", "randomized",
)  # fmt: skip
CONTEXT = dict(d_model=8, num_heads=2, vocab_size=11, max_len=16)


def test_every_name_is_registered_in_order():
    assert E.available_encodings() == NAMES


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [None, torch.float32, torch.complex128])
def test_create_by_name_with_full_context(name, dtype):
    """A model can pass all its context to every encoding; each takes what it accepts."""
    enc = create_encoding(name, dtype=dtype, **CONTEXT)
    assert isinstance(enc, PositionalEncoding)
    assert enc.name == name
    assert enc.complex_model == (dtype is None or dtype.is_complex)
    assert set(enc.acts_on) <= set(E.SITES)
    want = torch.complex64 if dtype is None else dtype
    assert enc.dtype == want and f"dtype={want}" in repr(enc)  # one public dtype, shown
    enc.reset_parameters()


BAD_SIZES = [
    (name, key, value)
    for name in NAMES
    for key, value in (("d_model", -2), ("d_model", 8.0), ("num_heads", 0))
    if key in inspect.signature(E.get_encoding_class(name).__init__).parameters
]


@pytest.mark.parametrize(("name", "key", "value"), BAD_SIZES)
def test_bad_context_sizes_are_errors_naming_the_encoding(name, key, value):
    """A size the encoding uses (d_model, num_heads) that is not a positive int is a ValueError
    naming the encoding class, never torch's error from creating a parameter."""
    cls = E.get_encoding_class(name)
    with pytest.raises(ValueError, match=f"{cls.__name__}: {key}"):
        create_encoding(name, **{**CONTEXT, key: value})


BAD_OPTIONS = [
    ("alibi", {"causal": "false"}, TypeError, "AlibiEncoding: causal must be True or False"),
    ("rotary", {"rotate_values": "no"}, ValueError, "option rotate_values must be true or false"),
    ("t5", {"std": float("nan")}, ValueError, "option std must be a finite number"),
    ("deberta", {"max_relative_positions": 2.5}, ValueError, "must be an integer, got 2.5"),
    ("shaw", {"max_relative_position": "4"}, ValueError, "must be an integer, got '4'"),
    ("floater", {"delta": "x"}, ValueError, "option delta must be a number, got 'x'"),
    ("hierarchical", {"alpha": "0.4"}, ValueError, "option alpha must be a number"),
    ("xpos", {"scale_base": True}, ValueError, "option scale_base must be a number, got True"),
    ("xpos", {"scale_base": math.nan}, ValueError, "scale_base must be a finite number or inf"),
    ("xpos", {"scale_base": -math.inf}, ValueError, "scale_base must be a finite number or inf"),
    ("xpos", {"gamma": math.inf}, ValueError, "option gamma must be a finite number, got inf"),
    ("rotary", {"base": math.inf}, ValueError, "option base must be a finite number, got inf"),
    ("xpos+t5", {"t5.std": math.inf}, ValueError, "option std must be a finite number, got inf"),
    ("rotary", {"max_len": -5}, ValueError, "RotaryEncoding: max_len must be a positive int"),
    ("multiplicative", {"max_len": 0}, ValueError, "max_len must be a positive int, got 0"),
    ("rotary", {"num_heads": True}, ValueError, "num_heads must be a positive int, got True"),
    ("complex-order+rotary", {"rotary.base": "x"}, ValueError, "option base must be a number"),
]


@pytest.mark.parametrize(("name", "options", "error", "match"), BAD_OPTIONS)
def test_bad_option_values_through_the_python_api_are_one_clear_error(name, options, error, match):
    """create_encoding checks each option against its default's kind (a flag, an integer, a
    finite number) and the model's context, as the command line does: a value that would be
    silently wrong (causal="false" read as True, std=nan) or fail deep in torch is refused."""
    ctx = {**CONTEXT, **options}
    with pytest.raises(error, match=re.escape(match)):
        create_encoding(name, **ctx)


def test_inf_where_the_class_documents_it():
    """xpos's ``scale_base=inf`` (no decay: rotary) through ``create_encoding``, alone and as a
    combination's member, as the class takes it; other number options stay finite (above)."""
    flat = create_encoding("xpos", scale_base=math.inf, dtype=torch.complex128, **CONTEXT)
    rotary = create_encoding("rotary", dtype=torch.complex128, **CONTEXT)
    q = torch.randn(2, 2, 5, 4, dtype=torch.complex128)
    for got, want in zip(flat.rotate(q, q, q), rotary.rotate(q, q, q), strict=True):
        torch.testing.assert_close(got, want)
    both = create_encoding("xpos+t5", **{"xpos.scale_base": math.inf}, **CONTEXT)
    assert [m.scale_base for m in both.members.values() if m.name == "xpos"] == [math.inf]
    assert E.PositionalEncoding.infinite_options == frozenset()


def test_create_by_class_and_instance():
    enc = create_encoding(RotaryEncoding, base=100.0, **CONTEXT)
    assert isinstance(enc, RotaryEncoding) and enc.base == 100.0
    assert create_encoding(enc, **CONTEXT) is enc
    with pytest.raises(ValueError, match="built with d_model=8, but the model has d_model=16"):
        create_encoding(enc, **{**CONTEXT, "d_model": 16})  # would fail later, in a shape
    assert isinstance(create_encoding(None), E.NoEncoding)


def test_unknown_name_lists_names():
    with pytest.raises(ValueError, match="unknown encoding 'rope'") as info:
        create_encoding("rope", **CONTEXT)
    for name in NAMES:
        assert name in str(info.value)


def test_unknown_option_lists_options():
    with pytest.raises(TypeError) as info:
        create_encoding("rotary", thetas=3, **CONTEXT)
    msg = str(info.value)
    assert "'rotary'" in msg and "'thetas'" in msg
    for opt in ("base", "rotate_values", "layout"):
        assert opt in msg
    assert "d_model" not in msg.split("options are:")[1]  # context is not a user option


def test_missing_context_is_named():
    with pytest.raises(TypeError, match="needs vocab_size"):
        create_encoding("complex-order", d_model=8)


def test_options_reach_the_encoding():
    enc = create_encoding("t5", num_buckets=16, bidirectional=False, **CONTEXT)
    assert enc.num_buckets == 16 and not enc.bidirectional
    enc = create_encoding("trainable", extrapolate="hierarchical", **CONTEXT)
    assert enc.max_len == 16 and enc.extrapolate == "hierarchical"


def test_register_custom_encoding():
    @register_encoding
    class Twice(PositionalEncoding):
        name = "test-twice"
        acts_on = frozenset({"input"})

        def encode_input(self, x):
            return 2 * x

    try:
        assert "test-twice" in E.available_encodings()
        assert isinstance(create_encoding("test-twice", **CONTEXT), Twice)
        with pytest.raises(ValueError, match="already taken"):

            @register_encoding
            class Other(PositionalEncoding):
                name = "test-twice"

    finally:
        E.registry._REGISTRY.pop("test-twice")


def test_check_sites_message():
    no_attention = {"token", "input"}
    with pytest.raises(ValueError) as info:
        check_sites(create_encoding("shaw", **CONTEXT), no_attention, "fasttext")
    msg = str(info.value)
    assert msg.startswith(
        "encoding 'shaw' acts on attention logits/values, but model 'fasttext' has no attention;"
    )
    usable = msg.split("encodings usable with fasttext: ")[1].split(", ")
    assert usable == [
        "none", "trainable", "hierarchical", "sinusoidal", "floater", "multiplicative",
        "complex-order", "complex-vanilla",
    ]  # fmt: skip
    check_sites("rotary", {"token", "input", "layer", "qk", "logits", "values"}, "transformer")
    check_sites("complex-order", no_attention, "fasttext")
    with pytest.raises(ValueError, match="acts on the word embedding, but model 'lstm' supports"):
        check_sites("complex-order", {"input"}, "lstm")
    # an instance's own sites count: DeBERTa with absolute layers needs the "layer" site
    deb = create_encoding("deberta", absolute_layers=1, **CONTEXT)
    check_sites("deberta", {"logits"}, "m")
    with pytest.raises(ValueError, match="inputs of Transformer layers"):
        check_sites(deb, {"logits"}, "m")


@pytest.mark.parametrize("name", ["rotary", "sinusoidal", "trainable", "multiplicative",
                                  "complex-order", "complex-order+rotary"])  # fmt: skip
def test_a_negative_cache_offset_is_one_clear_error(name):
    enc = create_encoding(name, **CONTEXT)
    x = torch.randn(1, 3, 8, dtype=torch.complex64)
    q = torch.randn(1, 2, 3, 4, dtype=torch.complex64)
    with pytest.raises(ValueError, match="offset is the number of tokens already in the cache"):
        if "token" in enc.acts_on:
            enc.embed(torch.zeros(1, 3, dtype=torch.long), offset=-2)
        elif "input" in enc.acts_on:
            enc.encode_input(x, offset=-2)
        else:
            enc.rotate(q, q, q, offset=-2)
    for offset in (np.int64(2), torch.tensor(2)):  # integers Python indexes with are taken
        if "token" in enc.acts_on:
            got = enc.embed(torch.zeros(1, 3, dtype=torch.long), offset=offset)
            want = enc.embed(torch.zeros(1, 3, dtype=torch.long), offset=2)
        elif "input" in enc.acts_on:
            got, want = enc.encode_input(x, offset=offset), enc.encode_input(x, offset=2)
        else:
            got, want = enc.rotate(q, q, q, offset=offset)[0], enc.rotate(q, q, q, offset=2)[0]
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", ["t5", "alibi", "shaw", "xl", "kerple", "fire", "cope", "tupe"])
def test_an_empty_sequence_gets_an_empty_bias(name):
    from cplxnet.nn import MultiheadAttention

    enc = create_encoding(name, **CONTEXT)
    x = torch.randn(2, 0, 8, dtype=torch.complex64)
    out, _ = MultiheadAttention(8, 2, batch_first=True)(x, x, x, encoding=enc)
    assert out.shape == (2, 0, 8)


@pytest.mark.parametrize(
    ("spec", "python"),
    [
        (
            "rotary:base=500:scaling=yarn",
            "create_encoding('rotary', **{'base': 500, 'scaling': 'yarn'})",
        ),
        (
            "complex-order+rotary:rotary.base=500",
            "create_encoding('complex-order+rotary', **{'rotary.base': 500})",
        ),
    ],
)
def test_a_command_line_spec_in_python_is_one_error_giving_the_keywords(spec, python):
    from cplxnet.models import build_model, make_config

    with pytest.raises(ValueError, match=re.escape(python)):
        create_encoding(spec, d_model=8, num_heads=2, vocab_size=10)
    with pytest.raises(ValueError, match="encoding_options="):
        build_model(make_config("decoder", vocab_size=10, d_model=8, num_heads=2, encoding=spec))
    with pytest.raises(ValueError, match="unknown encoding 'rotry:base=5'"):  # not a spec of ours
        create_encoding("rotry:base=5", d_model=8, num_heads=2)
