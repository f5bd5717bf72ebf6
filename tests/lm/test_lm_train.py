"""The language-model engine: the run folder and results.json, resume after a kill equals an
uninterrupted run, n/a for lengths a trainable table lacks, deterministic sampling, and the
synthetic copy/reverse tasks."""

from __future__ import annotations

import json
import os

import pytest
import torch
from torch import nn

from cplxnet.engine.metrics import batch_logits, evaluating
from cplxnet.inspect import attention_by_distance
from cplxnet.models import build_model, make_config
from cplxnet.tasks.classify.task import RunError
from cplxnet.tasks.lm import (
    NA,
    LMOptions,
    SyntheticTask,
    evaluate_lm_run,
    generate,
    generate_text,
    load_lm_run,
    make_task,
    resume_lm,
    score_stream,
    stream,
    train_lm,
)

TINY = {"d_model": 8, "num_heads": 2, "dim_feedforward": 16, "num_layers": 1}
OPTIONS = LMOptions(steps=6, batch_size=4, eval_every=3, eval_multiples=(1, 2), lr=1e-2)


def tiny(encoding="rotary", **fields):
    return make_config("decoder", encoding=encoding, **{**TINY, **fields})


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "text.txt"
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "sleeps"]
    g = torch.Generator().manual_seed(0)
    lines = [
        " ".join(words[int(i)] for i in torch.randint(0, len(words), (9,), generator=g))
        for _ in range(60)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def state(run_dir):
    return torch.load(os.path.join(run_dir, "checkpoint.pt"), weights_only=True)


def test_run_folder_and_results(text_file, tmp_path):
    run = str(tmp_path / "run")
    results = train_lm(tiny(), text_file, run, OPTIONS, context=8, quiet=True)
    assert sorted(os.listdir(run)) == [
        "best.pt",
        "checkpoint.pt",
        "config.json",
        "metrics.jsonl",
        "results.json",
        "vocab.json",
    ]
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        assert json.load(fh) == json.loads(json.dumps(results))
    assert results["metric"] == "bpc" and results["steps"] == 6
    assert set(results["test"]) == {"8", "16"}
    for entry in results["test"].values():
        assert entry["bpc"] > 0 and entry["tokens"] == results["splits"]["test"] - 1
    assert results["train_seconds"] >= 0 and results["best_step"] in (3, 6)
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as fh:
        assert [json.loads(x)["step"] for x in fh] == [3, 6]
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    assert config["task"] == "lm" and config["model"]["max_len"] == 8
    # re-scoring the best weights reproduces the test entry, and any length works
    again = evaluate_lm_run(run)
    assert again["16"]["bpc"] == pytest.approx(results["test"]["16"]["bpc"], rel=1e-6)
    assert set(evaluate_lm_run(run, 5)) == {"5"}
    with pytest.raises(RunError, match="already exists"):
        train_lm(tiny(), text_file, run, OPTIONS, context=8, quiet=True)


def test_resume_after_a_kill_equals_an_uninterrupted_run(text_file, tmp_path):
    config = tiny("t5", dropout=0.2)  # dropout: the RNG state must be restored too
    options = LMOptions(steps=9, batch_size=4, eval_every=3, eval_multiples=(1, 2))
    whole = train_lm(config, text_file, str(tmp_path / "whole"), options, context=8, quiet=True)

    def kill(step, metrics):
        if step == 6:
            raise KeyboardInterrupt

    run = str(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        train_lm(config, text_file, run, options, context=8, quiet=True, callback=kill)
    assert state(run)["step"] == 6 and not os.path.exists(os.path.join(run, "results.json"))
    resumed = resume_lm(run, quiet=True)
    assert resumed["test"] == whole["test"] and resumed["dev"] == whole["dev"]
    a, b = state(str(tmp_path / "whole"))["model"], state(run)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(RunError, match="already complete"):
        resume_lm(run, quiet=True)
    extended = resume_lm(run, steps=12, quiet=True)
    assert extended["steps"] == 12


def test_trainable_table_reports_na_beyond_the_training_context(text_file, tmp_path):
    results = train_lm(
        tiny("trainable"), text_file, str(tmp_path / "r"), OPTIONS, context=8, quiet=True
    )
    assert results["test"]["8"]["bpc"] > 0
    assert results["test"]["16"]["bpc"] is None and "max_len=8" in results["test"]["16"][NA]


def test_word_tokens_give_perplexity(text_file, tmp_path):
    results = train_lm(
        tiny("none"), text_file, str(tmp_path / "w"), OPTIONS, tokens="word", context=4, quiet=True
    )
    assert results["metric"] == "perplexity"
    assert 1 < results["test"]["4"]["perplexity"] < 100
    assert results["dev"]["perplexity"] > 1


def test_generation_is_deterministic_for_a_seed(text_file, tmp_path):
    run = str(tmp_path / "g")
    train_lm(tiny(), text_file, run, OPTIONS, context=8, quiet=True)
    one = generate_text(run, "the quick", 30, seed=3)
    assert generate_text(run, "the quick", 30, seed=3) == one and len(one) == 30
    assert generate_text(run, "the quick", 30, seed=4) != one
    loaded = load_lm_run(run)
    ids = loaded.vocab.encode(list("the quick"))
    greedy = generate(loaded.model, ids, 5, temperature=0, context=8)
    seq = ids.clone()  # greedy decoding by hand, on the last 8 tokens
    for _ in range(5):
        with torch.no_grad():
            nxt = loaded.model(seq[-8:][None])[0, -1]
        nxt[:2] = float("-inf")
        seq = torch.cat([seq, nxt.argmax().view(1)])
    assert torch.equal(greedy, seq[len(ids) :])


# -- synthetic tasks --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_synthetic_targets_are_the_answer_and_eos(name):
    task = SyntheticTask(name, 4)
    prompts = [torch.tensor([4, 5, 6]), torch.tensor([7])]
    ids, targets, mask = task.collate(prompts)
    answer = [4, 5, 6] if name == "copy" else [6, 5, 4]
    assert ids[0].tolist() == [4, 5, 6, task.sep, *answer]
    assert targets[0].tolist() == [-100, -100, -100, *answer, task.eos]
    assert ids[1, :3].tolist() == [7, task.sep, 7] and mask[1].tolist() == [False] * 3 + [True] * 4
    assert targets[1].tolist() == [-100, 7, task.eos] + [-100] * 4
    assert [b[1:] for b in task.bins()] == [(1, 4), (5, 8), (9, 16)]


def test_batched_greedy_answers_equal_one_prompt_at_a_time():
    task = SyntheticTask("reverse", 4)
    model = build_model(tiny(vocab_size=len(task.vocab), max_len=40), dtype=torch.float64)
    prompts = task.test_prompts(1, 8)[:6]
    batched = task.greedy_answers(model, prompts)
    for p, got in zip(prompts, batched):
        seq = torch.cat([p, torch.tensor([task.sep])])
        for _ in range(len(p) + 1):
            with torch.no_grad():
                seq = torch.cat([seq, model(seq[None])[0, -1].argmax().view(1)])
        assert torch.equal(got, seq[len(p) + 1 :])


def test_synthetic_run_scores_every_bin(tmp_path):
    options = LMOptions(steps=4, batch_size=8, eval_every=2)
    results = train_lm(
        tiny("trainable"), "synthetic:copy", str(tmp_path / "s"), options, context=3, quiet=True
    )
    assert results["metric"] == "accuracy" and list(results["test"]) == ["1-3", "4-6", "7-12"]
    assert 0 <= results["test"]["1-3"]["accuracy"] <= 1 and results["test"]["1-3"]["n"] == 100
    assert results["test"]["4-6"]["accuracy"] is None  # 13 inputs > max_len 7
    assert "max_len=7" in results["test"]["4-6"][NA]
    # every evaluation records the dev exact match; the best one is that of best.pt
    with open(tmp_path / "s" / "metrics.jsonl") as f:
        history = [json.loads(line) for line in f]
    assert [m["step"] for m in history] == [2, 4]
    assert all(0 <= m["dev_accuracy"] <= 1 and m["dev_loss"] > 0 for m in history)
    best = [m for m in history if m["best"]][-1]
    assert best["dev_accuracy"] == results["dev"]["accuracy"]
    task = SyntheticTask("copy", 3)
    loaded = load_lm_run(str(tmp_path / "s"))
    assert task.accuracy(loaded.model, task.dev_prompts()) == best["dev_accuracy"]
    rotary = train_lm(
        tiny("rotary"), "synthetic:reverse", str(tmp_path / "r"), options, context=3, quiet=True
    )
    assert all(entry["accuracy"] is not None for entry in rotary["test"].values())
    assert set(evaluate_lm_run(str(tmp_path / "r"), 5)) == {"5"}
    answer = generate_text(str(tmp_path / "r"), "abc", None, temperature=0)
    assert len(answer.split()) == 4


def test_training_batches_are_random_windows_and_their_next_tokens(text_file):
    task = make_task(text_file, "char", 8)
    ids, targets, mask = task.batch(step=5, seed=1, batch_size=6)
    assert ids.shape == targets.shape == (6, 8) and mask is None
    stream = task.data.train.tolist()
    for row, nxt in zip(ids.tolist(), targets.tolist()):
        starts = [s for s in range(len(stream) - 8) if stream[s : s + 8] == row]
        assert any(stream[s + 1 : s + 9] == nxt for s in starts)
    again, _, _ = task.batch(step=5, seed=1, batch_size=6)
    assert torch.equal(again, ids)  # a function of (seed, step)
    assert not torch.equal(task.batch(step=6, seed=1, batch_size=6)[0], ids)
    g = torch.Generator().manual_seed(1 * 1_000_003 + 5)  # the windows committed grids drew
    assert torch.equal(ids[:, 0], task.data.train[torch.randint(0, len(stream) - 8, (6,),
                                                                generator=g)])  # fmt: skip
    big = 2**63 - 1  # the largest seed --seeds takes
    assert not torch.equal(task.batch(step=5, seed=big, batch_size=6)[0],
                           task.batch(step=5, seed=big - 1, batch_size=6)[0])  # fmt: skip


def test_the_decoder_builds_its_encoding_causal(monkeypatch):
    import cplxnet.models.decoder as decoder_module

    seen = {}
    original = decoder_module.create_encoding

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(decoder_module, "create_encoding", spy)
    build_model(tiny("t5"))
    assert seen["causal"] is True


class _Failing(nn.Module):
    """A model whose forward raises (a length it cannot score)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, *args, **kwargs):
        raise ValueError("cannot score this length")


@pytest.mark.parametrize(
    "score",
    [
        lambda m: score_stream(m, torch.arange(10), 4),
        lambda m: SyntheticTask("copy", 4).loss(m, [torch.tensor([4, 5])]),
        lambda m: SyntheticTask("copy", 4).greedy_answers(m, [torch.tensor([4, 5])]),
        lambda m: SyntheticTask("copy", 4).accuracy(m, [torch.tensor([4, 5])]),
        lambda m: batch_logits(m, [[2, 3]], 4),
        lambda m: attention_by_distance(m, torch.zeros(1, 3, dtype=torch.long)),
        lambda m: list(stream(m, torch.tensor([2]), 1)),
    ],
    ids=["score_stream", "loss", "greedy_answers", "accuracy", "batch_logits", "inspect", "stream"],
)
def test_an_evaluation_that_raises_gives_the_model_back_in_training_mode(score):
    model = _Failing().train()
    with pytest.raises(ValueError, match="cannot score"):
        score(model)
    assert model.training  # a loop that skips the length keeps training with dropout


def test_evaluating_runs_the_block_in_eval_mode_and_restores_either_mode():
    model = nn.Sequential(nn.Dropout(0.5))
    for was in (True, False):
        model.train(was)
        with evaluating(model):
            assert not model.training and not model[0].training
        assert model.training is was and model[0].training is was


def test_attention_by_distance_measures_a_training_model_without_dropout():
    config = make_config("decoder", encoding="alibi", d_model=8, num_heads=2, dim_feedforward=16,
                         num_layers=2, vocab_size=9, max_len=8, dropout=0.5)  # fmt: skip
    model = build_model(config, dtype=torch.float64).eval()
    ids = torch.randint(2, 9, (3, 6))
    expected = attention_by_distance(model, ids)
    model.train()
    got = attention_by_distance(model, ids)
    assert model.training and all(torch.equal(a, b) for a, b in zip(got, expected))
