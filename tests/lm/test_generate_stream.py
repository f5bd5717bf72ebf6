"""``generate``: the temperature shapes the samples, tokens stream as they are produced, Ctrl-C
keeps the text so far (exit 130), and ``--max-new-tokens`` (alias ``--tokens``)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time

import pytest
from lm_cli_args import TINY_LM as TINY

from cplxnet.cli import main
from cplxnet.tasks.lm import generate_text, load_lm_run
from cplxnet.tasks.lm.generate import stream, stream_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    text = tmp_path_factory.mktemp("gen") / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 60, encoding="utf-8")
    folder = str(tmp_path_factory.mktemp("gen-run") / "run")
    assert main(["train", "--data", str(text), "--context", "8", "--run-dir", folder, *TINY]) == 0
    return folder


def test_temperature_changes_the_text_and_a_seed_repeats_it(run):
    cold = generate_text(run, "the", 60, temperature=0.5, seed=7)
    hot = generate_text(run, "the", 60, temperature=3.0, seed=7)
    assert cold != hot and len(cold) == len(hot) == 60
    assert generate_text(run, "the", 60, temperature=0.5, seed=7) == cold
    assert generate_text(run, "the", 60, temperature=3.0, seed=7) == hot


def test_temperature_divides_the_logits(run, monkeypatch):
    """Sampling draws from softmax(logits / T): with T = 2 and logits 2 * l the draws equal
    those of T = 1 and logits l."""
    loaded = load_lm_run(run)
    model = loaded.model
    ids = loaded.vocab.encode(list("the"))
    plain = list(stream(model, ids, 40, temperature=1.0, seed=3))
    forward = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, *a, **k: 2 * forward(self, *a, **k))
    assert list(stream(model, ids, 40, temperature=2.0, seed=3)) == plain
    assert list(stream(model, ids, 40, temperature=1.0, seed=3)) != plain


def test_tokens_stream_lazily(run):
    pieces = stream_text(run, "the", 10**9, seed=1)  # a billion tokens: only what is taken runs
    first = list(itertools.islice(pieces, 5))
    assert "".join(first) == generate_text(run, "the", 5, seed=1)


def test_max_new_tokens_and_its_alias(run, capsys):
    assert main(["generate", run, "the", "--max-new-tokens", "9", "--seed", "4"]) == 0
    new = capsys.readouterr().out
    assert main(["generate", run, "the", "--tokens", "9", "--seed", "4"]) == 0
    assert capsys.readouterr().out == new and len(new) == 10
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    help_text = capsys.readouterr().out
    assert "--max-new-tokens" in help_text and "--tokens" not in help_text


def test_top_k_from_the_command_line(run, capsys):
    """``--top-k 1`` is greedy at any temperature; ``--top-k`` reaches the sampler."""
    assert main(["generate", run, "the", "--tokens", "20", "--temperature", "0"]) == 0
    greedy = capsys.readouterr().out
    argv = ["generate", run, "the", "--tokens", "20", "--temperature", "5", "--seed", "2"]
    assert main([*argv, "--top-k", "1"]) == 0
    assert capsys.readouterr().out == greedy
    assert main(argv) == 0
    assert capsys.readouterr().out != greedy
    assert generate_text(run, "the", 20, temperature=5, seed=2, top_k=1) + "\n" == greedy


@pytest.mark.slow
def test_ctrl_c_keeps_the_text_so_far(run):
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cplxnet", "generate", run, "the", "--max-new-tokens",
         "1000000000", "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        got = b""
        deadline = time.monotonic() + 120
        while len(got) < 20 and time.monotonic() < deadline:  # tokens arrive before the end
            got += os.read(proc.stdout.fileno(), 64)
        assert len(got) >= 20 and proc.poll() is None
        proc.send_signal(signal.SIGINT)
        try:
            rest, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # show where it waits: faulthandler dumps on SIGABRT
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail("generate did not end within 60 s of Ctrl-C; its stacks:\n"
                        + err.decode(errors="replace")[-4000:])  # fmt: skip
    finally:
        if proc.poll() is None:
            proc.kill()
    out = (got + rest).decode()
    assert proc.returncode == 130, err
    assert out.endswith("\n") and len(out) > 20 and "Traceback" not in err.decode()
    # streamed: the first characters came long before a pipe buffer's worth (4096) was written
    print(len(out))
    assert len(out) < 4096
