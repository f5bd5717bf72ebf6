"""A cplxnet error under ``torchrun``: the ranks print cplxnet's one line (rank 0 only) and no
traceback, exit non-zero, and leave the line in torchrun's error file, so torchrun's own report
(its ChildFailedError traceback and summary, which the ranks cannot turn off: see
:func:`cplxnet.cli.options.fail`) quotes it as the root cause."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch.distributed as dist

pytestmark = pytest.mark.slow  # a subprocess per rank

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path, **extra)


@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_rank_prints_one_line_exits_2_and_fills_the_error_file(tmp_path, rank):
    """A usage error in a rank as torchrun starts it (its environment variables)."""
    error_file = tmp_path / "error.json"
    env = _env(RANK=rank, LOCAL_RANK=rank, WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT="29999", TORCHELASTIC_RUN_ID="t",
               TORCHELASTIC_ERROR_FILE=str(error_file))  # fmt: skip
    p = subprocess.run([sys.executable, "-m", "cplxnet", "train", "--epochs", "0"], env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2
    assert p.stdout == ""
    if rank == "0":
        assert p.stderr.startswith("cplxnet: error: argument --epochs")
        assert p.stderr.count("\n") == 1
    else:
        assert p.stderr == ""  # the other ranks say nothing
    data = json.loads(error_file.read_text())
    assert data["message"].startswith("cplxnet: error: argument --epochs")
    assert isinstance(data["timestamp"], int)


@pytest.mark.skipif(
    not dist.is_available() or shutil.which("torchrun") is None, reason="no torchrun"
)
def test_torchrun_reports_cplxnet_s_line_as_the_root_cause(tmp_path):
    p = subprocess.run(
        ["torchrun", "--standalone", "--nproc_per_node=2", "-m", "cplxnet", "train", "--data",
         str(tmp_path / "missing.tsv"), "--quiet"],
        env=_env(), capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode != 0
    ours = [line for line in p.stderr.splitlines() if line.startswith("cplxnet: error: ")]
    assert len(ours) == 1 and "missing.tsv" in ours[0], p.stderr
    assert "cplxnet/cli" not in p.stderr and "RunError" not in p.stderr  # no rank's traceback
    root = p.stderr.split("Root Cause", 1)[1]
    assert f"traceback : {ours[0]}" in root, p.stderr
    assert "To enable traceback see" not in root
