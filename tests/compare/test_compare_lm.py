"""``cplxnet compare --task lm``: the language-model grid end to end on a tiny text, resuming an
interrupted cell, a failing cell, and the report (table, n/a, bold, pooled test, plot) from
hand-made rows."""

from __future__ import annotations

import csv
import json
import os

import pytest
import torch

from cplxnet.cli import main
from cplxnet.compare import GridOptions
from cplxnet.compare.grid import Cell, run_grid
from cplxnet.compare.grid.lm import lm_grid_options, parse_lm_encodings
from cplxnet.compare.report import paired_test
from cplxnet.compare.report.lm_report import (
    lm_groups,
    lm_paired_table,
    lm_table,
    render_lm_report,
)
from cplxnet.compare.report.tables import fmt_p
from cplxnet.compare.specs import parse_encodings

TINY_MODEL = ["--set", "d_model=8", "--set", "num_heads=2", "--set", "dim_feedforward=16",
              "--set", "num_layers=1"]  # fmt: skip


@pytest.fixture
def text_file(tmp_path):
    words = ["the", "film", "is", "a", "good", "bad", "movie", "with", "some", "great", "and",
             "dull", "scenes"]  # fmt: skip
    lines = [" ".join(words[(i * 7 + k * 3) % len(words)] for k in range(6)) for i in range(120)]
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _tiny_args(text_file, out, encodings="trainable,complex-order"):
    return ["compare", "--task", "lm", "--data", text_file, "--encodings", encodings,
            "--seeds", "1", "--steps", "4", "--eval-every", "2", "--context", "8",
            "--batch-size", "4", "--threads", "1", *TINY_MODEL, "--out", out]  # fmt: skip


def test_lm_grid_runs_reports_and_resumes(tmp_path, text_file, capsys):
    out = str(tmp_path / "lm")
    assert main(_tiny_args(text_file, out)) == 0
    printed = capsys.readouterr().out
    assert "grid: 2 cells, 0 already done; 2 to run" in printed
    assert "decoder complex-order complex seed 0: test bpc 8: " in printed
    with open(os.path.join(out, "results.csv"), encoding="utf-8") as fh:
        lines = list(csv.DictReader(fh))
    # one line per run and evaluation length L, 2L, 4L, 8L
    assert [(r["encoding"], r["number"], r["length"]) for r in lines] == [
        (e, n, x) for e, n in (("trainable", "real"), ("complex-order", "complex"))
        for x in ("8", "16", "32", "64")
    ]  # fmt: skip
    trainable = [r for r in lines if r["encoding"] == "trainable"]
    assert trainable[0]["value"] and float(trainable[0]["value"]) > 0
    assert all(r["value"] == "" and "max_len=8" in r["na_reason"] for r in trainable[1:])
    assert all(r["value"] and r["status"] == "ok" for r in lines if r["encoding"] != "trainable")
    with open(os.path.join(out, "results.json"), encoding="utf-8") as fh:
        stored = json.load(fh)
    assert stored["grid"]["lm"]["context"] == 8 and stored["grid"]["lm"]["train"]["steps"] == 4
    assert all(r["steps"] == 4 and r["mode"] == "lm" for r in stored["rows"])
    cell = os.path.join(out, "cells", stored["rows"][0]["cell_id"] + ".json")
    with open(cell, encoding="utf-8") as fh:
        machine = json.load(fh)["machine"]  # where the cell was trained, at --threads 1
    assert machine["torch"] == torch.__version__ and machine["threads"] == 1 and machine["cpu"]
    for name in ("report.md", "lm.png", "grid.json"):
        assert os.path.exists(os.path.join(out, name))
    assert not os.listdir(os.path.join(out, "runs"))  # finished run folders are removed

    assert main(_tiny_args(text_file, out)) == 0
    assert "2 already done; 0 to run" in capsys.readouterr().out
    assert main(["report", out, "--no-plot"]) == 0
    report = capsys.readouterr().out
    assert "| trainable (real) | " in report and "n/a [1]" in report and "max_len=8" in report
    assert "| complex-order (complex) | trainable (real) |" in report  # the pooled test
    # rendered elsewhere, the report reads the budget of the grid beside the results
    elsewhere = str(tmp_path / "elsewhere")
    assert main(["report", out, "--no-plot", "--out", elsewhere]) == 0
    capsys.readouterr()
    texts = []
    for d in (out, elsewhere):
        with open(os.path.join(d, "report.md"), encoding="utf-8") as fh:
            texts.append(fh.read())
    assert texts[0] == texts[1] and "steps 4" in texts[0]  # the budget line

    # another budget into the same folder is refused with one line
    args = _tiny_args(text_file, out)
    args[args.index("--steps") + 1] = "5"
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: ") and "steps: was 4, now 5" in err


