"""``cplxnet compare`` / ``cplxnet report`` end to end on the tiny synthetic task."""

from __future__ import annotations

import csv
import os
import sys

import pytest

from cplxnet.cli import main

TINY = [
    "--data", "synthetic", "--families", "fasttext", "--seeds", "2", "--epochs", "1",
    "--set", "d_model=8", "--synthetic-size", "40", "--synthetic-vocab", "5", "--train-len", "6",
    "--threads", "1",
]  # fmt: skip


@pytest.mark.slow
def test_compare_runs_reports_and_resumes(tmp_path, capsys):
    out = str(tmp_path / "out")
    args = ["compare", *TINY, "--encodings", "none,complex-order", "--out", out]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "grid: 4 cells, 0 already done; 4 to run" in printed
    assert "[4/4] synthetic fasttext complex-order complex seed 1: dev" in printed
    assert "| fasttext |" in printed and "(n=2, min p = " in printed
    with open(os.path.join(out, "results.csv"), encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["encoding"], r["number"], r["seed"]) for r in rows] == [
        ("none", "real", "0"),
        ("complex-order", "complex", "0"),
        ("none", "real", "1"),
        ("complex-order", "complex", "1"),
    ]
    assert all(r["status"] == "ok" and r["epochs_run"] == "1" for r in rows)
    for name in ("report.md", "accuracy.png", "grid.json", "results.json"):
        assert os.path.exists(os.path.join(out, name))
    assert main(args) == 0
    assert "4 already done; 0 to run" in capsys.readouterr().out
    assert main(["report", out, "--no-plot", "--digits", "2"]) == 0
    assert "complex-order vs best real" in capsys.readouterr().out


def test_compare_dry_run_and_errors(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main(["compare", *TINY, "--encodings", "table4", "--dry-run", "--out", out]) == 0
    printed = capsys.readouterr().out
    assert "12 cells" in printed and not os.path.exists(out)
    assert main(["compare", *TINY, "--encodings", "nope", "--out", out]) == 1
    assert "unknown encoding 'nope'" in capsys.readouterr().err
    assert main(["compare", *TINY, "--folds", "1-10", "--data", "mr", "--out", out]) == 1
    assert "numbered 0..9" in capsys.readouterr().err
    assert main(["compare", *TINY, "--encodings", "rotary", "--out", out]) == 1
    assert "has no attention" in capsys.readouterr().err


def test_compare_executor_errors_are_one_line(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "out")
    argv = ["compare", *TINY, "--encodings", "none", "--out", out]
    assert main([*argv, "--scheduler", "tcp://x:8786"]) == 1
    assert capsys.readouterr().err == (
        "cplxnet: error: --scheduler applies to --executor dask only; add --executor dask or "
        "drop it\n"
    )
    assert main([*argv, "--executor", "dask", "--scheduler", "tcp://x:8786", "--jobs", "2"]) == 1
    assert "with --scheduler the cluster's own workers run the cells" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask were not installed
    assert main([*argv, "--executor", "dask"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: --executor dask needs Dask's distributed scheduler")
    assert 'pip install "cplxnet[dask]"' in err and err.count("\n") == 1
    assert not os.path.exists(out)
