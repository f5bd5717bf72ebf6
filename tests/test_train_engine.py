"""The training engine on a tiny model: learning, the run folder, exact resume, safe files."""

from __future__ import annotations

import argparse
import json
import os

import pytest
import test_train_zoo as zoo
import torch

from cplxnet.data import DataError, DataSpec, prepare_data
from cplxnet.tasks.classify.task import (
    RUN_FILES,
    RunError,
    TrainOptions,
    evaluate_run,
    load_checkpoint,
    load_run,
    macro_f1,
    predict,
    resume,
    save_checkpoint,
    train,
)


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return zoo.write_toy_tsv(tmp_path_factory.mktemp("toy") / "toy.tsv", n=160)


@pytest.fixture
def data(toy_file):
    return prepare_data(DataSpec(toy_file))


def opts(**kw):
    base = {"epochs": 2, "batch_size": 16, "lr": 1e-2, "seed": 3}
    base.update(kw)
    return TrainOptions(**base)


def cfg(**kw):
    base = {"d_model": 8, "dropout": 0.3}
    base.update(kw)
    return zoo.make_config(**base)


def read_json(run_dir, name):
    with open(os.path.join(run_dir, name)) as fh:
        return json.load(fh)


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as fh:
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in fh]


def results(run_dir):
    with open(os.path.join(run_dir, "results.json")) as fh:
        return {k: v for k, v in json.load(fh).items() if k != "seconds_this_session"}


def params(path):
    return load_checkpoint(path)["model"]


def assert_same_state(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_loss_falls_and_run_folder_is_complete(data, tmp_path):
    run = str(tmp_path / "run")
    res = train(cfg(d_model=16), data, run, opts(epochs=6, lr=0.03), zoo=zoo, quiet=True)
    assert sorted(os.listdir(run)) == sorted(RUN_FILES)
    m = metrics(run)
    assert [x["epoch"] for x in m] == list(range(1, 7))
    assert m[-1]["train_loss"] < 0.5 * m[0]["train_loss"]
    assert res["test_accuracy"] > 0.8
    config = read_json(run, "config.json")
    assert set(config) >= {"model", "train", "data", "seed", "versions", "vectors", "world_size"}
    assert config["model"]["vocab_size"] == len(data.vocab) and config["model"]["num_classes"] == 2
    assert config["data"]["data"] == os.path.abspath(data.spec.data) and config["seed"] == 3
    assert set(config["versions"]) >= {"torch", "cplxnet", "python"}
    assert read_json(run, "labels.json") == ["neg", "pos"]
    assert read_json(run, "vocab.json")["tokens"][:2] == ["<pad>", "<unk>"]
    best_epoch = max(m, key=lambda x: (x["dev_accuracy"], -x["epoch"]))["epoch"]
    assert res["best_epoch"] == best_epoch == load_checkpoint(os.path.join(run, "best.pt"))["epoch"]
    assert [x["epoch"] for x in m if x["best"]][-1] == best_epoch
    assert results(run)["test_size"] == len(data.test)


def test_test_split_is_scored_with_the_best_checkpoint(data, tmp_path):
    run = str(tmp_path / "run")
    res = train(cfg(), data, run, opts(epochs=4), zoo=zoo, quiet=True)
    loaded = load_run(run, zoo=zoo)
    assert_same_state(loaded.model.state_dict(), params(os.path.join(run, "best.pt")))
    again = evaluate_run(loaded)
    assert again["accuracy"] == res["test_accuracy"] and again["macro_f1"] == res["test_macro_f1"]


def test_resume_after_a_crash_equals_an_uninterrupted_run(data, tmp_path):
    straight = str(tmp_path / "straight")
    train(cfg(), data, straight, opts(epochs=3), zoo=zoo, quiet=True)

    def crash(epoch, _metrics):
        if epoch == 1:
            raise KeyboardInterrupt

    broken = str(tmp_path / "broken")
    with pytest.raises(KeyboardInterrupt):
        train(cfg(), data, broken, opts(epochs=3), zoo=zoo, quiet=True, callback=crash)
    assert not os.path.exists(os.path.join(broken, "results.json"))  # visibly incomplete
    assert load_checkpoint(os.path.join(broken, "checkpoint.pt"))["epoch"] == 1
    resume(broken, zoo=zoo, quiet=True)
    for name in ("checkpoint.pt", "best.pt"):
        assert_same_state(params(os.path.join(straight, name)), params(os.path.join(broken, name)))
    a, b = (load_checkpoint(os.path.join(r, "checkpoint.pt")) for r in (straight, broken))
    assert_same_state(a["optimizers"][0]["state"][0], b["optimizers"][0]["state"][0])
    assert metrics(straight) == metrics(broken)
    assert results(straight) == results(broken)


def test_resume_with_another_thread_count_says_it_is_not_exact(data, tmp_path, capsys):
    """torch's CPU kernels (and cplxnet's, which choose a path by the thread count) round
    differently with another number of threads, so a resume with another ``--threads`` notes
    that its result will not be bit-identical, as one with another number of processes."""

    def crash(epoch, _metrics):
        raise KeyboardInterrupt

    threads = torch.get_num_threads()
    run = str(tmp_path / "run")
    try:
        torch.set_num_threads(1)
        with pytest.raises(KeyboardInterrupt):
            train(cfg(), data, run, opts(epochs=3), zoo=zoo, quiet=True, callback=crash)
        assert read_json(run, "config.json")["threads"] == 1
        torch.set_num_threads(2)
        with pytest.raises(KeyboardInterrupt):
            resume(run, zoo=zoo, callback=crash)
        assert (
            "note: resuming a run trained with 1 torch thread(s) with 2; the result will not be "
            "bit-identical to an uninterrupted run (--threads 1 keeps it)"
        ) in capsys.readouterr().out
        torch.set_num_threads(1)
        resume(run, zoo=zoo)
        assert "note:" not in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)


