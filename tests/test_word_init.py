"""Initialisation of the tables of word vectors (``init="normal"|"uniform"`` with a scale) and the
max-norm constraint on the classifier head (Kim's CNN-rand, the ``kim-cnn`` preset)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import test_train_zoo as toy
import torch

import cplxnet.models as zoo
import cplxnet.nn as cnn
from cplxnet.cli import main
from cplxnet.data.batching import EncodedSplit
from cplxnet.encodings import create_encoding
from cplxnet.init import word_init_
from cplxnet.models.common import RealEmbedding
from cplxnet.tasks.classify.task import train_step

V, D = 4000, 64  # a large table: sample moments within a few per cent


def _moments(parts: torch.Tensor) -> tuple[float, float, float]:
    parts = parts.double()
    return float(parts.abs().max()), float(parts.mean()), float(parts.var())


# -- the distribution --------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [None, 0.1, 1.0])
def test_real_uniform_bounds_and_variance(scale):
    s = 0.25 if scale is None else scale
    t = word_init_(torch.empty(V, D, dtype=torch.float64), "uniform", scale)
    top, mean, var = _moments(t)
    assert top <= s and top > 0.99 * s  # fills [-s, s]
    assert abs(mean) < 0.01 * s and var == pytest.approx(s * s / 3, rel=0.03)


@pytest.mark.parametrize("scale", [None, 0.5])
def test_real_normal_variance(scale):
    s = 1.0 if scale is None else scale
    t = word_init_(torch.empty(V, D), "normal", scale)
    _, mean, var = _moments(t)
    assert abs(mean) < 0.01 * s and var == pytest.approx(s * s, rel=0.03)


@pytest.mark.parametrize("init, second_moment", [("uniform", 0.25**2 / 3), ("normal", 1.0)])
def test_complex_parts_and_second_moment(init, second_moment):
    t = word_init_(torch.empty(V, D, dtype=torch.complex128), init)
    parts = torch.view_as_real(t)
    s = 0.25 if init == "uniform" else 1.0
    if init == "uniform":  # each part U(-s/sqrt 2, s/sqrt 2), so |w| <= s
        assert float(parts.abs().max()) <= s / math.sqrt(2)
        assert float(t.abs().max()) <= s
    for part in (t.real, t.imag):  # the two parts alike, each half of E|w|^2
        assert float(part.var()) == pytest.approx(second_moment / 2, rel=0.03)
    assert float((t.abs() ** 2).mean()) == pytest.approx(second_moment, rel=0.03)
    assert abs(float((t.real * t.imag).mean())) < 0.02 * second_moment  # independent parts


@pytest.mark.parametrize("init", ["normal", "uniform"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_generator_makes_it_reproducible(init, dtype):
    torch.manual_seed(5)  # the global generator's state must not matter
    a = word_init_(torch.empty(5, 3, dtype=dtype), init, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(6)
    b = word_init_(torch.empty(5, 3, dtype=dtype), init, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)


# -- every table that holds word vectors ---------------------------------------------------------


def _tables():
    """(name, factory(init, init_scale) -> module, its (V, *) word table as real parts)."""
    return {
        "cplxnet.nn.Embedding": (
            lambda **kw: cnn.Embedding(V, D, padding_idx=0, dtype=torch.complex128, **kw),
            lambda m: m.packed_weight,
            1 / math.sqrt(2),  # per-part bound factor of a complex table
        ),
        "RealEmbedding": (
            lambda **kw: RealEmbedding(V, D, padding_idx=0, dtype=torch.float64, **kw),
            lambda m: m.weight,
            1.0,
        ),
        "complex-order": (
            lambda **kw: create_encoding(
                "complex-order", vocab_size=V, d_model=D, padding_idx=0, **kw
            ),
            lambda m: m.amplitude_weight,
            1.0,
        ),
        "complex-order-real-twin": (
            lambda **kw: create_encoding(
                "complex-order", vocab_size=V, d_model=D, padding_idx=0, dtype=torch.float64, **kw
            ),
            lambda m: m.amplitude_weight,
            1.0,
        ),
        "complex-vanilla": (
            lambda **kw: create_encoding(
                "complex-vanilla", vocab_size=V, d_model=D, padding_idx=0, **kw
            ),
            lambda m: m.amplitude_weight,
            1.0,
        ),
    }


TABLES = _tables()


@pytest.mark.parametrize("name", sorted(TABLES))
def test_uniform_option_bounds_variance_padding_and_reset(name):
    make, table, factor = TABLES[name]
    s = 0.3
    torch.manual_seed(0)
    m = make(init="uniform", init_scale=s)
    w = table(m)
    assert torch.count_nonzero(w[0]) == 0  # the padding row stays zero
    rows = w[1:].detach()
    bound = s * factor
    assert float(rows.abs().max()) <= bound and float(rows.abs().max()) > 0.99 * bound
    assert float(rows.double().var()) == pytest.approx(bound * bound / 3, rel=0.03)
    first = w.detach().clone()
    with torch.no_grad():
        w.fill_(7.0)
    torch.manual_seed(0)
    m.reset_parameters()  # honours the option, with the same draws for the same seed
    torch.manual_seed(0)
    again = make(init="uniform", init_scale=s)
    assert torch.equal(table(m).detach(), first)
    assert torch.equal(table(again).detach(), first)
    assert "init='uniform'" in repr(m)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_normal_scale_option(name):
    make, table, factor = TABLES[name]
    torch.manual_seed(0)
    rows = table(make(init="normal", init_scale=0.5))[1:].detach().double()
    assert float(rows.var()) == pytest.approx((0.5 * factor) ** 2, rel=0.03)


def test_phases_keep_the_whole_circle():
    torch.manual_seed(0)
    m = create_encoding("complex-order", vocab_size=V, d_model=D, init="uniform")
    phase = m.phase_weight.detach()
    assert float(phase.min()) >= 0 and float(phase.max()) > 0.99 * 2 * math.pi


# -- the default is today's initialisation, draw for draw ------------------------------------------


def test_default_complex_embedding_is_unchanged():
    torch.manual_seed(3)
    m = cnn.Embedding(50, 8, padding_idx=2)
    torch.manual_seed(3)
    expected = torch.empty(50, 16).normal_(0.0, math.sqrt(0.5))
    expected[2] = 0
    assert torch.equal(m.packed_weight.detach(), expected)


def test_default_real_embedding_is_torchs():
    torch.manual_seed(3)
    mine = RealEmbedding(50, 8, padding_idx=2)
    torch.manual_seed(3)
    theirs = torch.nn.Embedding(50, 8, padding_idx=2)
    assert mine.state_dict().keys() == theirs.state_dict().keys()
    assert torch.equal(mine.weight, theirs.weight)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_default_complex_order_amplitudes_are_unchanged(dtype):
    torch.manual_seed(3)
    m = create_encoding("complex-order", vocab_size=50, d_model=8, padding_idx=2, dtype=dtype)
    torch.manual_seed(3)
    expected = torch.empty(m.amplitude_weight.shape).normal_(0.0, 1.0)
    expected[2] = 0
    assert torch.equal(m.amplitude_weight.detach(), expected)
    # amplitudes shared over words or dimensions start at one whatever init
    shared = create_encoding(
        "complex-order", vocab_size=50, d_model=8, amplitude="dimension", init="uniform"
    )
    assert torch.equal(shared.amplitude_weight[1:], torch.ones(49, 1))


@pytest.mark.parametrize("complex_", [True, False])
@pytest.mark.parametrize("encoding", ["none", "complex-order"])
def test_default_zoo_model_state_dict_is_unchanged(complex_, encoding):
    """A default model equals one built with the explicit defaults, and its word table is the
    normal(0, 1) one (the layers' own initialisations are untouched)."""
    cfg = zoo.make_config("cnn", vocab_size=60, d_model=8, num_filters=4, complex=complex_,
                          encoding=encoding)  # fmt: skip
    explicit = zoo.make_config("cnn", vocab_size=60, d_model=8, num_filters=4,
                               complex=complex_, encoding=encoding, word_init="normal",
                               word_init_scale=1.0, head_max_norm=None)  # fmt: skip
    torch.manual_seed(0)
    a = zoo.build_model(cfg).state_dict()
    torch.manual_seed(0)
    b = zoo.build_model(explicit).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    torch.manual_seed(0)
    u = zoo.build_model(dataclass_replace(cfg, word_init="uniform")).state_dict()
    differ = [k for k in a if not torch.equal(a[k], u[k])]
    tables = ("word.weight", "word.packed_weight", "amplitude_weight")
    assert any(k.endswith(tables) for k in differ), differ


def dataclass_replace(cfg, **changes):
    import dataclasses

    return dataclasses.replace(cfg, **changes)


@pytest.mark.parametrize("complex_", [True, False])
@pytest.mark.parametrize("encoding", ["none", "complex-order", "complex-vanilla"])
def test_zoo_word_init_reaches_the_word_table(complex_, encoding):
    cfg = zoo.make_config("cnn", vocab_size=3000, d_model=16, num_filters=4, complex=complex_,
                          encoding=encoding, word_init="uniform",
                          word_init_scale=0.2)  # fmt: skip
    model = zoo.build_model(cfg)
    table = model._word_table().detach()
    assert torch.count_nonzero(table[0]) == 0
    parts = torch.view_as_real(table) if table.is_complex() else table
    bound = 0.2 / math.sqrt(2) if table.is_complex() else 0.2
    assert float(parts.abs().max()) <= bound and float(parts.abs().max()) > 0.98 * bound
    # the encoding options override the model's word_init for the encoding's table
    if encoding != "none":
        cfg2 = dataclass_replace(cfg, encoding_options={"init": "normal", "init_scale": 1.0})
        amp = zoo.build_model(cfg2)._word_table().detach()
        assert float(amp.abs().max()) > 1.0


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"init": "gaussian"}, ["unknown init 'gaussian'", "'normal', 'uniform'"]),
        ({"init_scale": 0}, ["init_scale must be a positive finite number"]),
        ({"init_scale": -1.0}, ["init_scale"]),
        ({"init_scale": float("inf")}, ["init_scale"]),
        ({"init_scale": True}, ["init_scale"]),
        ({"init_scale": "big"}, ["init_scale"]),
    ],
)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_bad_options_are_one_line(name, kwargs, words):
    with pytest.raises(ValueError) as err:
        TABLES[name][0](**kwargs)
    msg = str(err.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"word_init": "kim"}, ["unknown word_init 'kim'"]),
        ({"word_init_scale": -0.25}, ["word_init_scale must be"]),
        ({"head_max_norm": 0.0}, ["head_max_norm must be None or a positive number"]),
        ({"head_max_norm": "3"}, ["head_max_norm"]),
    ],
)
def test_bad_config_fields(fields, words):
    with pytest.raises(ValueError) as err:
        zoo.make_config("cnn", **fields)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_decoder_refuses_head_max_norm():
    with pytest.raises(ValueError, match="head_max_norm is a classifier option"):
        zoo.make_config("decoder", vocab_size=20, head_max_norm=3.0)


