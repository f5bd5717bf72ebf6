"""``cplxnet inspect RUN``: the plots (valid PNG files) and inspect.md of a tiny classifier run
and a tiny language-model run, the measurements behind them, and an output folder that is never
one inspect did not write."""

from __future__ import annotations

import os

import pytest
import test_train_zoo as toy
import torch

from cplxnet.cli import main
from cplxnet.encodings import create_encoding
from cplxnet.inspect import MARKER, _mean_by_distance, attention_by_distance, bias_by_distance
from cplxnet.models import build_model, make_config

PNG = b"\x89PNG\r\n\x1a\n"


def check_png(path):
    from PIL import Image

    with open(path, "rb") as fh:
        assert fh.read(8) == PNG
    with Image.open(path) as im:
        im.verify()
        assert im.size[0] > 100 and im.size[1] > 100


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    text = tmp_path_factory.mktemp("insp") / "text.txt"
    text.write_text("a rose is a rose is a rose\n" * 80, encoding="utf-8")
    run = str(tmp_path_factory.mktemp("insp-lm") / "run")
    assert main(["train", "--task", "lm", "--data", str(text), "--context", "8", "--encoding",
                 "complex-order+alibi", "--d-model", "8", "--steps", "3", "--eval-every", "3",
                 "--batch-size", "4", "--quiet", "--run-dir", run]) == 0  # fmt: skip
    return run


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    data = toy.write_toy_tsv(tmp_path_factory.mktemp("insp-c") / "toy.tsv", n=60)
    run = str(tmp_path_factory.mktemp("insp-cls") / "run")
    assert main(["train", "--data", data, "--model", "transformer", "--encoding",
                 "complex-order+t5", "--d-model", "8", "--set", "num_heads=2", "--set",
                 "dim_feedforward=16", "--max-len", "12", "--epochs", "1", "--quiet",
                 "--run-dir", run]) == 0  # fmt: skip
    return run


@pytest.mark.slow
def test_language_model_run(lm_run, capsys):
    assert main(["inspect", lm_run]) == 0
    out = os.path.join(lm_run, "inspect")
    assert f"wrote {os.path.join(out, 'inspect.md')}" in capsys.readouterr().out
    names = {"complex_order.png", "attention_L.png", "attention_4L.png", "bias_L.png",
             "bias_4L.png"}  # fmt: skip
    assert names | {"inspect.md", MARKER} == set(os.listdir(out))
    for name in names:
        check_png(os.path.join(out, name))
    with open(os.path.join(out, "inspect.md"), encoding="utf-8") as fh:
        md = fh.read()
    assert all(f"({name})" in md for name in names)
    assert "2π/L = 0.7854" in md and "L = 8" in md and "4L = 32" in md
    assert main(["inspect", lm_run]) == 0  # its own folder is rewritten


def test_classifier_run(classifier_run, tmp_path):
    out = str(tmp_path / "figures")
    assert main(["inspect", classifier_run, "--out", out, "--samples", "3"]) == 0
    names = {"complex_order.png", "attention_L.png", "bias_L.png"}
    assert names | {"inspect.md", MARKER} == set(os.listdir(out))
    for name in names:
        check_png(os.path.join(out, name))
    with open(os.path.join(out, "inspect.md"), encoding="utf-8") as fh:
        md = fh.read()
    assert "classifier" in md and all(f"({name})" in md for name in names)
    assert "on 3 random token sequences" in md


def test_a_folder_inspect_did_not_write_is_refused(lm_run, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    assert main(["inspect", lm_run, "--out", str(mine)]) == 1
    err = capsys.readouterr().err
    assert "notes.txt" in err and err.count("\n") == 1
    assert os.listdir(mine) == ["notes.txt"]
    assert main(["inspect", lm_run, "--out", lm_run]) == 1  # the run folder itself
    assert "config.json" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "nothing")]) == 1
    assert "not found" in capsys.readouterr().err


def test_mean_by_distance_is_the_mean_over_each_diagonal():
    v = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    got = _mean_by_distance(v)
    for d in range(-4, 5):
        ref = torch.stack([v[:, :, i, i - d] for i in range(5) if 0 <= i - d < 5], -1)
        assert torch.allclose(got[:, d + 4], ref.mean((0, -1)))


def test_attention_and_bias_measurements():
    config = make_config("decoder", encoding="alibi", d_model=8, num_heads=2, dim_feedforward=16,
                         num_layers=2, vocab_size=9, max_len=8)  # fmt: skip
    model = build_model(config, dtype=torch.float64).eval()
    ids = torch.randint(2, 9, (3, 6))
    curves = attention_by_distance(model, ids)
    assert len(curves) == 2 and curves[0].shape == (2, 11)
    # causal: no weight on keys after the query; each query's weights sum to 1
    assert torch.all(curves[0][:, :5] == 0)
    counts = torch.tensor([6 - d for d in range(6)], dtype=torch.float64)
    total = (curves[1][:, 5:] * counts).sum(1)  # summed over the 6 queries
    assert torch.allclose(total, torch.full((2,), 6.0, dtype=torch.float64))
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    bias = bias_by_distance(model, 6)
    slopes = create_encoding("alibi", d_model=8, num_heads=2, causal=True).slopes.double()
    assert torch.allclose(bias[:, 5:], -slopes[:, None] * torch.arange(6.0))
    rotary = build_model(make_config("decoder", encoding="rotary", d_model=8, num_heads=2,
                                     dim_feedforward=16, vocab_size=9, max_len=8))  # fmt: skip
    assert bias_by_distance(rotary, 6) is None
