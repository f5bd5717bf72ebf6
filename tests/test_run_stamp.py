"""A default run-folder name is the same on every rank of a data-parallel run: the time stamp
is rank 0's (a broadcast), not each rank's own clock, which can differ by a second."""

from __future__ import annotations

import re
from types import SimpleNamespace

from cplxnet.cli.lm import default_lm_run_dir
from cplxnet.cli.train import default_run_dir
from cplxnet.engine import runtime

RANK0 = "20260101-000000"


def as_rank_1(monkeypatch) -> list[list[str]]:
    """This process as rank 1 of 2, receiving :data:`RANK0` from rank 0's broadcast."""
    sent: list[list[str]] = []

    def broadcast(holder, src):
        assert src == 0
        sent.append(list(holder))
        holder[0] = RANK0

    monkeypatch.setattr(runtime, "dist_info", lambda: (2, 1))
    monkeypatch.setattr(runtime.dist, "broadcast_object_list", broadcast)
    return sent


def test_run_stamp_is_rank_0_s(monkeypatch):
    own = runtime.run_stamp()
    assert re.fullmatch(r"\d{8}-\d{6}", own)
    sent = as_rank_1(monkeypatch)
    assert runtime.run_stamp() == RANK0 and len(sent) == 1


def test_default_run_folders_of_both_tasks_take_rank_0_s_stamp(monkeypatch):
    as_rank_1(monkeypatch)
    config = SimpleNamespace(family="cnn", encoding="complex-order", complex=True)
    path = default_run_dir(SimpleNamespace(data="mr"), config)
    assert path.endswith(RANK0), path
    lm = SimpleNamespace(family="decoder", encoding="rotary", complex=False)
    assert default_lm_run_dir("mr", lm).endswith(RANK0)