# -- max-norm on the head -----------------------------------------------------------------------


def _split(n=40, vocab=30, seed=0):
    rng = np.random.default_rng(seed)
    ids = [list(rng.integers(1, vocab, rng.integers(5, 9))) for _ in range(n)]
    return EncodedSplit(ids, torch.as_tensor(rng.integers(0, 3, n)), [None] * n)


@pytest.mark.parametrize("max_norm", [3.0, None])
def test_train_step_applies_the_head_constraint(max_norm):
    cfg = zoo.make_config("cnn", vocab_size=30, num_classes=3, d_model=8, num_filters=6,
                          complex=False, head_max_norm=max_norm)  # fmt: skip
    torch.manual_seed(0)
    model = zoo.build_model(cfg)
    twin = zoo.build_model(dataclass_replace(cfg, head_max_norm=None))
    twin.load_state_dict(model.state_dict())
    split = _split()
    batch = np.arange(20)
    results = []
    for m in (model, twin):
        opt = torch.optim.SGD(m.parameters(), lr=1e4)  # a huge step: the rows blow up
        torch.manual_seed(1)
        train_step(m, split, batch, [opt], constrain=m.apply_constraints)
        results.append(m.head.weight.detach().norm(dim=1))
    norms, free = results
    assert float(free.max()) > 10.0  # the unconstrained step leaves rows far above 3
    if max_norm is None:
        assert torch.equal(norms, free)  # None changes nothing
    else:
        assert float(norms.max()) <= max_norm * (1 + 1e-6)
        big = free > max_norm
        assert torch.allclose(norms[big], torch.full_like(norms[big], max_norm), rtol=1e-5)
        assert torch.equal(norms[~big], free[~big])  # rows within the bound are untouched


