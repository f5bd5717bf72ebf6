"""Per-cell presets of a classification grid (``cplxnet compare --preset [DATA:]FAMILY[@FIELD]=P``):
which preset a cell gets, what its config and budget become, the errors, and a tiny run."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

import cplxnet.models as models
from cplxnet.cli import main
from cplxnet.compare import GridOptions
from cplxnet.compare.grid import (
    Cell,
    CompareError,
    cell_config,
    cell_preset,
    cell_train,
    parse_presets,
)
from cplxnet.compare.specs import parse_encodings

TABLE2 = [
    "cnn@real=kim-cnn",
    "trec:cnn@complex=trec-cnn-complex-order",
    "mr:cnn@complex=mr-cnn-complex-order",
    "trec:transformer=trec-transformer-complex-order",
    "mr:transformer=mr-transformer-complex-order",
]


def _options(items, real_width="same", **train) -> GridOptions:
    """The grid options of ``items`` (``same``: the widths ``table2-full`` ran with)."""
    return GridOptions(train=train, presets=parse_presets(items), real_width=real_width)


def _enc(name):
    return parse_encodings(name)[0]


def _strip(config):
    """The fields a preset sets (the data-size fields come from the data)."""
    d = dataclasses.asdict(config)
    return {k: v for k, v in d.items() if k not in ("vocab_size", "num_classes", "max_len")}


def test_table2_presets_give_each_cell_its_preset_config():
    options = _options(TABLE2)
    # the real CNN columns are Kim's CNN exactly (its own config, encoding none)
    kim = cell_config("cnn", _enc("none"), "real", options, data="trec")
    assert kim == models.preset_config("kim-cnn")
    assert kim.word_init == "uniform" and kim.head_max_norm == 3.0 and not kim.complex
    # another encoding replaces the preset's; the rest is the preset's
    sin = cell_config("cnn", _enc("sinusoidal"), "real", options, data="mr")
    assert _strip(sin) == _strip(models.preset_config("kim-cnn", encoding="sinusoidal"))
    # complex CNN columns: the data's own complex-order preset
    for data in ("trec", "mr"):
        co = cell_config("cnn", _enc("complex-order"), "complex", options, data=data)
        assert co == models.preset_config(f"{data}-cnn-complex-order")
    van = cell_config("cnn", _enc("complex-vanilla"), "complex", options, data="mr")
    assert van.embedding_dropout == 0.5 and van.word_dropout == 0.2
    assert van.encoding == "complex-vanilla" and van.encoding_options == {}
    # the Transformer: the preset's encoding options only with its own encoding
    co = cell_config("transformer", _enc("complex-order"), "complex", options, data="mr")
    assert co == models.preset_config("mr-transformer-complex-order")
    assert co.encoding_options == {"frequency": "shared"}
    given = cell_config(
        "transformer", _enc("complex-order:phase=false"), "complex", options, data="mr"
    )
    assert given.encoding_options == {"frequency": "shared", "phase": False}
    real = cell_config("transformer", _enc("trainable"), "real", options, data="mr")
    assert real.encoding_options == {} and not real.complex
    twin = models.real_twin(models.preset_config("mr-transformer-complex-order"), match="width")
    assert _strip(real) == {**_strip(twin), "encoding": "trainable", "encoding_options": {}}
    trec = cell_config("transformer", _enc("none"), "real", options, data="trec")
    assert trec.score == "modulus" and trec.embedding_dropout == 0.3
    # no preset for a dataset: the zoo's defaults
    plain = cell_config("transformer", _enc("none"), "real", options, data="synthetic")
    assert plain == cell_config("transformer", _enc("none"), "real", _options([]), data="x")


def test_a_real_preset_keeps_its_widths_at_every_real_width():
    """Kim's CNN in the real column is Kim's CNN whatever ``--real-width``; a complex preset's
    real column is its twin at that width (the default: equal FLOPs, x2)."""
    assert GridOptions().real_width == "flops"
    for width in ("flops", "params", "same"):
        options = _options(TABLE2, real_width=width)
        kim = cell_config("cnn", _enc("none"), "real", options, data="trec")
        assert kim == models.preset_config("kim-cnn"), width
    options = _options(TABLE2, real_width="flops")
    real = cell_config("transformer", _enc("trainable"), "real", options, data="mr")
    complex_ = models.preset_config("mr-transformer-complex-order")
    assert (real.d_model, real.dim_feedforward) == (2 * complex_.d_model,
                                                    2 * complex_.dim_feedforward)  # fmt: skip


def test_the_most_specific_preset_wins_data_before_field():
    options = _options(
        [
            "cnn=default",
            "cnn@real=paper-cnn",
            "trec:cnn=trec-cnn-complex-order",
            "mr:cnn@real=kim-cnn",
        ]
    )
    pick = {
        (d, n): cell_preset(d, "cnn", n, options)["preset"]
        for d in ("trec", "mr", "synthetic")
        for n in ("real", "complex")
    }
    assert pick == {
        ("trec", "real"): "trec-cnn-complex-order",
        ("trec", "complex"): "trec-cnn-complex-order",
        ("mr", "real"): "kim-cnn",
        ("mr", "complex"): "default",
        ("synthetic", "real"): "paper-cnn",
        ("synthetic", "complex"): "default",
    }
    assert cell_preset("trec", "transformer", "real", options) is None


def test_a_cell_trains_with_its_presets_budget_and_flags_over_it():
    options = _options(TABLE2, epochs=3)
    cell = Cell("trec", None, "cnn", _enc("none"), "real", 0)
    assert cell_train(cell, options) == {"batch_size": 50, "epochs": 3, "patience": 4}
    cell = Cell("mr", None, "transformer", _enc("complex-order"), "complex", 0)
    assert (
        cell_train(cell, _options(TABLE2)) == models.PRESET_TRAINING["mr-transformer-complex-order"]
    )
    assert cell_train(Cell("trec", None, "lstm", _enc("none"), "real", 0), options) == {"epochs": 3}


def test_grid_options_store_the_presets_values_and_only_when_given():
    stored = _options(["cnn@real=kim-cnn"]).to_dict()["presets"]
    assert stored == {
        "*:cnn@real": {
            "preset": "kim-cnn",
            "model": json.loads(
                json.dumps({k: v for k, v in models.PRESETS["kim-cnn"].items() if k != "family"})
            ),
            "train": models.PRESET_TRAINING["kim-cnn"],
        }
    }
    assert "presets" not in GridOptions().to_dict()
    again = GridOptions.from_dict(_options(TABLE2).to_dict())
    assert again.presets == parse_presets(TABLE2)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("cnn", "use --preset [DATA:]FAMILY[@real|@complex]=PRESET"),
        ("cnn=", "use --preset [DATA:]FAMILY[@real|@complex]=PRESET"),
        ("cnn=kim", "unknown preset 'kim'; cnn presets are default, paper-cnn, kim-cnn"),
        ("cnn=mr-transformer-complex-order", "is a transformer preset, not cnn; cnn presets"),
        ("cnnn=kim-cnn", "unknown family 'cnnn'; use one of fasttext, cnn, lstm, transformer"),
        ("decoder=lm-char", "unknown family 'decoder'"),
        ("trce:cnn=kim-cnn", "unknown data 'trce'; use mr, trec, synthetic or a data file"),
        ("cnn@rea=kim-cnn", "unknown number field 'rea'; use @real or @complex"),
    ],
)
def test_a_bad_preset_is_one_error_line(tmp_path, capsys, spec, message):
    out = tmp_path / "out"
    argv = ["compare", "--data", "trec", "--families", "cnn", "--out", str(out)]
    assert main([*argv, "--preset", spec, "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cplxnet: error: --preset {spec}: ") and err.count("\n") == 1
    assert message in err
    assert not out.exists()


def test_other_preset_misuse(tmp_path, capsys):
    with pytest.raises(CompareError, match="cnn@real is given twice"):
        parse_presets(["cnn@real=kim-cnn", "*:cnn@real=default"])
    argv = ["compare", "--data", "trec", "--families", "cnn", "--dry-run"]
    assert main([*argv, "--preset", "cnn=kim-cnn", "--extrapolate"]) == 1
    assert "--preset applies to the classification grid" in capsys.readouterr().err
    assert main(["compare", "--task", "lm", "--preset", "cnn=kim-cnn", "--dry-run"]) == 1
    assert "--task lm takes one decoder preset" in capsys.readouterr().err
    assert main([*argv, "--preset", "mr:cnn=kim-cnn", "--preset", "lstm=paper-lstm"]) == 0
    printed = capsys.readouterr().out
    assert "note: --preset mr:cnn=kim-cnn matches no cell" in printed
    assert "note: --preset lstm=paper-lstm matches no cell" in printed


def test_dry_run_names_each_cells_preset(capsys):
    argv = ["compare", "--data", "trec,mr", "--families", "cnn,transformer", "--seeds", "1"]
    assert main([*argv, *[a for p in TABLE2 for a in ("--preset", p)], "--dry-run"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines() if "\t" in line]
    got = {(c[1].split()[0], c[1].split()[1], c[1].split()[2]): c[2] for c in lines}
    assert len(lines) == 20
    for data in ("trec", "mr"):
        for enc in ("none", "trainable", "sinusoidal"):
            assert got[(data, "cnn", enc)] == "preset kim-cnn"
            assert got[(data, "transformer", enc)] == f"preset {data}-transformer-complex-order"
        for enc in ("complex-vanilla", "complex-order"):
            assert got[(data, "cnn", enc)] == f"preset {data}-cnn-complex-order"
            assert got[(data, "transformer", enc)] == f"preset {data}-transformer-complex-order"


def test_a_tiny_grid_runs_each_cell_with_its_preset_and_refuses_a_changed_one(
    tmp_path, capsys, monkeypatch
):
    out = str(tmp_path / "out")
    argv = [
        "compare", "--data", "trec", "--families", "cnn", "--encodings", "none,complex-order",
        "--seeds", "1", "--limit", "30", "--max-steps", "2", "--epochs", "1", "--threads", "1",
        "--set", "d_model=8", "--set", "cnn.num_filters=4", "--keep-runs", "--no-report",
        "--preset", "cnn@real=kim-cnn", "--preset", "trec:cnn@complex=trec-cnn-complex-order",
        "--out", out,
    ]  # fmt: skip
    assert main(argv) == 0
    assert "grid: 2 cells, 0 already done; 2 to run" in capsys.readouterr().out
    runs = {}
    for name in os.listdir(os.path.join(out, "runs")):
        with open(os.path.join(out, "runs", name, "config.json"), encoding="utf-8") as fh:
            runs[name] = json.load(fh)
    kim = runs["trec-test-cnn-none-real-s0"]
    assert kim["train"]["batch_size"] == 50 and kim["train"]["patience"] == 4
    assert kim["train"]["epochs"] == 1 and kim["train"]["max_steps"] == 2
    assert kim["model"]["word_init"] == "uniform" and kim["model"]["head_max_norm"] == 3.0
    assert kim["model"]["d_model"] == 8 and kim["model"]["num_filters"] == 4  # --set over it
    assert kim["model"]["complex"] is False
    co = runs["trec-test-cnn-complex-order-complex-s0"]
    assert co["train"]["batch_size"] == 50 and co["train"]["patience"] == 4  # engine's batch
    trec_cnn = models.preset_config("trec-cnn-complex-order")
    for name in ("embedding_dropout", "word_init", "word_init_scale", "dropout"):
        assert co["model"][name] == getattr(trec_cnn, name)
    with open(os.path.join(out, "results.json"), encoding="utf-8") as fh:
        rows = json.load(fh)["rows"]
    assert {r["cell_id"]: r["preset"] for r in rows} == {
        "trec-test-cnn-none-real-s0": "kim-cnn",
        "trec-test-cnn-complex-order-complex-s0": "trec-cnn-complex-order",
    }
    with open(os.path.join(out, "grid.json"), encoding="utf-8") as fh:
        assert json.load(fh)["options"]["presets"]["*:cnn@real"]["preset"] == "kim-cnn"
    assert main(argv) == 0
    assert "2 already done; 0 to run" in capsys.readouterr().out
    # another dataset with its own preset joins the grid; grid.json lists every preset
    more = [*argv, "--data", "trec,mr", "--preset", "mr:cnn@complex=mr-cnn-complex-order"]
    assert main(more) == 0
    assert "grid: 4 cells, 2 already done; 2 to run" in capsys.readouterr().out
    with open(os.path.join(out, "grid.json"), encoding="utf-8") as fh:
        stored = json.load(fh)["options"]["presets"]
    assert sorted(stored) == ["*:cnn@real", "mr:cnn@complex", "trec:cnn@complex"]
    with open(os.path.join(out, "cells", "mr-quick-cnn-complex-order-complex-s0.json")) as fh:
        assert json.load(fh)["preset_values"] == stored["mr:cnn@complex"]
    # a preset retuned since, or another preset for a finished cell: not reused
    monkeypatch.setitem(models.PRESETS, "kim-cnn", {**models.PRESETS["kim-cnn"], "dropout": 0.4})
    assert main(more) == 1
    err = capsys.readouterr().err
    assert err == (
        f"cplxnet: error: {out} holds trec cnn none real seed 0 trained with preset kim-cnn of "
        "other values, now preset kim-cnn: use the presets of that grid or another --out\n"
    )
    monkeypatch.undo()
    assert main([*more, "--preset", "trec:cnn@real=paper-cnn"]) == 1
    assert "trained with preset kim-cnn, now preset paper-cnn" in capsys.readouterr().err
    bare = [a for i, a in enumerate(more) if "--preset" not in (a, more[i - 1])]
    assert main(bare) == 1
    assert "trained with preset kim-cnn, now no preset" in capsys.readouterr().err
    with open(os.path.join(out, "grid.json"), encoding="utf-8") as fh:
        assert json.load(fh)["options"]["presets"] == stored  # a refused run changes nothing
