"""The training loop every task shares (:mod:`cplxnet.engine.loop`).

* Its hot loop reads no tensor back to the host: the reads that cplxnet's own code makes
  (``float(t)``, ``int(t)``, ``t.item()``, ``t.tolist()``, ``bool(t)``) are the same in number
  for a round of 4 steps and one of 12, for a classifier and for a language model.
* Checkpoints of format 1 (each task's own layout) read as format 2; another format is one
  line naming the file.
"""

from __future__ import annotations

import os
import sys

import pytest
import test_train_zoo as toy
import torch

from cplxnet.data import DataSpec, prepare_data
from cplxnet.engine import CHECKPOINT_FORMAT, check_checkpoint_format, upgrade_checkpoint
from cplxnet.engine.checkpoints import CHECKPOINT_KEYS, read_checkpoint
from cplxnet.engine.runs import RunError, check_entries
from cplxnet.tasks.classify.task import TrainOptions, train

CPLXNET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cplxnet")
READS = ("__float__", "__int__", "__bool__", "item", "tolist")


@pytest.fixture
def host_reads(monkeypatch):
    """Counts the tensor reads made from cplxnet's own source files."""
    count = {"n": 0}
    for name in READS:
        real = getattr(torch.Tensor, name)

        def spy(self, *args, _real=real, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if os.path.abspath(caller).startswith(CPLXNET):
                count["n"] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    return count


def test_a_classifier_round_reads_the_host_a_fixed_number_of_times(tmp_path, host_reads):
    toy_file = toy.write_toy_tsv(tmp_path / "toy.tsv", n=150)
    data = prepare_data(DataSpec(toy_file))
    zoo = sys.modules[toy.__name__]
    counts = []
    for steps in (4, 12):
        host_reads["n"] = 0
        batch = -(-len(data.train) // steps)  # one epoch of `steps` batches
        options = TrainOptions(epochs=1, batch_size=batch, seed=1)
        config = toy.make_config(d_model=4, dropout=0.0)
        results = train(config, data, str(tmp_path / f"r{steps}"), options, zoo=zoo, quiet=True)
        assert results["steps"] == steps
        counts.append(host_reads["n"])
    assert counts[0] == counts[1], counts


def test_a_language_model_round_reads_the_host_a_fixed_number_of_times(tmp_path, host_reads):
    from cplxnet.models import make_config
    from cplxnet.tasks.lm import LMOptions, train_lm

    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 60, encoding="utf-8")
    counts = []
    for steps in (4, 12):
        host_reads["n"] = 0
        config = make_config("decoder", d_model=8, num_layers=1, num_heads=2,
                             dim_feedforward=16, dropout=0.0)  # fmt: skip
        options = LMOptions(steps=steps, eval_every=steps, batch_size=2, eval_multiples=(1,))
        results = train_lm(config, str(text), str(tmp_path / f"l{steps}"), options, context=8,
                           quiet=True)  # fmt: skip
        assert results["steps"] == steps
        counts.append(host_reads["n"])
    assert counts[0] == counts[1], counts


def v1_classifier() -> dict:
    return {"format": 1, "epoch": 2, "step": 6, "model": {}, "optimizers": [{}], "rng": [{}],
            "history": [{"epoch": 1, "best": True}, {"epoch": 2, "best": False}],
            "best": {"epoch": 1}, "since_best": 1, "stopped": True}  # fmt: skip


def v1_lm() -> dict:
    history = [{"step": 2, "best": True}, {"step": 4, "best": False}, {"step": 6, "best": False}]
    return {"format": 1, "step": 6, "model": {}, "optimizer": {"state": {}},
            "rng": {"torch": 1}, "history": history, "best": {"step": 2}, "seconds": 1.5,
            "cpu_seconds": 1.0}  # fmt: skip


def test_format_1_checkpoints_read_as_format_2():
    c = upgrade_checkpoint(v1_classifier(), "classify")
    check_entries(c, CHECKPOINT_KEYS, "c")
    assert (c["format"], c["task"], c["evaluations"], c["epoch"]) == (
        CHECKPOINT_FORMAT,
        "classify",
        2,
        2,
    )
    assert c["stopped"] is True and c["since_best"] == 1
    lm = upgrade_checkpoint(v1_lm(), "lm")
    check_entries(lm, CHECKPOINT_KEYS, "l")
    assert lm["optimizers"] == [{"state": {}}] and lm["rng"] == [{"torch": 1}]
    assert "optimizer" not in lm and lm["evaluations"] == 3 and lm["since_best"] == 2
    assert (lm["seconds"], lm["cpu_seconds"], lm["stopped"]) == (1.5, 1.0, False)


@pytest.mark.parametrize("kind, state", [("classify", v1_classifier()), ("lm", v1_lm())])
def test_read_checkpoint_checks_the_layout_of_its_format(tmp_path, kind, state):
    path = str(tmp_path / "checkpoint.pt")
    torch.save(state, path)
    assert read_checkpoint(path, kind)["format"] == CHECKPOINT_FORMAT
    other = "lm" if kind == "classify" else "classify"
    with pytest.raises(RunError, match="not a cplxnet checkpoint of this kind"):
        read_checkpoint(path, other)  # a format 1 file of the other task lacks its entries
    torch.save({**upgrade_checkpoint(state, kind)}, path)
    with pytest.raises(RunError, match=f"checkpoint of a {kind} run, not of a {other} run"):
        read_checkpoint(path, other)


def test_an_unknown_format_is_one_line():
    with pytest.raises(RunError) as info:
        check_checkpoint_format({"format": 7}, "run/checkpoint.pt")
    message = str(info.value)
    assert "\n" not in message and "run/checkpoint.pt has the unknown format 7" in message
    check_checkpoint_format({"format": CHECKPOINT_FORMAT}, "x")


def test_the_rounds_of_a_language_model_end_at_each_evaluation_and_the_last_step():
    from cplxnet.engine import LoopState
    from cplxnet.tasks.lm import LMOptions
    from cplxnet.tasks.lm.task import LMTask

    task = LMTask("synthetic:copy", "char", 4)
    task.options = LMOptions(steps=5, eval_every=2)
    rounds, state = [], LoopState()
    while not task.done(state):
        steps = task.round(state)
        rounds.append((steps.start, steps.stop))
        state.step = steps.stop
    assert rounds == [(0, 2), (2, 4), (4, 5)]
    # a metrics line records the run's time so far (over sessions), not the round's
    task.lr = 0.1
    line = task.metrics(state, {"train_loss": 1.0}, {"loss": 2.0}, True, seconds=1.0,
                        total_seconds=7.25)  # fmt: skip
    assert line == {"step": 5, "train_loss": 1.0, "dev_loss": 2.0, "best": True, "lr": 0.1,
                    "seconds": 7.25}  # fmt: skip


def test_a_classifier_round_is_an_epoch_cut_by_max_steps(tmp_path):
    from cplxnet.engine import LoopState
    from cplxnet.tasks.classify.task import ClassifyTask

    data = prepare_data(DataSpec(toy.write_toy_tsv(tmp_path / "toy.tsv", n=100)))
    task = ClassifyTask(data, TrainOptions(epochs=3, batch_size=10, max_steps=12), None, None)
    state = LoopState(step=10, evaluations=1)
    assert not task.done(state) and len(task.round(state)) == -(-len(data.train) // 10)
    state.step = 12
    assert task.round_over(state) and task.done(state)
    assert task.done(LoopState(step=2, evaluations=3))