def test_apply_constraints_leaves_the_rest_alone():
    cfg = zoo.make_config("cnn", vocab_size=30, d_model=8, num_filters=6, head_max_norm=0.01)
    model = zoo.build_model(cfg)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.apply_constraints()
    after = model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed == ["head.weight"]
    assert float(after["head.weight"].norm(dim=1).max()) <= 0.01 * (1 + 1e-6)


# -- the kim-cnn preset and the command line ------------------------------------------------------


def test_kim_cnn_preset():
    c = zoo.preset_config("kim-cnn", vocab_size=100, num_classes=6)
    assert (c.family, c.complex, c.d_model, c.kernel_sizes, c.num_filters) == (
        "cnn", False, 300, (3, 4, 5), 100)  # fmt: skip
    assert (c.activation, c.dropout, c.word_init, c.word_init_scale, c.head_max_norm) == (
        "crelu", 0.5, "uniform", 0.25, 3.0)  # fmt: skip
    assert zoo.PRESET_TRAINING["kim-cnn"]["batch_size"] == 50
    model = zoo.build_model(c)
    assert isinstance(model.embedding.word, RealEmbedding)
    assert float(model.embedding.word.weight.detach().abs().max()) <= 0.25


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("word-init") / "toy.tsv", n=60)


def test_cli_trains_with_the_options_and_constrains_the_head(toy_file, tmp_path, capsys):
    run = str(tmp_path / "run")
    argv = ["train", "--data", toy_file, "--run-dir", run, "--model", "cnn", "--real",
            "--d-model", "8", "--set", "num_filters=4", "--set", "word_init=uniform",
            "--set", "word_init_scale=0.1", "--set", "head_max_norm=0.05", "--epochs", "2",
            "--lr", "0.5", "--quiet", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    assert (model["word_init"], model["word_init_scale"], model["head_max_norm"]) == (
        "uniform", 0.1, 0.05)  # fmt: skip
    state = torch.load(os.path.join(run, "best.pt"), map_location="cpu", weights_only=False)
    weights = state["model"]
    assert float(weights["head.weight"].norm(dim=1).max()) <= 0.05 * (1 + 1e-5)


def test_cli_encoding_init_option(toy_file, tmp_path, capsys):
    run = str(tmp_path / "run")
    argv = ["train", "--data", toy_file, "--run-dir", run, "--model", "cnn", "--d-model", "8",
            "--set", "num_filters=4", "--encoding", "complex-order:init=uniform:init_scale=0.1",
            "--epochs", "1", "--quiet", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    assert model["encoding_options"] == {"init": "uniform", "init_scale": 0.1}


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--encoding", "complex-order:init=gauss"], ["unknown init 'gauss'"]),
        (["--encoding", "complex-order:init_scale=-1"], ["init_scale must be"]),
        (["--set", "word_init=kim"], ["unknown word_init 'kim'"]),
        (["--set", "head_max_norm=-3"], ["head_max_norm must be"]),
    ],
)
def test_cli_bad_options_are_one_error_line(toy_file, tmp_path, capsys, extra, words):
    run = str(tmp_path / "run")
    argv = ["train", "--data", toy_file, "--run-dir", run, "--model", "cnn", "--d-model", "8",
            "--epochs", "1", "--quiet", "--threads", "1", *extra]  # fmt: skip
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert all(w in err for w in words), err
    assert not os.path.exists(run)