def test_extending_a_finished_run_equals_training_longer(data, tmp_path):
    longer, short = str(tmp_path / "longer"), str(tmp_path / "short")
    train(cfg(), data, longer, opts(epochs=2), zoo=zoo, quiet=True)
    train(cfg(), data, short, opts(epochs=1), zoo=zoo, quiet=True)
    with pytest.raises(RunError, match=r"already complete \(finished epoch 1; .* N > 1 to"):
        resume(short, zoo=zoo, quiet=True)
    with pytest.raises(RunError, match="N > 1"):  # the planned number again extends nothing
        resume(short, epochs=1, zoo=zoo, quiet=True)
    resume(short, epochs=2, zoo=zoo, quiet=True)
    assert_same_state(
        params(os.path.join(longer, "checkpoint.pt")), params(os.path.join(short, "checkpoint.pt"))
    )
    assert metrics(longer) == metrics(short) and results(longer) == results(short)


def test_an_early_stopped_run_continues_with_its_planned_epochs(data, tmp_path):
    run = str(tmp_path / "run")
    # a learning rate too small to change a prediction: no better dev accuracy after epoch 1
    res = train(cfg(), data, run, opts(epochs=5, lr=1e-12, patience=1), zoo=zoo, quiet=True)
    assert res["stopped_early"] and res["epochs_run"] == 2
    with pytest.raises(RunError, match=r"stopped early after epoch 2; .* N > 2"):
        resume(run, zoo=zoo, quiet=True)
    res = resume(run, epochs=5, zoo=zoo, quiet=True)  # the planned 5: continue, stop again
    assert res["stopped_early"] and res["epochs_run"] == 3
    assert [m["epoch"] for m in metrics(run)] == [1, 2, 3]


