"""The pieces of the training engine on their own: one optimiser step (gradient scaling across
ranks, clipping), the optimisers, the RNG states, the batch order of each epoch and the limits and
probabilities of a loaded run."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import test_train_zoo as zoo
import torch

from cplxnet.data import DataError, DataSpec, batch_indices, prepare_data
from cplxnet.engine.metrics import batch_logits
from cplxnet.engine.optimization import make_optimizers, train_step
from cplxnet.engine.options import TrainOptions
from cplxnet.engine.runtime import rng_state, set_rng_state
from cplxnet.tasks.classify.inference import LoadedRun, predict


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepare_data(DataSpec(zoo.write_toy_tsv(tmp_path_factory.mktemp("toy") / "t.tsv")))


def _model(data, **kw):
    torch.manual_seed(0)
    config = zoo.make_config(
        vocab_size=len(data.vocab), d_model=8, dropout=0.0, sparse_embeddings=False, **kw
    )
    return zoo.build_model(config)


class _Recorder:
    """An optimiser that keeps the gradients its step sees."""

    def __init__(self, params):
        self.params, self.grads = list(params), None

    def step(self):
        self.grads = [p.grad.detach().clone() for p in self.params]

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None


def _step(model, data, batch, *, world=1, rank=0, clip_norm=None, clip_params=None):
    """The (clipped) gradients of one train_step."""
    opt = _Recorder(model.parameters())
    params = list(model.parameters()) if clip_params is None else clip_params
    train_step(
        model, data.train, batch, [opt], world=world, rank=rank, clip_norm=clip_norm,
        clip_params=params,
    )  # fmt: skip
    assert all(p.grad is None for p in model.parameters())  # zeroed after the step
    return opt.grads


def test_the_ranks_gradients_average_to_the_global_batch_gradient(data):
    """Each rank's loss is scaled by world / len(batch): the mean of the ranks' gradients (what
    DDP computes) is the gradient of the mean loss over the global batch, for unequal shards."""
    model = _model(data)
    batch = np.arange(7)  # shards of 4 and 3 examples
    full = _step(copy.deepcopy(model), data, batch)
    ranks = [_step(copy.deepcopy(model), data, batch, world=2, rank=r) for r in (0, 1)]
    for g, g0, g1 in zip(full, *ranks):
        torch.testing.assert_close((g0 + g1) / 2, g, rtol=1e-5, atol=1e-7)
    assert any(g.abs().sum() > 0 for g in full)


def test_clipping_bounds_the_norm_of_the_clipped_parameters_only(data):
    model = _model(data)
    batch = np.arange(16)
    grads = _step(copy.deepcopy(model), data, batch)
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    clip = float(norm) / 10
    clipped = _step(copy.deepcopy(model), data, batch, clip_norm=clip)
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in clipped]))
    assert float(total) == pytest.approx(clip, rel=1e-4)
    for g, c in zip(grads, clipped):
        torch.testing.assert_close(c, g / 10, rtol=1e-4, atol=1e-8)  # the same direction
    # only clip_params are clipped (the dense ones: sparse tables have SparseAdam)
    head = copy.deepcopy(model)
    some = _step(head, data, batch, clip_norm=clip, clip_params=[head.head.weight])
    names = [n for n, _ in model.named_parameters()]
    for name, g, s in zip(names, grads, some):
        if name == "head.weight":
            assert float(torch.linalg.vector_norm(s)) == pytest.approx(clip, rel=1e-4)
        else:
            torch.testing.assert_close(s, g, rtol=1e-5, atol=1e-8)


def test_optimisers_follow_weight_decay_and_sparse_options(data):
    sparse_model = zoo.build_model(zoo.make_config(vocab_size=len(data.vocab), d_model=4))
    table = sparse_model.word.weight
    opts, dense = make_optimizers(sparse_model, TrainOptions(lr=0.5), zoo)
    assert [type(o) for o in opts] == [torch.optim.Adam, torch.optim.SparseAdam]
    assert all(p is not table for p in dense) and len(dense) == 4
    assert opts[1].param_groups[0]["params"] == [table]
    assert opts[0].param_groups[0]["lr"] == opts[1].param_groups[0]["lr"] == 0.5
    opts, dense = make_optimizers(sparse_model, TrainOptions(weight_decay=0.25), zoo)
    assert type(opts[0]) is torch.optim.AdamW and opts[0].param_groups[0]["weight_decay"] == 0.25
    opts, dense = make_optimizers(sparse_model, TrainOptions(sparse=False), zoo)
    assert [type(o) for o in opts] == [torch.optim.Adam] and any(p is table for p in dense)


def test_rng_states_round_trip_every_generator():
    state = rng_state()
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
    # also from a state saved with the Gaussian caches filled
    random.gauss(0, 1), np.random.standard_normal()
    state = rng_state()
    first = (random.gauss(0, 1), np.random.standard_normal(), torch.randn(1).item())
    set_rng_state(state)
    assert (random.gauss(0, 1), np.random.standard_normal(), torch.randn(1).item()) == first


def test_each_epoch_has_the_batch_order_of_its_seed_and_number(data, tmp_path, monkeypatch):
    import cplxnet.tasks.classify.task as engine

    seen: list[list[int]] = []
    real_step = engine.optimizer_step

    def spy(model, split, batch, *args, **kwargs):
        seen.append([int(i) for i in batch])
        return real_step(model, split, batch, *args, **kwargs)

    monkeypatch.setattr(engine, "optimizer_step", spy)
    options = TrainOptions(epochs=3, batch_size=16, seed=5)
    config = zoo.make_config(d_model=4)
    engine.train(config, data, str(tmp_path / "run"), options, zoo=zoo, quiet=True)
    lengths = data.train.lengths()
    expected = [
        [list(map(int, b)) for b in batch_indices(lengths, 16, shuffle=True, seed=5, epoch=e)]
        for e in range(3)
    ]
    assert seen == [b for epoch in expected for b in epoch]
    assert expected[0] != expected[1] != expected[2]


@pytest.fixture(scope="module")
def loaded(data):
    model = _model(data, max_len=6)
    model.eval()
    return LoadedRun(
        "run", model.config, model, data.spec, data.spec.tokenizer, data.vocab, data.labels, {}
    )


def test_max_len_may_be_at_most_the_models_limit(loaded):
    text = "a b c d e f g h"
    with pytest.raises(DataError, match="more than the 6 positions"):
        predict(loaded, [text], max_len=7)
    assert len(predict(loaded, [text], max_len=6)) == 1
    with pytest.raises(DataError, match="max_len is 6|longer|6 tokens"):
        predict(loaded, [text])  # no truncation asked for: too long is an error


def test_predict_returns_each_texts_most_probable_label(loaded):
    from cplxnet.data import encode_texts

    texts = ["a good film", "bad", "a b c", "the the"]
    out = predict(loaded, texts)
    ids = encode_texts(texts, loaded.tokenizer, loaded.vocab, max_len=6)
    probs = torch.softmax(batch_logits(loaded.model, ids, 256), dim=1)
    p, index = probs.max(1)
    assert [label for label, _ in out] == [loaded.labels.decode(int(i)) for i in index]
    assert [q for _, q in out] == pytest.approx(p.tolist(), rel=1e-6)
    assert all(0.5 <= q < 1 for _, q in out)  # two classes


def test_resume_keeps_the_epochs_since_the_best_one(data, tmp_path):
    """Patience counts across an interruption: a run stopped after a non-improving epoch and
    resumed stops at the epoch an uninterrupted run stops at."""
    import json

    from cplxnet.tasks.classify.task import resume, train

    # a learning rate too small to change a prediction: no better dev accuracy after epoch 1
    options = TrainOptions(epochs=6, batch_size=16, lr=1e-12, patience=2, seed=3)
    config = zoo.make_config(d_model=4)
    straight = train(config, data, str(tmp_path / "a"), options, zoo=zoo, quiet=True)
    assert straight["stopped_early"] and straight["epochs_run"] == 3

    def crash(epoch, _metrics):
        if epoch == 2:
            raise KeyboardInterrupt

    run = str(tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        train(config, data, run, options, zoo=zoo, quiet=True, callback=crash)
    resumed = resume(run, zoo=zoo, quiet=True)
    keys = ("epochs_run", "steps", "stopped_early", "best_epoch", "test_accuracy")
    assert {k: resumed[k] for k in keys} == {k: straight[k] for k in keys}
    with open(f"{run}/metrics.jsonl") as fh:
        assert [json.loads(line)["best"] for line in fh] == [True, False, False]


def test_only_the_first_rank_logs_and_shows_progress(capsys):
    from cplxnet.engine.runtime import Logger, progress

    for quiet, rank, shown in ((False, 0, True), (False, 1, False), (True, 0, False)):
        Logger(quiet, rank)("line")
        assert capsys.readouterr().out == ("line\n" if shown else "")
        bar = progress(3, "epoch", quiet, rank)
        assert bar.disable or shown  # on rank 0 it shows only on a terminal
        bar.close()
    assert progress(3, "epoch", False, 1).disable and progress(3, "epoch", True, 0).disable
