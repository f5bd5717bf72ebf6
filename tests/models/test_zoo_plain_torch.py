"""The zoo's defaults work with plain torch: ``build_model`` gives dense embedding tables, so
``torch.optim.Adam(model.parameters())`` trains any model, while ``cplxnet train`` still chooses
sparse tables with SparseAdam; ``attention_dropout`` follows ``dropout`` unless set."""

from __future__ import annotations

import os

import pytest
import torch
from zoo_helpers import batch, tiny_config

from cplxnet.models import FAMILIES, build_model, make_config, sparse_parameters


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("encoding", ["none", "complex-order"])
@pytest.mark.parametrize("complex_", [True, False])
def test_plain_adam_trains_a_default_model(family, encoding, complex_):
    fields = {"attention_dropout": 0.0} if family == "transformer" else {}
    config = make_config(
        family,
        **{**tiny_config(family, complex_).to_dict(), "encoding": encoding, **fields},
    )
    assert config.sparse_embeddings is False
    model = build_model(config)
    assert sparse_parameters(model) == []
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids, mask = batch([5, 3])
    model(ids, mask).logsumexp(-1).sum().backward()
    assert all(p.grad is None or not p.grad.is_sparse for p in model.parameters())
    opt.step()
    tables = [n for n in before if "weight" in n and ("word" in n or "encoding" in n)]
    assert tables and any(not torch.equal(before[n], model.get_parameter(n)) for n in tables)


def test_sparse_embeddings_true_still_gives_sparse_tables():
    model = build_model(tiny_config("cnn", encoding="complex-order", sparse_embeddings=True))
    assert sparse_parameters(model)


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        ({"dropout": 0.0}, 0.0),
        ({"dropout": 0.3}, 0.3),
        ({"dropout": 0.3, "attention_dropout": 0.05}, 0.05),
    ],
)
def test_attention_dropout_follows_dropout_unless_set(fields, want):
    config = make_config("transformer", vocab_size=11, d_model=8, num_heads=2, **fields)
    model = build_model(config)
    layer = model.encoder.layers[0]
    assert layer.self_attn.dropout == want
    assert layer.dropout.p == fields["dropout"]


def test_trainer_chooses_sparse_tables_with_sparse_adam(tmp_path):
    """``cplxnet train``'s engine turns a default (dense) zoo model's tables sparse and trains
    them with SparseAdam; ``sparse=False`` (``--dense``) keeps them dense."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # tests/: the toy zoo
    import test_train_zoo as toy

    import cplxnet.models as zoo
    from cplxnet.data import DataSpec, prepare_data
    from cplxnet.tasks.classify.task import TrainOptions, load_checkpoint, train

    data = prepare_data(DataSpec(toy.write_toy_tsv(tmp_path / "toy.tsv", n=60)))
    config = make_config("fasttext", d_model=4, encoding="complex-order")
    for name, sparse, n_opt in (("s", True, 2), ("d", False, 1)):
        run = str(tmp_path / name)
        options = TrainOptions(epochs=1, batch_size=16, seed=0, max_steps=1, sparse=sparse)
        train(config, data, run, options, zoo=zoo, quiet=True)
        assert len(load_checkpoint(os.path.join(run, "checkpoint.pt"))["optimizers"]) == n_opt


def test_the_zoo_imports_only_public_cplxnet_modules():
    """models/ is written against cplxnet's public API: no ``cplxnet._private`` module."""
    import ast
    import pathlib

    import cplxnet.models

    root = pathlib.Path(cplxnet.models.__file__).resolve().parent
    seen = set()
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "cplxnet":
                    seen.add(name)
                    assert not any(p.startswith("_") for p in name.split(".")), (path.name, name)
    assert "cplxnet.utils" in seen