def test_same_seed_same_run_other_seed_other_run(data, tmp_path):
    runs = [str(tmp_path / n) for n in "abc"]
    for run, seed in zip(runs, (5, 5, 6)):
        train(cfg(), data, run, opts(epochs=1, seed=seed), zoo=zoo, quiet=True)
    a, b, c = (params(os.path.join(r, "checkpoint.pt")) for r in runs)
    assert_same_state(a, b)
    assert not torch.equal(a["word.weight"], c["word.weight"])


def test_sparse_tables_use_sparse_adam_and_dense_option(data, tmp_path):
    train(cfg(), data, str(tmp_path / "s"), opts(epochs=1), zoo=zoo, quiet=True)
    state = load_checkpoint(str(tmp_path / "s" / "checkpoint.pt"))
    assert len(state["optimizers"]) == 2  # Adam (dense) + SparseAdam (word table)
    train(cfg(), data, str(tmp_path / "d"), opts(epochs=1, sparse=False), zoo=zoo, quiet=True)
    assert len(load_checkpoint(str(tmp_path / "d" / "checkpoint.pt"))["optimizers"]) == 1


def test_options_weight_decay_clipping_patience_and_max_steps(data, tmp_path):
    res = train(
        cfg(),
        data,
        str(tmp_path / "r"),
        opts(epochs=30, weight_decay=0.01, clip_norm=0.5, patience=1, lr=0.05),
        zoo=zoo,
        quiet=True,
    )
    assert res["stopped_early"] and res["epochs_run"] < 30
    res = train(cfg(), data, str(tmp_path / "m"), opts(epochs=5, max_steps=3), zoo=zoo, quiet=True)
    assert res["steps"] == 3 and res["epochs_run"] == 1


def test_no_overwrite_without_force_and_force_only_on_run_folders(data, tmp_path):
    run = str(tmp_path / "run")
    train(cfg(), data, run, opts(epochs=1), zoo=zoo, quiet=True)
    before = os.path.getmtime(os.path.join(run, "results.json"))
    with pytest.raises(RunError, match="already exists; pass --force"):
        train(cfg(), data, run, opts(epochs=1), zoo=zoo, quiet=True)
    assert os.path.getmtime(os.path.join(run, "results.json")) == before
    train(cfg(), data, run, opts(epochs=1), zoo=zoo, quiet=True, force=True)
    other = tmp_path / "precious"
    other.mkdir()
    (other / "thesis.txt").write_text("do not delete")
    with pytest.raises(RunError, match="not a cplxnet run folder"):
        train(cfg(), data, str(other), opts(epochs=1), zoo=zoo, quiet=True, force=True)
    assert (other / "thesis.txt").read_text() == "do not delete"


def test_setup_error_leaves_no_run_folder(data, tmp_path):
    vectors = tmp_path / "v.txt"
    vectors.write_text("good 1 2 3\n")  # dimension 3, model d_model 8
    run = str(tmp_path / "run")
    with pytest.raises(DataError, match=r"v\.txt: .*shape"):
        train(cfg(), data, run, opts(), vectors=str(vectors), zoo=zoo, quiet=True)
    assert not os.path.exists(run)


def test_word_vectors_are_loaded_and_reported(data, tmp_path):
    vectors = tmp_path / "v.txt"
    vectors.write_text("good " + " ".join(["0.5"] * 8) + "\nzzz " + " ".join(["1"] * 8) + "\n")
    run = str(tmp_path / "run")
    train(cfg(), data, run, opts(epochs=1, lr=1e-9), vectors=str(vectors), zoo=zoo, quiet=True)
    info = read_json(run, "config.json")["vectors"]
    assert info["found"] == 1 and info["dim"] == 8
    row = params(os.path.join(run, "checkpoint.pt"))["word.weight"][data.vocab.stoi["good"]]
    assert torch.allclose(row, torch.full((8,), 0.5), atol=1e-6)