@pytest.mark.slow
def test_interrupted_cell_resumes_as_an_uninterrupted_one(tmp_path, text_file, monkeypatch):
    """A cell killed after its first checkpoint continues from it (the grid finds the run
    folder); its scores equal those of a cell run in one go. A run folder of another budget (a
    different seed) is trained again from scratch."""
    from cplxnet.tasks import lm as engine

    options = lm_grid_options(
        context=8, train={"steps": 4, "eval_every": 2, "batch_size": 4},
        sets={"*": {"d_model": 8, "num_heads": 2, "dim_feedforward": 16, "num_layers": 1}},
    )  # fmt: skip
    cell = Cell(text_file, None, "decoder", parse_encodings("rotary")[0], "real", 0, "lm")
    whole = run_grid([cell], str(tmp_path / "a"), options, log=lambda m: None)[0]
    assert whole["status"] == "ok" and not whole["resumed"]

    out = str(tmp_path / "b")
    real_train = engine.train_lm

    def interrupted(*args, **kwargs):
        def stop(step, metrics):
            raise KeyboardInterrupt

        return real_train(*args, **{**kwargs, "callback": stop})

    monkeypatch.setattr(engine, "train_lm", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_grid([cell], out, options, log=lambda m: None)
    monkeypatch.undo()
    run_dir = os.path.join(out, "runs", cell.cell_id)
    assert os.path.exists(os.path.join(run_dir, "checkpoint.pt"))
    resumed = run_grid([cell], out, options, log=lambda m: None)[0]
    assert resumed["status"] == "ok" and resumed["resumed"] and resumed["steps"] == 4
    assert resumed["test"] == whole["test"] and resumed["dev"] == whole["dev"]

    # a run folder left by another seed is not taken for this cell
    other = Cell(text_file, None, "decoder", parse_encodings("rotary")[0], "real", 1, "lm")
    monkeypatch.setattr(engine, "train_lm", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_grid([other], str(tmp_path / "c"), options, log=lambda m: None)
    monkeypatch.undo()
    os.rename(
        os.path.join(tmp_path, "c", "runs", other.cell_id),
        os.path.join(tmp_path, "c", "runs", cell.cell_id),
    )
    fresh = run_grid([cell], str(tmp_path / "c"), options, log=lambda m: None)[0]
    assert not fresh["resumed"] and fresh["test"] == whole["test"]


def test_a_failing_cell_is_recorded_and_the_grid_goes_on(tmp_path, text_file, monkeypatch):
    from cplxnet.tasks import lm as engine

    options = lm_grid_options(
        context=8, train={"steps": 2, "eval_every": 2, "batch_size": 4},
        sets={"*": {"d_model": 8, "num_heads": 2, "dim_feedforward": 16, "num_layers": 1}},
    )  # fmt: skip
    real_train = engine.train_lm

    def failing(config, *args, **kwargs):
        if config.encoding == "alibi":
            raise RuntimeError("boom")
        return real_train(config, *args, **kwargs)

    monkeypatch.setattr(engine, "train_lm", failing)
    cells = [Cell(text_file, None, "decoder", s, "real", 0, "lm")
             for s in parse_encodings("alibi,none")]  # fmt: skip
    logs: list[str] = []
    rows = run_grid(cells, str(tmp_path / "g"), options, log=logs.append)
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert rows[0]["error"] == "RuntimeError: boom"
    assert any("ERROR RuntimeError: boom" in line for line in logs)
    text, _ = render_lm_report(str(tmp_path / "g"), plots=False)
    assert "## Runs that failed (1)" in text and "alibi (real) seed 0: RuntimeError: boom" in text


def test_lm_cli_errors(tmp_path, text_file, capsys):
    out = str(tmp_path / "x")
    cases = [
        (
            _tiny_args(text_file, out) + ["--epochs", "3"],
            "--epochs applies to classification grids, not to --task lm; drop it ",
        ),
        (
            _tiny_args(text_file, out) + ["--factors", "1,2", "--train-len", "8"],
            "--factors, --train-len apply to classification grids, not to --task lm; drop them",
        ),
        (
            _tiny_args(text_file, out) + ["--synthetic-size", "9", "--synthetic-vocab", "4"],
            "--synthetic-size, --synthetic-vocab apply to classification grids",
        ),
        (
            ["compare", "--data", "mr", "--steps", "5", "--out", out],
            "--steps applies to --task lm; add --task lm or drop it",
        ),
        (
            ["compare", "--data", "synthetic", "--factors", "1,2", "--out", out],
            "--factors sets the length bins of --extrapolate; add --extrapolate or drop --factors",
        ),
        (
            _tiny_args("mr,synthetic:copy", out),
            "--data mixes text and synthetic tasks",
        ),
        (_tiny_args(text_file, out, "rotary:bse=3"), "decoder with rotary:bse=3 (real)"),
        (_tiny_args(str(tmp_path / "missing.txt"), out), "no such file"),
    ]
    for args, message in cases:
        assert main(args) == 1, args
        err = capsys.readouterr().err
        assert err.startswith("cplxnet: error: ") and message in err, err
        assert "Traceback" not in err
    assert not os.path.exists(out)


def test_parse_lm_encodings_number_suffix():
    got = parse_lm_encodings(
        "none,complex-order@both,complex-order:phase=false,frequency=shared@real,rotary@complex",
        ("natural",),
    )
    assert [(s.canonical, n) for s, n in got] == [
        ("none", ["real"]),
        ("complex-order", ["complex", "real"]),
        ("complex-order:frequency=shared:phase=false", ["real"]),
        ("rotary", ["complex"]),
    ]
    assert [n for _, n in parse_lm_encodings("none,complex-order", ("real", "complex"))] == [
        ["complex", "real"],
        ["complex", "real"],
    ]
    # one encoding given twice with other fields keeps each item's own fields
    got = parse_lm_encodings("rotary@complex,rotary@real,table4@real", ("natural",))
    assert [(s.label, n) for s, n in got[:3]] == [
        ("rotary", ["complex"]),
        ("rotary", ["real"]),
        ("complex-order", ["real"]),
    ]
    assert len(got) == 9 and all(n == ["real"] for _, n in got[2:])


def test_classification_grid_options_store_no_lm_key():
    """A classification grid's grid.json keeps its keys (an older folder still resumes)."""
    assert "lm" not in GridOptions().to_dict()
    assert lm_grid_options().to_dict()["lm"]["preset"] == "lm-char"


# ------------------------------------------------------------------------------------------------
# the report from hand-made rows

NA = "TrainableEncoding: input length 128 exceeds max_len=64"


def _row(encoding, number, seed, values, **extra):
    test = {}
    for length, v in zip(("64", "128", "256", "512"), values):
        test[length] = {"bpc": v} if v is not None else {"bpc": None, "n/a": NA}
    return {"mode": "lm", "data": "mr", "encoding": encoding, "number": number, "seed": seed,
            "metric": "bpc", "test": test, "status": "ok", "train_seconds": 100.0 + seed,
            "train_cpu_seconds": 50.0, "parameters": 1000, "cell_id": f"{encoding}-{number}-{seed}",
            **extra}  # fmt: skip


ROWS = [
    _row("complex-order", "complex", 0, [2.0, 2.1, 2.4, 3.0]),
    _row("complex-order", "complex", 1, [2.2, 2.3, 2.6, 3.2]),
    _row("alibi", "real", 0, [2.1, 2.05, 2.15, 2.2]),
    _row("alibi", "real", 1, [2.3, 2.25, 2.35, 2.4]),
    _row("trainable", "real", 0, [1.9, None, None, None]),
    _row("complex-order", "real", 0, [2.5, 2.6, 2.7, 2.8]),
    {
        "mode": "lm",
        "encoding": "rotary",
        "number": "real",
        "seed": 0,
        "status": "error",
        "error": "RuntimeError: x",
        "cell_id": "rotary-real-0",
    },  # fmt: skip
]


def test_lm_table_bold_na_and_labels():
    table, notes = lm_table(ROWS, digits=2, context=64)
    lines = table.splitlines()
    assert lines[0].startswith("| encoding | 64 (L) | 128 (2L) | 256 (4L) | 512 (8L) |")
    by_label = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines[2:]}
    # both number fields appear, so every label carries its field
    assert list(by_label) == [
        "complex-order (complex)", "alibi (real)", "trainable (real)", "complex-order (real)",
    ]  # fmt: skip
    assert by_label["complex-order (complex)"][:4] == ["2.10 ± 0.14", "2.20 ± 0.14",
                                                       "2.50 ± 0.14", "3.10 ± 0.14"]  # fmt: skip
    # lowest bpc in bold per column: trainable at L (one seed of two: n=1), alibi beyond
    assert by_label["trainable (real)"][0] == "**1.90** (n=1)"  # no sample std of one run
    assert by_label["trainable (real)"][1:4] == ["n/a [1]"] * 3
    assert by_label["alibi (real)"][1:4] == ["**2.15 ± 0.14**", "**2.25 ± 0.14**",
                                             "**2.30 ± 0.14**"]  # fmt: skip
    assert by_label["complex-order (real)"][0] == "2.50 (n=1)"
    assert notes == [NA]
    assert by_label["alibi (real)"][4:] == ["1,000", "100", "50 |"]


def test_lm_paired_test_per_length_against_the_target():
    """One cell per evaluation length: the seeds both scored there, paired by seed (the lengths
    of one run are not pooled), target minus other, wins where the target is better."""
    text = lm_paired_table(ROWS, target="complex-order", digits=3, context=64)
    lines = text.splitlines()
    assert lines[0] == "| target | against | 64 (L) | 128 (2L) | 256 (4L) | 512 (8L) |"
    rows = {line.split(" | ")[1]: line.strip("| ").split(" | ")[2:] for line in lines[2:]}
    assert set(rows) == {"alibi (real)", "trainable (real)", "complex-order (real)"}
    target = {0: [2.0, 2.1, 2.4, 3.0], 1: [2.2, 2.3, 2.6, 3.2]}
    alibi = {0: [2.1, 2.05, 2.15, 2.2], 1: [2.3, 2.25, 2.35, 2.4]}
    for i, cell in enumerate(rows["alibi (real)"]):
        t = paired_test({s: v[i] for s, v in alibi.items()}, {s: v[i] for s, v in target.items()})
        diff = (target[0][i] - alibi[0][i] + target[1][i] - alibi[1][i]) / 2
        assert t.n == 2
        assert cell == f"{diff:+.3f} ({t.wins}/{t.ties}/{t.losses}, p {fmt_p(t.p)})", cell
    assert rows["alibi (real)"][0] == "-0.100 (2/0/0, p 0.5)"  # lower bpc: the target wins
    assert rows["alibi (real)"][3] == "+0.800 (0/0/2, p 0.5)"
    # trainable: seed 0 at L only; no seed has both scores beyond L
    assert rows["trainable (real)"] == ["+0.100 (0/0/1, p 1)", "–", "–", "–"]
    assert rows["complex-order (real)"][0] == "-0.500 (1/0/0, p 1)"
    assert lm_paired_table(ROWS, target="xpos") == ""


def test_lm_report_states_the_test_and_the_smallest_p(tmp_path):
    text, _ = render_lm_report(ROWS, str(tmp_path), plots=False)
    assert "## complex-order against each configuration, per evaluation length" in text
    assert "the lengths are not pooled" in text and "`scipy.stats.wilcoxon`" in text
    assert "smallest attainable p is 2 / 2^n: 0.5 for the 2 seeds here" in text
    assert "mean ± sample std over seeds" in text
    assert "than the grid's).\n" in text  # no training length known: one full stop


def test_lm_table_leaves_out_a_score_that_is_not_finite():
    rows = [*ROWS[:4], _row("alibi", "real", 2, [float("nan"), 2.0, float("nan"), 2.0])]
    table, notes = lm_table(rows, digits=2)
    line = next(x for x in table.splitlines() if x.startswith("| alibi"))
    assert line.split(" | ")[1] == "2.20 ± 0.14 (n=2) [1]"  # seeds 0 and 1; bold stays honest
    assert line.split(" | ")[3].endswith("(n=2) [1]")  # the same footnote at 4L
    assert notes == ["not a finite number for seed 2; left out"]
    assert "nan" not in table
    text = lm_paired_table(rows, target="complex-order")
    assert "1/0/1" not in text.splitlines()[2].split(" | ")[2]  # seed 2 is no tie at L


def test_a_rescored_configuration_shows_no_training_time():
    rows = [*ROWS[:2], _row("rotary-yarn", "real", 0, [2.0, 2.1, 2.2, 2.3], rescored=True)]
    table, _ = lm_table(rows, digits=2)
    line = next(x for x in table.splitlines() if x.startswith("| rotary-yarn"))
    assert line.rstrip(" |").split(" | ")[-2:] == ["–", "–"]


def test_render_from_json_and_csv_agree_and_plot(tmp_path):
    from cplxnet.compare.grid import rows_to_csv

    (tmp_path / "results.json").write_text(json.dumps({"rows": ROWS}), encoding="utf-8")
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    (csv_dir / "results.csv").write_text(rows_to_csv(ROWS), encoding="utf-8")
    text_json, written = render_lm_report(str(tmp_path / "results.json"), plots=False)
    text_csv, _ = render_lm_report(str(csv_dir / "results.csv"), plots=False)
    assert text_json == text_csv
    assert text_json.startswith("# Language models: bpc against evaluation length (mr)\n")
    _, written = render_lm_report(str(tmp_path / "results.json"))
    assert os.path.exists(tmp_path / "lm.png") and str(tmp_path / "lm.png") in written
    assert "## Runs that failed (1)" in text_json and "rotary (real) seed 0" in text_json


def test_each_dataset_of_a_grid_has_its_own_tables_and_figures(tmp_path):
    """A grid over two corpora: each has its section, its runs only (no run of one stands in for
    the other's seed) and its own figures; a file of that name cplxnet did not write is
    refused."""
    trec = [{**r, "data": "trec", "cell_id": "trec-" + r["cell_id"],
             "test": {k: {"bpc": None if v["bpc"] is None else v["bpc"] + 1.0} for k, v in
                      r["test"].items()}} for r in ROWS[:4]]  # fmt: skip
    rows = [*ROWS[:4], *trec]
    text, written = render_lm_report(rows, str(tmp_path))
    assert text.startswith("# Language models: bpc against evaluation length (mr, trec)\n")
    mr, tr = text.split("## mr\n")[1].split("## trec\n")
    assert "| alibi (real) | 2.200 ± 0.141 |" in mr and "3.200" not in mr
    assert "| alibi (real) | 3.200 ± 0.141 |" in tr and "2.200" not in tr
    assert "### complex-order against each configuration" in mr and "(lm-mr.png)" in mr
    assert "(lm-trec.png)" in tr
    assert {os.path.basename(f) for f in written} == {"report.md", "lm-mr.png", "lm-trec.png"}
    copy = [{**r, "data": "synthetic:copy", "metric": "accuracy", "cell_id": "c" + r["cell_id"]}
            for r in ROWS[:2]]  # fmt: skip
    nameless = [{**r, "cell_id": "n" + r["cell_id"]} for r in ROWS[:2]]
    for r in nameless:
        del r["data"]
    text, _ = render_lm_report(rows + copy + nameless, str(tmp_path / "m"), plots=False)
    assert text.startswith("# Language models: bpc / accuracy against evaluation length (mr, "
                           "trec, synthetic:copy, no dataset named)\n")  # fmt: skip
    assert "## no dataset named\n" in text
    other = tmp_path / "other"
    other.mkdir()
    (other / "lm-trec.png").write_bytes(b"mine")
    with pytest.raises(ValueError, match="lm-trec.png is not listed as written by cplxnet"):
        render_lm_report(rows, str(other))
    assert (other / "lm-trec.png").read_bytes() == b"mine"


def test_figure_names_of_datasets_are_plain_and_distinct():
    from cplxnet.compare.report.lm_report import _suffixes

    assert _suffixes(["mr"]) == [""]
    assert _suffixes(["mr", "dir/x.txt"]) == ["-mr", "-dir_x.txt"]
    assert _suffixes(["a b", "a_b", "c"]) == ["-1", "-2", "-3"]


def test_plot_one_line_per_configuration_with_fixed_styles():
    """Every configuration with a score is one line in the colour and marker of
    ``column_styles`` over all configurations, and the legend names each of them."""
    from cplxnet.compare.report.lm_report import lm_figure
    from cplxnet.compare.report.plots import column_styles

    groups, lengths, metric = lm_groups(ROWS)
    assert lengths == ["64", "128", "256", "512"] and metric == "bpc"
    fig = lm_figure(ROWS, context=64)
    ax = fig.axes[0]
    styles = column_styles(groups)
    lines = [container.lines[0] for container in ax.containers]  # the errorbar data lines
    assert len(lines) == len(groups) == 4
    for line, key in zip(lines, groups):
        assert line.get_color() == styles[key].color and line.get_marker() == styles[key].marker
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["complex-order (complex)", "alibi (real)", "trainable (real)",
                      "complex-order (real)"]  # fmt: skip
    assert ax.get_xscale() == "log"
    # the trainable line stops at L (n/a beyond)
    trainable = lines[2].get_xdata()
    assert list(trainable) == [64]


@pytest.mark.parametrize(
    ("data", "encoding", "noted"),
    [
        ("mr", "randomized:base=rotary", 256),  # M = 4L = 256 < 8L = 512
        ("mr", "randomized:base=rotary:max_positions=512", None),
        ("mr", "rotary+randomized:randomized.base=sinusoidal", 256),
        ("mr", "rotary+randomized:randomized.base=sinusoidal:randomized.max_positions=512", None),
        ("synthetic:copy", "randomized:base=rotary", None),  # M = 4(2L + 1) >= 8L + 1
        ("synthetic:copy", "randomized:base=rotary:max_positions=100", 100),
    ],
)
def test_a_randomized_range_shorter_than_the_test_is_noted(tmp_path, capsys, data, encoding, noted):
    out = str(tmp_path / "grid")
    argv = ["compare", "--task", "lm", "--data", data, "--encodings", encoding, "--dry-run"]
    assert main([*argv, "--seeds", "1", "--out", out]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    if noted is None:
        assert notes == []
    else:
        longest = 512 if data == "mr" else 129
        key = "randomized.max_positions" if "+" in encoding else "max_positions"  # the advice works
        assert notes == [
            f"note: {encoding} on {data}: training draws positions below {noted}, the test reads "
            f"{longest} tokens: add :{key}={longest} to draw from a range covering it "
            "(Ruoss et al.)"
        ]
        if "max_positions" not in encoding:  # following the advice silences the note
            argv[argv.index(encoding)] = f"{encoding}:{key}={longest}"
            assert main([*argv, "--seeds", "1", "--out", out]) == 0
            assert "note:" not in capsys.readouterr().out
    assert not os.path.exists(out)


def test_each_randomized_configuration_is_noted_once_and_the_eval_multiples_set_the_longest(
    capsys,
):
    from cplxnet.compare.grid.lm import expand_lm_grid

    encodings = "randomized:base=rotary@both,randomized:base=sinusoidal@real"
    argv = ["compare", "--task", "lm", "--data", "mr", "--dry-run", "--seeds", "1",
            "--encodings", encodings]  # fmt: skip
    assert main(argv) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert [n.split(" on ")[0] for n in notes] == [
        "note: randomized:base=rotary",  # one note for its two fields
        "note: randomized:base=sinusoidal",
    ]
    encodings = parse_lm_encodings("randomized:base=rotary", ("real",))
    options = lm_grid_options(train={"eval_multiples": (1, 2)})  # the test reads 2L <= 4L
    assert expand_lm_grid(["mr"], encodings, [0], options)[1] == []
