"""``cplxnet compare`` checks its inputs before the grid starts (data files as ``cplxnet train``
reads them, seeds, empty axes; ``--task lm`` as ``train --task lm``) and bounds every count it
expands before expanding it: one line, a non-zero exit, nothing written."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from cplxnet.cli import main
from cplxnet.compare.grid.cells import MAX_CELLS, MAX_SEEDS

BASE = ["compare", "--families", "fasttext", "--encodings", "none", "--epochs", "1",
        "--threads", "1"]  # fmt: skip
LM = ["compare", "--task", "lm", "--encodings", "none", "--steps", "1", "--threads", "1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    (d / "zero.tsv").write_bytes(b"")
    (d / "header.tsv").write_text("label\ttext\n", encoding="utf-8")
    (d / "binary.tsv").write_bytes(bytes(range(256)) * 4)
    (d / "short.tsv").write_text("label\ttext\npos\tgood\nneg\tbad\n", encoding="utf-8")
    (d / "short.txt").write_text("a short text", encoding="utf-8")
    (d / "zero.txt").write_bytes(b"")
    return d


def one_error(capsys, argv: list[str], status: int) -> str:
    """The one error line of ``argv`` (a usage error raises SystemExit(2) from argparse)."""
    try:
        got = main(argv)
    except SystemExit as exit_info:
        got = exit_info.code
    assert got == status
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "runs," not in captured.out  # the grid never started
    return err


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("missing.tsv", "file not found"),
        ("zero.tsv", "empty"),
        ("header.tsv", "no examples"),
        ("binary.tsv", "UTF-8"),
        ("short.tsv", "splits are empty"),
        ("synthetic:nonsense", "add --task lm"),
        ("synthetic:copy", "add --task lm"),
    ],
)
def test_bad_data_is_refused_before_the_grid(files, tmp_path, capsys, dry, data, match):
    path = data if data.startswith("synthetic:") else str(files / data)
    out = tmp_path / "out"
    err = one_error(capsys, [*BASE, "--data", path, "--out", str(out), *dry], 1)
    assert match in err and not out.exists()


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
@pytest.mark.parametrize(
    ("extra", "match"),
    [(["--train-len", "1"], "min_len must be in [2, train_len=1]"),
     (["--train-len", "synthetic=0"], "min_len must be in [2, train_len=0]"),
     (["--synthetic-size", "1"], "n_train must be at least 2, got 1")],
)  # fmt: skip
def test_a_synthetic_task_that_cannot_be_made_is_refused_before_the_grid(
    tmp_path, capsys, dry, extra, match
):
    out = tmp_path / "out"
    err = one_error(capsys, [*BASE, "--data", "synthetic", "--out", str(out), *extra, *dry], 1)
    assert f"--data synthetic: the task cannot be made ({match}" in err and not out.exists(), err


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--seeds=-1"], "seed -1 is out of range"),
        (["--seeds", "3,-2"], "seed -2 is out of range"),
        (["--seeds", f"{2**63}-{2**63 + 1}"], "out of range"),
        (["--families", ""], "--families: nothing given"),
        (["--families", " , "], "--families: nothing given"),
        (["--number", ""], "no number field"),
        (["--seeds", str(MAX_SEEDS + 1)], f"limit of {MAX_SEEDS:,}"),
        (["--seeds", f"0-{MAX_SEEDS}"], "MAX_SEEDS"),  # (the billion: in a limited process)
    ],
)
def test_bad_axes_are_usage_errors(tmp_path, capsys, extra, match):
    out = tmp_path / "out"
    err = one_error(capsys, [*BASE, "--data", "mr", "--out", str(out), "--dry-run", *extra], 2)
    assert match in err and not out.exists()


def test_a_field_suffix_in_a_classification_grid_points_at_number(tmp_path, capsys):
    out = tmp_path / "out"
    argv = [*BASE, "--data", "mr", "--encodings", "none,complex-order@both", "--out", str(out)]
    err = one_error(capsys, argv, 1)
    assert "a field suffix such as @both is for --task lm grids" in err and "--number" in err
    assert not out.exists()


def test_a_huge_fold_range_is_bounded(tmp_path, capsys):
    argv = [*BASE, "--data", "mr", "--folds", "0-1000000", "--dry-run"]
    assert "more than the limit of 10" in one_error(capsys, argv, 1)


def test_empty_data_list_is_refused(tmp_path, capsys):
    assert "--data: nothing given" in one_error(capsys, [*BASE, "--data", "", "--dry-run"], 1)


def test_the_cell_count_is_bounded_before_any_model_is_built(tmp_path, capsys, monkeypatch):
    import cplxnet.compare.grid.expand as expand

    def never(*args, **kwargs):
        raise AssertionError("a combination was checked before the cell count")

    monkeypatch.setattr(expand, "check_combination", never)
    # 1000 seeds x 10 folds x 2 families x 5 encodings x 2 number fields = 200,000 cells
    argv = [
        "compare",
        "--data",
        "mr",
        "--folds",
        "all",
        "--families",
        "fasttext,cnn",
        "--number",
        "both",
        "--seeds",
        "1000",
        "--dry-run",
        "--out",
        str(tmp_path / "o"),
    ]
    err = one_error(capsys, argv, 1)
    assert "200,000" in err and f"{MAX_CELLS:,}" in err and "MAX_CELLS" in err


@pytest.mark.slow
@pytest.mark.parametrize("seeds", ["1000000000", "0-1000000000"])
def test_a_billion_seeds_ends_at_once_with_bounded_memory(tmp_path, seeds):
    """The command of issue 28 item 10, in a process limited to 2 GiB (it grew to 23 GB)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-m", "cplxnet", "compare", "--dry-run", "--seeds", seeds,
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=120, preexec_fn=limit,
    )  # fmt: skip
    assert p.returncode == 2 and "MAX_SEEDS" in p.stderr and p.stderr.count("\n") == 1, p.stderr