def test_checkpoints_are_atomic_and_loaded_weights_only(tmp_path):
    path = str(tmp_path / "ck.pt")
    save_checkpoint({"x": torch.ones(2), "n": 3, "s": "a", "none": None}, path)
    with pytest.raises(Exception):  # noqa: B017 - unpicklable: the write fails midway
        save_checkpoint({"x": torch.zeros(2), "f": lambda: 0}, path)
    assert torch.equal(load_checkpoint(path)["x"], torch.ones(2))  # old file intact
    assert os.listdir(tmp_path) == ["ck.pt"]  # no temporary file left behind

    # an arbitrary (importable) class: torch.load(weights_only=True) refuses to build it
    torch.save({"obj": argparse.Namespace(a=1)}, str(tmp_path / "evil.pt"))
    with pytest.raises(RunError, match="cannot be loaded"):
        load_checkpoint(str(tmp_path / "evil.pt"))


def test_predict_and_evaluate_errors(data, tmp_path, toy_file):
    run = str(tmp_path / "run")
    train(cfg(max_len=12), data, run, opts(epochs=3), zoo=zoo, quiet=True)
    out = predict(run, ["a good film", "awful plot"], zoo=zoo)
    assert [label for label, _ in out] == ["pos", "neg"] and all(0.5 < p <= 1 for _, p in out)
    with pytest.raises(DataError, match="text 2: the text is empty"):
        predict(run, ["fine", "  "], zoo=zoo)
    with pytest.raises(DataError, match=r"text 1: the text has 13 tokens but the model's max_len"):
        predict(run, ["good " * 13], zoo=zoo)
    bad = tmp_path / "eval.tsv"
    bad.write_text("label\ttext\npos\tgood\nmeh\tso so\n")
    with pytest.raises(DataError, match=r"eval\.tsv line 3: label 'meh' never occurs"):
        evaluate_run(run, str(bad), zoo=zoo)
    good = tmp_path / "ok.tsv"
    good.write_text("label\ttext\npos\tgood fun\nneg\tbad dull\n")
    assert evaluate_run(run, str(good), zoo=zoo)["n"] == 2


def test_macro_f1():
    y = torch.tensor([0, 0, 1, 1, 2])
    p = torch.tensor([0, 1, 1, 1, 0])
    # class 0: tp 1 fp 1 fn 1 -> 0.5; class 1: tp 2 fp 1 fn 0 -> 0.8; class 2: 0
    assert macro_f1(y, p) == pytest.approx((0.5 + 0.8 + 0.0) / 3)


def test_evaluate_refuses_a_changed_data_file(tmp_path):
    path = zoo.write_toy_tsv(tmp_path / "toy.tsv", n=60)
    run = str(tmp_path / "run")
    train(cfg(), prepare_data(DataSpec(path)), run, opts(epochs=1), zoo=zoo, quiet=True)
    assert evaluate_run(run, zoo=zoo)["n"] == 6
    zoo.write_toy_tsv(tmp_path / "toy.tsv", n=60, seed=1)
    with pytest.raises(RunError, match=r"the data file .*toy\.tsv changed since"):
        evaluate_run(run, zoo=zoo)


def test_data_parallel_falls_back_to_dense_for_tables_ddp_cannot_reduce():
    from cplxnet.engine.optimization import ddp_handles_sparse, set_sparse

    tiny = zoo.build_model(cfg(vocab_size=5))
    assert ddp_handles_sparse(tiny, zoo)  # torch.nn.Embedding(sparse=True): DDP reduces it
    import cplxnet.models as models

    model = models.build_model(
        models.make_config("fasttext", vocab_size=5, d_model=4, sparse_embeddings=True)
    )
    assert models.sparse_parameters(model)  # cplxnet's packed complex table is sparse ...
    assert not ddp_handles_sparse(model, models)  # ... but DDP does not know it
    set_sparse(model, False)
    assert models.sparse_parameters(model) == []
