"""Data-parallel training (DistributedDataParallel, gloo, CPU) equals one process.

Two processes, each taking half of every global batch, must end one optimiser step with the
parameters of a single process that sees the whole batch (dropout off). The global batch is odd
(15), so the two shards differ in size: the loss scaling must still give the global mean.
Checked with dense gradients and with sparse embedding gradients (SparseAdam).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import test_train_zoo as toy
import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks

from cplxnet.data import DataSpec, prepare_data
from cplxnet.tasks.classify.task import load_checkpoint, train

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable"),
    pytest.mark.slow,  # two spawned processes
]


def test_two_processes_equal_one_after_one_step(tmp_path):
    toy_file = toy.write_toy_tsv(tmp_path / "toy.tsv", n=100)
    modes = {"dense": False, "sparse": True}
    runs = [(str(tmp_path / f"ddp-{name}"), sparse) for name, sparse in modes.items()]
    spawn_ranks(toy.ddp_train_worker, (2, str(tmp_path / "init"), toy_file, runs))
    zoo = sys.modules[toy.__name__]
    for name, sparse in modes.items():
        ddp_run, single_run = str(tmp_path / f"ddp-{name}"), str(tmp_path / f"single-{name}")
        data = prepare_data(DataSpec(toy_file))
        config = toy.make_config(d_model=8, dropout=0.0)
        train(config, data, single_run, toy.ddp_options(sparse), zoo=zoo, quiet=True)
        a = load_checkpoint(os.path.join(ddp_run, "checkpoint.pt"))
        b = load_checkpoint(os.path.join(single_run, "checkpoint.pt"))
        assert a["step"] == b["step"] == 1
        assert len(b["optimizers"]) == (2 if sparse else 1)
        for key, value in b["model"].items():
            torch.testing.assert_close(a["model"][key], value, rtol=0, atol=1e-6, msg=key)
        # the step moved every parameter tensor away from its (seeded) initialisation
        torch.manual_seed(4)
        init = toy.build_model(
            toy.make_config(vocab_size=len(data.vocab), d_model=8, sparse_embeddings=sparse)
        ).state_dict()
        for key, value in init.items():
            assert not torch.equal(value, b["model"][key]), key
        # only rank 0 wrote the folder; the epoch's training metrics cover the whole batch
        with open(os.path.join(ddp_run, "config.json")) as fh:
            assert json.load(fh)["world_size"] == 2
        assert os.path.exists(os.path.join(ddp_run, "results.json"))
        ma, mb = a["history"][0], b["history"][0]
        assert ma["train_loss"] == pytest.approx(mb["train_loss"], abs=1e-6)
        assert ma["train_accuracy"] == mb["train_accuracy"]


_GROUP_FREED = """
import gc, os, sys
import cplxnet  # as a user's script does, before joining the group
import torch.distributed as dist
from cplxnet.engine.runs import check_model_memory
import cplxnet.models
from cplxnet.models import make_config

dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
check_model_memory(make_config("transformer", vocab_size=10, num_classes=2, d_model=8),
                   sys.modules["cplxnet.models"])  # a meta build: loads torch._dynamo
import torch.distributed.nn.functional as F
held = sorted(n for n, f in vars(F).items() if callable(f) and any(
    isinstance(v, dist.ProcessGroup) for v in getattr(f, "__defaults__", None) or ()))
dist.destroy_process_group()
gc.collect()
task = "/proc/self/task"  # Linux: the names of the process's threads
names = os.listdir(task) if os.path.isdir(task) else []
threads = [open(f"{task}/{t}/comm").read().strip() for t in names]
print(held, [t for t in threads if "gloo" in t])
"""


def test_a_destroyed_process_group_is_freed_after_a_meta_build(tmp_path):
    """``torch.distributed.nn`` binds ``group.WORLD`` as default arguments when imported; after
    ``init_process_group`` (as a meta build's ``torch._dynamo`` import did) they held the group, its
    gloo threads outlived ``destroy_process_group`` and the process aborted at exit now and then.
    ``import cplxnet`` imports it first: nothing holds the group and its threads end."""
    p = subprocess.run([sys.executable, "-c", _GROUP_FREED, str(tmp_path / "init")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "[] []", p.stdout
