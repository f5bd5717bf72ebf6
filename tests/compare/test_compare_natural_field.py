"""``cplxnet compare`` reads an encoding's natural number field from its class (``field``), not
from its name: a user-registered complex encoding with any name runs and is reported as complex,
and a real one named ``complex-...`` as real."""

from __future__ import annotations

import pytest

import cplxnet.encodings as E
from cplxnet.compare.report.statistics import Summary, best_baseline
from cplxnet.compare.specs import numbers_for, parse_encoding
from cplxnet.encodings import PositionalEncoding, register_encoding


@pytest.fixture
def user_encodings():
    @register_encoding
    class Phase(PositionalEncoding):
        name = "test-phase-words"
        field = "complex"
        acts_on = frozenset({"input"})

    @register_encoding
    class Lookalike(PositionalEncoding):
        name = "complex-lookalike"
        acts_on = frozenset({"input"})

    yield Phase, Lookalike
    for cls in (Phase, Lookalike):
        E.registry._REGISTRY.pop(cls.name)


def test_fields_of_the_builtin_encodings():
    fields = {n: E.get_encoding_class(n).field for n in E.available_encodings()}
    assert {n for n, f in fields.items() if f == "complex"} == {"complex-order", "complex-vanilla"}
    assert set(fields.values()) <= set(E.FIELDS)


def test_natural_field_is_the_class_attribute(user_encodings):
    assert parse_encoding("test-phase-words").is_complex
    assert numbers_for(parse_encoding("test-phase-words"), ("natural",)) == ["complex"]
    assert not parse_encoding("complex-lookalike").is_complex
    assert numbers_for(parse_encoding("complex-lookalike"), ("natural",)) == ["real"]
    assert parse_encoding("complex-order:phase=false").is_complex
    assert parse_encoding("none+test-phase-words").is_complex  # a combination: any member


def test_report_baseline_is_the_best_real_field_column(user_encodings):
    """The best real baseline is the best column run in the real field, whatever the encoding's
    name: the user's complex encoding in its natural (complex) field is not one; the real
    encoding named complex-... is."""
    groups = {
        ("mr", "cnn", "test-phase-words", "complex"): Summary({(0, 0): 0.9}),
        ("mr", "cnn", "complex-lookalike", "real"): Summary({(0, 0): 0.8}),
        ("mr", "cnn", "none", "real"): Summary({(0, 0): 0.7}),
    }
    columns = [k[2:] for k in groups]
    assert best_baseline(groups, "mr", "cnn", columns) == ("complex-lookalike", "real")


def test_register_rejects_an_unknown_field():
    class Bad(PositionalEncoding):
        name = "test-bad-field"
        field = "quaternion"

    with pytest.raises(ValueError, match="field must be one of"):
        register_encoding(Bad)
