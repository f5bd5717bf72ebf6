"""Encoding specs, the Complex Order ablation variants, number fields."""

from __future__ import annotations

import pytest

from cplxnet.compare import (
    MODEL_VARIANTS,
    VARIANTS,
    EncodingSpec,
    parse_encoding,
    parse_encodings,
    parse_numbers,
)
from cplxnet.compare.specs import numbers_for


def test_plain_name_and_options():
    spec = parse_encoding("complex-order:phase=false:frequency=shared:base=500")
    assert spec.name == "complex-order"
    assert spec.options == {"phase": False, "frequency": "shared", "base": 500}
    assert spec.canonical == "complex-order:base=500:frequency=shared:phase=false"
    assert spec.is_complex
    assert "/" not in spec.slug and ":" not in spec.slug


def test_variants_resolve_to_complex_order_options():
    for name, (base, opts, _) in VARIANTS.items():
        spec = parse_encoding(name)
        assert (spec.label, spec.name, spec.options) == (name, base, opts)
    assert parse_encoding("complex-order-no-phase").options == {"phase": False}


def test_list_with_continued_options_and_table4():
    specs = parse_encodings("complex-order:phase=false,frequency=shared,sinusoidal")
    assert [s.label for s in specs] == ["complex-order:phase=false:frequency=shared", "sinusoidal"]
    assert specs[0].options == {"phase": False, "frequency": "shared"}
    table4 = parse_encodings("table4")
    assert [s.label for s in table4] == ["complex-order", *VARIANTS, *MODEL_VARIANTS]
    assert [s.label for s in parse_encodings("none,none,trainable")] == ["none", "trainable"]


@pytest.mark.parametrize(
    "text, match",
    [
        ("nope", "unknown encoding 'nope'"),
        ("complex-order:phase", "not key=value"),
        ("phase=false,none", "before any encoding"),
        ("", "no encodings"),
    ],
)
def test_bad_specs(text, match):
    with pytest.raises(ValueError, match=match):
        parse_encodings(text)


def test_one_number_written_two_ways_names_one_encoding():
    """An integral float is written as the int in the canonical form and the cell id (500.0, 5e2
    and 500 build one encoding); other floats keep their JSON form."""
    ids = {parse_encoding(f"rotary:base={v}").canonical for v in ("500", "500.0", "5e2")}
    assert ids == {"rotary:base=500"}
    assert parse_encoding("rotary:base=500.0").slug == parse_encoding("rotary:base=500").slug
    assert parse_encoding("rotary:base=500.5").canonical == "rotary:base=500.5"
    assert parse_encoding("rotary:base=1e20").canonical == "rotary:base=1e+20"
    trained = parse_encoding("rotary-yarn:base=500.0").trained
    assert trained.canonical == parse_encoding("rotary:base=500").canonical


def test_numbers():
    co, sin = parse_encoding("complex-order"), parse_encoding("sinusoidal")
    natural = parse_numbers("natural")
    assert numbers_for(co, natural) == ["complex"] and numbers_for(sin, natural) == ["real"]
    both = parse_numbers("both")
    assert numbers_for(co, both) == ["complex", "real"] == numbers_for(sin, both)
    assert numbers_for(sin, parse_numbers("real,complex")) == ["complex", "real"]
    assert numbers_for(co, parse_numbers("real")) == ["real"]
    with pytest.raises(ValueError, match="unknown number"):
        parse_numbers("quaternion")
    with pytest.raises(ValueError, match="cannot be combined"):
        parse_numbers("natural,real")


def test_model_variant_sets_model_fields_and_has_its_own_cell_id():
    """complex-order-real-proj: the complex-order encoding with the model field projection="real"
    (the paper's Table 4 shared projections); its canonical form and slug differ from the plain
    encoding's, plain specs serialise exactly as before, and dicts round trip."""
    spec = parse_encoding("complex-order-real-proj")
    assert (spec.name, spec.options, spec.model) == ("complex-order", {}, {"projection": "real"})
    assert spec.canonical == "complex-order+projection=real" and spec.is_complex
    plain = parse_encoding("complex-order")
    assert spec.slug != plain.slug and "model" not in plain.to_dict()
    assert EncodingSpec.from_dict(spec.to_dict()) == spec
    assert EncodingSpec.from_dict({"label": "x", "name": "none"}).model == {}
    with_opt = parse_encoding("complex-order-real-proj:phase=false")
    assert with_opt.options == {"phase": False} and with_opt.model == {"projection": "real"}
    with pytest.raises(ValueError, match="complex-order-real-proj"):
        parse_encoding("nope")


@pytest.mark.parametrize("text", ["trainable:max_len=2", "complex-order+rotary:rotary.max_len=2",
                                  "rotary:d_model=4"])  # fmt: skip
def test_an_option_the_model_passes_itself_is_refused_by_name(text):
    from cplxnet.encodings.specs import check_option_values, parse_encoding

    spec = parse_encoding(text)
    key = text.split(":", 1)[1].split("=")[0]
    with pytest.raises(ValueError, match=f"{key} is not an encoding option: the model passes"):
        check_option_values(spec)
