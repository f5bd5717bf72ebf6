"""Data-parallel language-model training (``torchrun -m cplxnet train --task lm``, gloo, CPU)
equals one process.

Two ranks started as torchrun starts them (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``) run the
``cplxnet train --task lm`` command line; each takes its share of every step's windows. After a
few steps the weights, the training losses of metrics.jsonl and the test scores equal those of
one process given the same command (dropout off). The batch of 5 windows splits 3 + 2, and the
synthetic copy task ignores its prompt positions, so the ranks' shares count different numbers
of targets: the loss scaling must still give the step's mean over all of them."""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks

from cplxnet.cli import main

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")

COMMON = ["--task", "lm", "--d-model", "8", "--set", "num_layers=1", "--set",
          "dim_feedforward=16", "--set", "num_heads=2", "--dropout", "0", "--steps", "4",
          "--eval-every", "2", "--batch-size", "5", "--lr", "0.01", "--quiet"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_rank(rank: int, world: int, runs: list[tuple[int, list[str]]]) -> None:
    """One rank, with the environment torchrun gives it (spawned by the test). Each run gets a
    port of its own, as each torchrun launch does: a rank that starts the next run must not reach
    the store rank 0 still holds for the last one."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1")  # fmt: skip
    torch.set_num_threads(1)
    for port, argv in runs:
        os.environ["MASTER_PORT"] = str(port)
        status = main(argv)
        if status != 0:
            raise SystemExit(f"rank {rank}: cplxnet {' '.join(argv)} exited with {status}")


def run_ranks(runs: list[list[str]], world: int = 2) -> None:
    """The command lines ``runs`` one after another in ``world`` spawned ranks, each on a port
    of its own."""
    ports: list[int] = []
    while len(ports) < len(runs):
        port = free_port()
        if port not in ports:
            ports.append(port)
    spawn_ranks(torchrun_rank, (world, list(zip(ports, runs))), nprocs=world)


def read(run: str, name: str):
    path = os.path.join(run, name)
    if name.endswith(".pt"):
        return torch.load(path, weights_only=True)
    with open(path, encoding="utf-8") as fh:
        if name.endswith(".jsonl"):
            return [json.loads(line) for line in fh]
        return json.load(fh)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm-ddp") / "text.txt"
    words = [
        "the",
        "cat",
        "sat",
        "on",
        "a",
        "mat",
        "and",
        "a",
        "dog",
        "ran",
        "to",
        "the",
        "park",
        "by",
        "the",
        "river",
    ]
    g = torch.Generator().manual_seed(0)
    picks = torch.randint(0, len(words), (3000,), generator=g).tolist()
    path.write_text(" ".join(words[i] for i in picks), encoding="utf-8")
    return str(path)


def test_two_processes_equal_one(tmp_path, text_file):
    sources = {"copy": ["--data", "synthetic:copy", "--context", "6"],
               "text": ["--data", text_file, "--context", "8"]}  # fmt: skip
    runs = [["train", *COMMON, *argv, "--run-dir", str(tmp_path / f"ddp-{name}")]
            for name, argv in sources.items()]  # fmt: skip
    run_ranks(runs)
    for name, argv in sources.items():
        ddp, single = str(tmp_path / f"ddp-{name}"), str(tmp_path / f"single-{name}")
        assert main(["train", *COMMON, *argv, "--run-dir", single]) == 0
        a, b = read(ddp, "checkpoint.pt"), read(single, "checkpoint.pt")
        assert a["step"] == b["step"] == 4
        for key, value in b["model"].items():
            got = a["model"][key]
            if key.endswith("in_proj_bias"):
                # the key bias adds q.b_k to every score of a query: the softmax ignores it, so
                # its gradient is rounding noise that Adam's normalised step makes lr-sized
                d = value.shape[0] // 3
                got, value = (
                    torch.cat([got[:d], got[2 * d :]]),
                    torch.cat([value[:d], value[2 * d :]]),
                )
            torch.testing.assert_close(got, value, rtol=0, atol=2e-6, msg=key)
        ma, mb = read(ddp, "metrics.jsonl"), read(single, "metrics.jsonl")
        assert [m["step"] for m in ma] == [m["step"] for m in mb] == [2, 4]
        for x, y in zip(ma, mb):
            assert x["train_loss"] == pytest.approx(y["train_loss"], abs=1e-6)
            assert x["dev_loss"] == pytest.approx(y["dev_loss"], abs=1e-5)
        ra, rb = read(ddp, "results.json"), read(single, "results.json")
        assert ra["best_step"] == rb["best_step"] and ra["test"].keys() == rb["test"].keys()
        metric = rb["metric"]
        for key, entry in rb["test"].items():
            if entry.get(metric) is not None:
                assert ra["test"][key][metric] == pytest.approx(entry[metric], abs=1e-5), key
        assert read(ddp, "config.json")["world_size"] == 2
        assert read(single, "config.json")["world_size"] == 1
        # only rank 0 wrote: the same files as one process, in the folder asked for
        assert sorted(os.listdir(ddp)) == sorted(os.listdir(single))
    # a run of two processes resumes in one (with a note that it is not bit-identical)
    ddp = str(tmp_path / "ddp-copy")
    assert main(["train", "--resume", ddp, "--steps", "6", "--quiet"]) == 0
    assert [m["step"] for m in read(ddp, "metrics.jsonl")] == [2, 4, 6]


@pytest.mark.slow  # two spawned ranks, three runs
def test_a_two_rank_run_resumed_in_two_ranks_equals_one_uninterrupted(tmp_path):
    """With dropout on, the ranks' random states differ (their shares of the batch are 3 and 2
    windows): a resume must give each rank its own state back, so that steps 5-8 after the
    resume equal those of a run that never stopped, weight for weight."""
    # the later flag wins: dropout 0.1, and 8 steps for the uninterrupted run
    base = ["train", *COMMON, "--dropout", "0.1", "--schedule", "constant", "--data",
            "synthetic:copy", "--context", "6"]  # fmt: skip
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    run_ranks([[*base, "--steps", "8", "--run-dir", whole],
               [*base, "--run-dir", parts],
               ["train", "--resume", parts, "--steps", "8", "--quiet"]])  # fmt: skip
    a, b = read(whole, "checkpoint.pt"), read(parts, "checkpoint.pt")
    assert a["step"] == b["step"] == 8
    for key, value in a["model"].items():
        torch.testing.assert_close(b["model"][key], value, rtol=0, atol=0, msg=key)
    assert [m["train_loss"] for m in read(whole, "metrics.jsonl")] == [
        m["train_loss"] for m in read(parts, "metrics.jsonl")
    ]
