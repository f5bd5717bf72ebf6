"""Option values are checked where they are parsed, naming the option: encoding options
(``rotary:base=-5``, ``=0``, ``=nan``, ``=abc``, a repeated option), ``--set`` fields
(``num_filters=abc``, ``kernel_sizes=3,x``), in ``train``, ``train --task lm`` and ``compare``;
suggestions name only options that exist, and a mistyped encoding name gets the closest one."""

from __future__ import annotations

import math

import pytest

from cplxnet.cli import main
from cplxnet.encodings import create_encoding
from cplxnet.encodings.registry import parse_value
from cplxnet.encodings.specs import check_option_values, parse_encodings


def one_error(capsys, argv) -> str:
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    err = capsys.readouterr().err
    assert status in (1, 2) and err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


CASES = [
    ("rotary:base=-5", "base must be a finite number > 0, got -5"),
    ("rotary:base=0", "base must be a finite number > 0, got 0"),
    ("rotary:base=nan", "option base must be a finite number, got nan"),
    ("rotary:base=NaN", "option base must be a finite number"),
    ("rotary:base=abc", "option base must be a number, got 'abc'"),
    ("sinusoidal:base=-1", "base must be a finite number > 0"),
    ("rotary:base=500:base=600", "option base is given twice (500 and 600)"),
    ("complex-order+rotary:alibi.slopes=2", "no member has 'slopes'"),
]


@pytest.mark.parametrize(("spec", "match"), CASES)
def test_encoding_option_values_in_train(tmp_path, capsys, spec, match):
    argv = ["train", "--model", "transformer", "--encoding", spec, "--run-dir", str(tmp_path / "r")]
    err = one_error(capsys, argv)
    assert match in err and "rotary.slopes" not in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("spec", "match"), CASES[:6])
def test_encoding_option_values_in_train_lm_and_compare(tmp_path, capsys, spec, match):
    assert match in one_error(
        capsys, ["train", "--task", "lm", "--encoding", spec, "--run-dir", str(tmp_path / "r")]
    )
    assert match in one_error(
        capsys, ["compare", "--families", "transformer", "--encodings", spec, "--dry-run"]
    )
    assert match in one_error(capsys, ["compare", "--task", "lm", "--encodings", spec, "--dry-run"])


def test_inf_only_where_the_encoding_takes_it(capsys):
    """``xpos:scale_base=inf`` (rotary, the limit xpos documents) is a valid spec, alone and as
    a member; ``inf`` for another number option is one clear error."""
    for spec in ("xpos:scale_base=inf", "xpos+t5:xpos.scale_base=Infinity"):
        assert main(["compare", "--task", "lm", "--encodings", spec, "--dry-run"]) == 0
    capsys.readouterr()
    for spec, name in (("rotary:base=inf", "base"), ("xpos+t5:t5.std=inf", "t5.std")):
        err = one_error(capsys, ["compare", "--task", "lm", "--encodings", spec, "--dry-run"])
        assert f"option {name} must be a finite number, got inf" in err


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("num_filters=abc", "--set num_filters=abc: expected an integer"),
        ("num_filters=2.5", "--set num_filters=2.5: expected an integer"),
        ("kernel_sizes=3,x", "--set kernel_sizes=3,x: expected integers like 3,4,5"),
        ("kernel_sizes=3,4.5", "expected integers"),
        ("dropout=nan", "--set dropout=nan: expected a finite number"),
        ("dropout=NaN", "--set dropout=nan: expected a finite number"),
    ],
)
def test_set_values(tmp_path, capsys, item, match):
    argv = ["train", "--model", "cnn", "--set", item, "--run-dir", str(tmp_path / "r")]
    assert match in one_error(capsys, argv)
    argv = ["compare", "--families", "cnn", "--encodings", "none", "--set", item, "--dry-run"]
    assert match in one_error(capsys, argv)


def test_lm_set_values(tmp_path, capsys):
    err = one_error(capsys, ["train", "--task", "lm", "--set", "num_layers=x", "--run-dir",
                             str(tmp_path / "r")])  # fmt: skip
    assert "--set num_layers=x: expected an integer" in err
    err = one_error(capsys, ["compare", "--task", "lm", "--set", "num_layers=x", "--dry-run"])
    assert "--set num_layers=x: expected an integer" in err


def test_suggestions_name_only_options_that_exist():
    with pytest.raises(TypeError) as info:
        create_encoding("complex-order+rotary", d_model=8, num_heads=2, vocab_size=5,
                        **{"alibi.slopes": 2})  # fmt: skip
    assert "rotary.slopes" not in str(info.value) and "complex-order.slopes" not in str(info.value)
    with pytest.raises(TypeError, match="did you mean complex-order.base or rotary.base"):
        create_encoding("complex-order+rotary", d_model=8, num_heads=2, vocab_size=5, bse=1)
    with pytest.raises(TypeError, match="write complex-order.base=... or rotary.base=..."):
        create_encoding("complex-order+rotary", d_model=8, num_heads=2, vocab_size=5, base=2)


@pytest.mark.parametrize(
    ("name", "closest"),
    [("rotry", "rotary"), ("complex-ordr", "complex-order"), ("alibl", "alibi")],
)
def test_create_encoding_suggests_the_closest_name(name, closest):
    with pytest.raises(ValueError, match=f"did you mean '{closest}'"):
        create_encoding(name, d_model=8, num_heads=2)
    with pytest.raises(ValueError, match=f"did you mean '{closest}'"):
        create_encoding(f"none+{name}", d_model=8, num_heads=2)
    with pytest.raises(TypeError, match="did you mean 'base'"):
        create_encoding("rotary", d_model=8, num_heads=2, bse=3)


@pytest.mark.parametrize(
    ("text", "value"),
    [("inf", math.inf), ("INF", math.inf), (" Infinity ", math.inf), ("+inf", math.inf),
     ("-inf", -math.inf), ("-Infinity", -math.inf)],
)  # fmt: skip
def test_every_spelling_of_inf_is_a_number(text, value):
    assert parse_value(text) == value
    assert math.isnan(parse_value("nan")) and math.isnan(parse_value("NaN"))


@pytest.mark.parametrize("text", ["xpos:scale_base=INF", "xpos:scale_base=infinity"])
def test_xpos_spec_takes_inf_in_any_case(text):
    spec = parse_encodings(text)[0]
    assert spec.options == {"scale_base": math.inf}
    check_option_values(spec)  # no error
    with pytest.raises(ValueError, match="scale_base must be a finite number or inf, got -inf"):
        check_option_values(parse_encodings("xpos:scale_base=-inf")[0])