# -- compare --task lm refuses what train --task lm refuses ----------------------------------


@pytest.mark.parametrize(
    ("extra", "match", "status"),
    [
        (["--seeds=-1"], "seed -1 is out of range", 2),
        (["--set", "max_len=5"], "takes max_len from --context", 1),
        (["--set", "decoder.vocab_size=5"], "takes vocab_size", 1),
        (["--data", "synthetic:nonsense"], "unknown synthetic task", 1),
        (["--data", "missing.txt"], "no such file", 1),
        (["--data", "{files}/zero.txt"], "empty", 1),
        (["--data", "{files}/short.txt"], "--context", 1),
        (["--data", "{files}/binary.tsv"], "UTF-8", 1),
        (["--data", ""], "--data: nothing given", 1),
        (["--seeds", str(MAX_SEEDS + 1)], "MAX_SEEDS", 2),
        (["--encodings", "complex-order@both:phase=false"],
         "the field suffix @both ends an encoding's item, after its options", 1),
    ],
)  # fmt: skip
@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_lm_grid_refuses_what_train_refuses(files, tmp_path, capsys, extra, match, status, dry):
    extra = [e.replace("{files}", str(files)) for e in extra]
    out = tmp_path / "out"
    err = one_error(capsys, [*LM, "--out", str(out), *extra, *dry], status)
    assert match in err and not out.exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([*BASE, "--data", "trec", "--encodings", "sinusoidal,sinusoidal:base=10000"],
         "sinusoidal and sinusoidal:base=10000 are one encoding"),
        ([*LM, "--encodings", "rotary,rotary:base=10000"],
         "rotary and rotary:base=10000 are one encoding"),
        ([*LM, "--encodings", "complex-order:phase=true,complex-order"],
         "complex-order:phase=true and complex-order are one encoding"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_an_option_at_its_default_is_not_a_second_encoding(tmp_path, capsys, argv, match, dry):
    """``rotary`` and ``rotary:base=10000`` (its default) would train one model twice under two
    names: refused before --out is made."""
    out = tmp_path / "out"
    err = one_error(capsys, [*argv, "--seeds", "1", "--out", str(out), *dry], 1)
    assert f"{match} (the options they differ in are at their defaults) and would train twice; " \
        "give it once" in err and not out.exists()  # fmt: skip


def test_one_encoding_in_two_number_fields_or_at_other_values_is_allowed(capsys):
    for encodings in ("rotary@real,rotary:base=10000@complex", "rotary,rotary:base=500",
                      "complex-order:phase=false,complex-order"):  # fmt: skip
        assert main([*LM, "--encodings", encodings, "--seeds", "1", "--dry-run"]) == 0, encodings
    assert "2 cells" in capsys.readouterr().out
    # phase=1 is not its default True (a bool): the option's own error, not "one encoding"
    err = one_error(capsys, [*LM, "--encodings", "complex-order:phase=1,complex-order",
                             "--dry-run"], 1)  # fmt: skip
    assert "option phase must be true or false, got 1" in err


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([*BASE, "--data", "trec", "--encodings",
          "complex-order-freq-shared,complex-order:frequency=shared"],
         "trec fasttext complex-order-freq-shared complex seed 0 and trec fasttext "
         "complex-order:frequency=shared complex seed 0 are one cell"),
        ([*BASE, "--data", "trec", "--encodings", "sinusoidal:base=500.0,sinusoidal:base=5e2"],
         "are one cell (trec-test-fasttext-sinusoidal_base-500-real-s0)"),
        ([*BASE, "--data", "trec", "--encodings", "sinusoidal:base=500,sinusoidal:base=500.0"],
         "are one cell (trec-test-fasttext-sinusoidal_base-500-real-s0)"),
        ([*BASE, "--data", "trec,trec"], "trec fasttext none real seed 0 is in the grid twice"),
        ([*BASE, "--data", "trec", "--families", "fasttext,fasttext"], "is in the grid twice"),
        ([*LM, "--data", "mr,mr"], "mr decoder none real seed 0 is in the grid twice"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_a_cell_named_twice_is_refused_before_the_grid(tmp_path, capsys, argv, match, dry):
    """Two spellings of one encoding, or a dataset or family given twice, make cells of one id
    (one result file): refused, with --dry-run too, before --out is made."""
    out = tmp_path / "out"
    err = one_error(capsys, [*argv, "--seeds", "1", "--out", str(out), *dry], 1)
    assert match in err and "give each" in err and not out.exists()
