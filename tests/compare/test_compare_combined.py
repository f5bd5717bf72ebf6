"""``cplxnet compare`` with combined encodings (``complex-order+rotary``) and the shared ``--set``
parser."""

from __future__ import annotations

import csv
import os

import pytest

from cplxnet.cli import main
from cplxnet.compare.grid import CompareError
from cplxnet.compare.grid import parse_sets as grid_parse_sets
from cplxnet.compare.specs import (
    EncodingSpec,
    is_complex_name,
    numbers_for,
    parse_encoding,
    parse_encodings,
    parse_sets,
)


def test_combined_spec_parses_with_member_options():
    spec = parse_encoding("complex-order+rotary:rotary.base=500:complex-order.phase=false")
    assert spec.name == "complex-order+rotary"
    assert spec.options == {"rotary.base": 500, "complex-order.phase": False}
    assert spec.canonical == "complex-order+rotary:complex-order.phase=false:rotary.base=500"
    assert spec.slug == "complex-order_rotary_complex-order.phase-false_rotary.base-500"
    two = parse_encodings("complex-order+rotary:rotary.base=500,complex-order.phase=false,t5")
    assert [s.name for s in two] == ["complex-order+rotary", "t5"]
    assert EncodingSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match=r"unknown encoding 'rotry' in 'complex-order\+rotry'"):
        parse_encoding("complex-order+rotry")


def test_a_combination_with_a_complex_member_runs_complex_by_default():
    for name in ("complex-order+rotary", "rotary+complex-order", "t5+complex-vanilla"):
        assert is_complex_name(name)
        assert numbers_for(parse_encoding(name), ("natural",)) == ["complex"]
    assert numbers_for(parse_encoding("rotary+t5"), ("natural",)) == ["real"]
    # model-variant slugs keep their form
    assert parse_encoding("complex-order-real-proj").slug == "complex-order--model-projection-real"


def test_one_set_parser_with_the_callers_reserved_keys():
    assert parse_sets(["transformer.num_layers=2", "d_model=16", "kernel_sizes=3,4"]) == {
        "transformer": {"num_layers": 2},
        "*": {"d_model": 16, "kernel_sizes": [3, 4]},
    }
    with pytest.raises(ValueError, match="expected key=value"):
        parse_sets(["d_model"])
    with pytest.raises(ValueError, match="--set family: use --model"):
        parse_sets(["family=cnn"], {"family": "use --model"})
    with pytest.raises(CompareError, match="the grid chooses encoding"):
        grid_parse_sets(["encoding=t5"])


def test_compare_runs_a_combined_encoding(tmp_path, capsys):
    out = str(tmp_path / "out")
    args = [
        "compare", "--data", "synthetic", "--families", "transformer", "--seeds", "1",
        "--epochs", "1", "--set", "d_model=8", "--set", "transformer.num_heads=2",
        "--set", "transformer.dim_feedforward=8", "--synthetic-size", "24",
        "--synthetic-vocab", "5", "--train-len", "6", "--threads", "1",
        "--encodings", "complex-order+rotary:rotary.base=500", "--out", out,
    ]  # fmt: skip
    assert main([*args, "--dry-run"]) == 0
    assert "1 cells" in capsys.readouterr().out
    assert main(args) == 0
    with open(os.path.join(out, "results.csv"), encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["encoding"], r["number"], r["status"]) for r in rows] == [
        ("complex-order+rotary:rotary.base=500", "complex", "ok")
    ]
    bad = [*args[:-4], "--encodings", "complex-order+rotary:base=500", "--out", out + "2"]
    assert main(bad) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "option 'base' must name its member" in err


def test_member_option_types_are_checked(options):
    from cplxnet.compare.grid import check_combination

    spec = parse_encoding("complex-order+rotary:rotary.rotate_values=3")
    with pytest.raises(CompareError, match="option rotary.rotate_values must be true or false"):
        check_combination("transformer", spec, "complex", options)
    ok = parse_encoding("complex-order+rotary:rotary.base=500")
    assert check_combination("transformer", ok, "complex", options) is None
