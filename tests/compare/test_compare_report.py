"""The report: Table 2 layout from a hand-made results file with known numbers, the Wilcoxon
test on known pairs, the plots, the extrapolation table and the ``cplxnet report`` command."""

from __future__ import annotations

import csv
import itertools
import os

import pytest

from cplxnet.cli import main
from cplxnet.compare import (
    extrapolation_table,
    load_results,
    min_attainable_p,
    paired_test,
    plot_extrapolation,
    plot_results,
    pooled_table,
    render_report,
    results_table,
    significance_table,
)
from cplxnet.compare.grid import rows_to_csv

PNG = b"\x89PNG\r\n\x1a\n"

# family -> encoding -> number, accuracies by seed
KNOWN = {
    "cnn": {
        ("none", "real"): [0.70, 0.71, 0.72, 0.73, 0.74, 0.75],  # 0.725 +- 0.0187
        ("sinusoidal", "real"): [0.75, 0.76, 0.77, 0.76, 0.75, 0.77],  # 0.760 +- 0.0089
        ("complex-order", "complex"): [0.76, 0.78, 0.80, 0.80, 0.80, 0.83],  # 0.795 +- 0.0235
    },
    "fasttext": {
        ("none", "real"): [0.70, 0.70, 0.70],
        ("sinusoidal", "real"): [0.72, 0.74, 0.76],  # 0.740 +- 0.020
        ("complex-order", "complex"): [0.71, 0.73, 0.74],  # diffs -0.01 -0.01 -0.02
    },
}


def _rows():
    rows = []
    for family, cols in KNOWN.items():
        for (enc, number), accs in cols.items():
            for seed, acc in enumerate(accs):
                rows.append(
                    {
                        "data": "mr", "split": "quick", "fold": None, "family": family,
                        "encoding": enc, "number": number, "seed": seed, "parameters": 1000,
                        "dev_accuracy": acc - 0.01, "test_accuracy": acc, "seconds": 1.0,
                        "status": "ok", "error": "", "mode": "grid",
                    }
                )  # fmt: skip
    rows.append({**rows[0], "seed": 9, "status": "error", "error": "RuntimeError: boom",
                 "test_accuracy": None})  # fmt: skip
    return rows


@pytest.fixture
def results_csv(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(rows_to_csv(_rows()), encoding="utf-8")
    return str(path)


def _table_cells(table: str) -> dict[str, list[str]]:
    out = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| model"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[cells[0]] = cells[1:]
    return out


def test_table_numbers_bold_and_significance(results_csv):
    rows = load_results(results_csv)
    assert len(rows) == 6 * 3 + 3 * 3 + 1
    table = results_table(rows)
    header = table.splitlines()[0]
    assert header == (
        "| model | MR none (real) | MR sinusoidal (real) | MR complex-order (complex) | "
        "MR: complex-order vs best real |"
    )
    cells = _table_cells(table)
    assert cells["cnn"] == [
        "0.725 ± 0.019",
        "0.760 ± 0.009",
        "**0.795 ± 0.023**",
        "+0.035 vs sinusoidal; p = 0.031 (n=6)",
    ]
    assert cells["fasttext"] == [
        "0.700 ± 0.000 (n=3)",
        "**0.740 ± 0.020 (n=3)**",
        "0.727 ± 0.015 (n=3)",
        "-0.013 vs sinusoidal; p = 0.25 (n=3, min p = 0.25)",
    ]
    sig = [line for line in significance_table(rows).splitlines() if "| cnn |" in line]
    assert sig == [
        "| MR | cnn | complex-order (complex) | 0.795 | sinusoidal (real) | 0.760 | +0.035 | "
        "6/0/0 | 6 | 0.031 | 0.031 |"
    ]


def test_digits_and_other_metric(results_csv):
    rows = load_results(results_csv)
    cells = _table_cells(results_table(rows, metric="dev_accuracy", digits=2))
    assert cells["cnn"][0] == "0.71 ± 0.02"


def test_wilcoxon_on_known_pairs():
    a = {(None, s): 0.8 for s in range(6)}
    b = {(None, s): 0.8 - 0.01 * (s + 1) for s in range(6)}
    t = paired_test(a, b)
    assert (t.n, t.nonzero, t.wins, t.losses) == (6, 6, 6, 0)
    assert t.p == pytest.approx(2 / 64) and t.can_reach
    assert t.delta == pytest.approx(0.035)
    # mixed signs: d = 1, 2, 3, -4, 5, 6 (hundredths); exact two-sided p by enumeration
    d = [1, 2, 3, -4, 5, 6]
    b2 = {(None, s): 0.8 - 0.01 * d[s] for s in range(6)}
    observed = sum(r for r, v in zip(range(1, 7), d) if v < 0)  # W- = 4
    as_small = sum(
        min(sum(c), 21 - sum(c)) <= observed
        for k in range(7)
        for c in itertools.combinations(range(1, 7), k)
    )
    assert paired_test(a, b2).p == pytest.approx(as_small / 64) == pytest.approx(0.21875)
    # zeros are dropped; all-zero differences give p = 1; no common key gives no p
    t = paired_test(a, {**b, (None, 0): 0.8})
    assert (t.n, t.nonzero, t.ties) == (6, 5, 1) and t.min_p == pytest.approx(1 / 16)
    assert paired_test(a, dict(a)).p == 1.0
    assert paired_test(a, {(1, 0): 0.5}).p is None


def test_min_attainable_p():
    assert min_attainable_p(3) == 0.25
    assert min_attainable_p(5) == 0.0625 and min_attainable_p(6) == 0.03125
    assert min_attainable_p(0) == 1.0 and min_attainable_p(1) == 1.0


def test_plot_is_png(tmp_path, results_csv):
    path = plot_results(load_results(results_csv), str(tmp_path / "plot" / "acc.png"))
    with open(path, "rb") as fh:
        assert fh.read(8) == PNG


def test_render_report_writes_everything(tmp_path, results_csv):
    text, written = render_report(results_csv, str(tmp_path / "rep"))
    assert [os.path.basename(p) for p in written] == ["report.md", "accuracy.png"]
    assert "**0.795 ± 0.023**" in text
    assert "Runs that failed (1)" in text and "RuntimeError: boom" in text
    assert "Wang et al. (ICLR 2020), Table 2" in text and "| cnn | 0.809 | 0.815 | 0.825 |" in text


def test_report_command(tmp_path, results_csv, capsys):
    out = str(tmp_path / "cmd")
    assert main(["report", results_csv, "--out", out]) == 0
    printed = capsys.readouterr().out
    assert "+0.035 vs sinusoidal; p = 0.031 (n=6)" in printed
    with open(os.path.join(out, "accuracy.png"), "rb") as fh:
        assert fh.read(8) == PNG
    assert main(["report", str(tmp_path / "missing.csv")]) == 1
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize("mix", ["same seed", "other options"])
def test_results_of_two_grids_put_together_are_refused_where_they_collide(tmp_path, capsys, mix):
    """Runs of one cell trained with different options (concatenated results files) are never
    averaged, and a second run of one seed never hides the first: one line naming both cells.
    Rows of different cells with their own options (real rows of one grid, complex rows of
    another) still make one report."""
    rows = [{**r, "cell_id": f"a{i}", "options": '{"train": {"epochs": 3}}'}
            for i, r in enumerate(_rows())]  # fmt: skip
    other = {**rows[0], "cell_id": "b0", "test_accuracy": 0.5}
    if mix == "same seed":
        extra = [other]
    else:
        extra = [{**other, "seed": 7, "options": '{"train": {"epochs": 1}}'}]
    path = tmp_path / "results.csv"
    path.write_text(rows_to_csv(rows + extra), encoding="utf-8")
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    what = "hold two runs of mr cnn none (real) seed 0" if mix == "same seed" else \
        "mix runs of mr cnn none (real) trained with different options"  # fmt: skip
    assert what in err and "(a0 and b0" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()
    others = [{**r, "options": '{"train": {"epochs": 1}}'} if r["number"] == "complex" else r
              for r in rows]  # fmt: skip
    path.write_text(rows_to_csv(others), encoding="utf-8")
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 0


def test_the_duplicate_seed_message_names_the_row_that_holds_the_seed():
    from cplxnet.compare.report.statistics import summarize

    row = dict(mode="grid", data="mr", family="cnn", encoding="none", number="real", status="ok",
               fold=None, options="{}", test_accuracy=0.7)  # fmt: skip
    rows = [dict(row, seed=0, cell_id="a0"), dict(row, seed=1, cell_id="a1"),
            dict(row, seed=1, cell_id="b1")]  # fmt: skip
    with pytest.raises(ValueError, match=r"seed 1 \(a1 and b1\)"):
        summarize(rows)


def test_one_budget_in_its_spellings_is_one_budget():
    """What ``check_options`` takes for one budget is one in the report too: an option given
    at its default or left out, presets added for other cells, a dict or its JSON text."""
    import json

    from cplxnet.compare.report.statistics import summarize
    from cplxnet.tasks.classify.task import TrainOptions

    lr = TrainOptions().lr
    rows = [r for r in _rows() if r["status"] == "ok"]
    spellings = [{"train": {"epochs": 3}}, {"train": {"epochs": 3, "lr": lr}}]
    mixed = [{**r, "cell_id": f"c{i}", "options": spellings[i % 2]} for i, r in enumerate(rows)]
    mixed = [{**r, "options": json.dumps(r["options"])} if i % 3 else r
             for i, r in enumerate(mixed)]  # fmt: skip
    assert summarize(mixed)[0]
    preset = {"model": {"family": "cnn"}, "train": {}}
    presets = [{"presets": {"trec:cnn": preset}},
               {"presets": {"trec:cnn": preset, "mr:cnn": preset}}]  # fmt: skip
    grown = [{**r, "cell_id": f"c{i}", "options": {"train": {"epochs": 3}, **presets[i % 2]}}
             for i, r in enumerate(rows)]  # fmt: skip
    assert summarize(grown)[0]
    first_without = [{**r, "cell_id": f"c{i}",
                      "options": {"train": {"epochs": 3}, **({} if i % 2 else presets[0])}}
                     for i, r in enumerate(rows)]  # fmt: skip
    assert summarize(first_without)[0]  # a re-run added presets for other cells
    none = [{**r, "cell_id": f"c{i}", "options": [None, "", {}][i % 3]} for i, r in enumerate(rows)]
    assert summarize(none)[0]
    changed = [dict(r, options={"train": {"epochs": 3, "lr": lr * 2}}) if i == 1 else r
               for i, r in enumerate(mixed)]  # fmt: skip
    with pytest.raises(ValueError, match="trained with different options"):
        summarize(changed)


def test_a_grid_run_again_with_an_option_at_its_default_still_reports(tmp_path, capsys):
    """compare accepts a second run whose budget spells an option at its default; its report
    (the end of that run) accepts it too."""
    out = str(tmp_path / "g")
    argv = ["compare", "--data", "synthetic", "--families", "fasttext", "--encodings", "none",
            "--set", "d_model=8", "--epochs", "1", "--batch-size", "16", "--jobs", "1",
            "--out", out]  # fmt: skip
    assert main([*argv, "--seeds", "1"]) == 0
    assert main([*argv, "--seeds", "2", "--split-seed", "0"]) == 0
    assert "| fasttext |" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["[1, 2]", '{"rows": ["a"]}', "[{}, null]"])
def test_report_on_json_that_holds_no_rows_is_one_line(tmp_path, capsys, text):
    """A JSON list whose items are not result rows (objects) is the same one line as a JSON
    file without a list."""
    path = tmp_path / "results.json"
    path.write_text(text, encoding="utf-8")
    assert main(["report", str(path), "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert err == f"cplxnet: error: {path} holds no list of result rows\n"
    assert os.listdir(tmp_path) == ["results.json"]


@pytest.mark.parametrize(
    "name, data, expected",
    [
        ("results.json", b"[]", "{path} holds no result rows; nothing to report"),
        ("results.csv", b"data,encoding,seed\n", "{path} holds no result rows; nothing to report"),
        ("results.csv", b"data,encoding,seed\nmr,rotary,\xff\n",
         "{path} is not UTF-8 text (byte 0xff: invalid start byte); give the results file"),
        ("results.csv", b"data,encoding,seed\nmr,rotary,0\nmr,rotary,one\n",
         "{path} line 3: could not convert string to float: 'one'"),
    ],
)  # fmt: skip
def test_report_on_a_file_without_rows_names_the_file_in_one_line(tmp_path, capsys, name,
                                                                    data, expected):  # fmt: skip
    """No rows, bytes that are not UTF-8 or a number column that holds no number: one line
    naming the file, and nothing written (a report.md of no rows was written beside it)."""
    path = tmp_path / name
    path.write_bytes(data)
    assert main(["report", str(path), "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: " + expected.format(path=path)) and err.count("\n") == 1
    assert os.listdir(tmp_path) == [name]


def _x_rows():
    rows = []
    accs = {"trainable": [(0.9, 0.6), (0.92, 0.5)], "complex-order": [(0.9, 0.8), (0.9, 0.7)]}
    for enc, runs in accs.items():
        for seed, (a, b) in enumerate(runs):
            rows.append(
                {
                    "data": "synthetic", "fold": None, "family": "transformer", "encoding": enc,
                    "number": "real" if enc == "trainable" else "complex", "seed": seed,
                    "status": "ok", "mode": "extrapolate", "train_len": 4,
                    "test_accuracy": a, "dev_accuracy": a, "cell_id": f"{enc}-{seed}",
                    "bins": [
                        {"bin": "2-4", "lo": 2, "hi": 4, "n": 10, "accuracy": a},
                        {"bin": "5-8", "lo": 5, "hi": 8, "n": 10, "accuracy": b},
                    ],
                }
            )  # fmt: skip
    return rows


def test_extrapolation_table_and_csv_roundtrip(tmp_path):
    rows = _x_rows()
    table = extrapolation_table(rows)
    cells = {}
    for line in table.splitlines():
        if line.startswith("| transformer"):
            parts = [c.strip() for c in line.strip("|").split("|")]
            cells[parts[1]] = parts[2:]
    assert cells["trainable (real)"] == ["**0.910 ± 0.014**", "0.550 ± 0.071"]
    assert cells["complex-order (complex)"] == ["0.900 ± 0.000", "**0.750 ± 0.071**"]
    assert "| model | encoding | 2-4 (train) | 5-8 |" in table
    path = tmp_path / "x.csv"
    path.write_text(rows_to_csv(rows), encoding="utf-8")
    with open(path, encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 8  # one line per run and bin
    assert extrapolation_table(load_results(str(path))) == table
    png = plot_extrapolation(rows, str(tmp_path / "x.png"))
    with open(png, "rb") as fh:
        assert fh.read(8) == PNG


def test_pooled_table_matches_runs_across_rows(results_csv):
    """complex-order against each column over the runs of both rows, matched by (row, seed)."""
    from scipy.stats import wilcoxon

    rows = load_results(results_csv)
    lines = {line.split("|")[2].strip(): line for line in pooled_table(rows).splitlines()[2:]}
    assert set(lines) == {"none (real)", "sinusoidal (real)"}
    # vs none: cnn +.06 +.07 +.08 +.07 +.06 +.08, fasttext +.01 +.03 +.04: 9 wins, p = 2 / 2**9
    assert lines["none (real)"] == (
        "| complex-order (complex) | none (real) | 2 | +0.056 | 9/0/0 | 9 | 0.0039 |"
    )
    # vs sinusoidal: cnn +.01 .. +.06 (6 wins), fasttext -.01 -.01 -.02 (3 losses)
    diffs = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, -0.01, -0.01, -0.02]
    p = wilcoxon(diffs).pvalue
    cells = [c.strip() for c in lines["sinusoidal (real)"].strip("|").split("|")]
    assert cells[2:6] == ["2", "+0.019", "6/0/3", "9"]
    assert float(cells[6]) == pytest.approx(p, rel=0.05)


def _both_rows():
    """A --number both grid on MR and TREC: none and complex-order in each number field;
    complex-order (real) is the best column of the cnn rows, none (real) of the lstm rows."""
    accs = {  # family -> column -> accuracies by seed (same for both datasets)
        "cnn": {
            ("none", "real"): [0.70, 0.71, 0.72],
            ("none", "complex"): [0.69, 0.70, 0.70],
            ("complex-order", "real"): [0.80, 0.81, 0.82],
            ("complex-order", "complex"): [0.75, 0.76, 0.78],
        },
        "lstm": {
            ("none", "real"): [0.79, 0.80, 0.81],
            ("none", "complex"): [0.70, 0.70, 0.71],
            ("complex-order", "real"): [0.74, 0.75, 0.76],
            ("complex-order", "complex"): [0.77, 0.78, 0.78],
        },
    }
    return [
        {
            "data": data, "fold": None, "family": family, "encoding": enc, "number": number,
            "seed": seed, "test_accuracy": acc, "status": "ok", "mode": "grid",
        }
        for data in ("mr", "trec")
        for family, cols in accs.items()
        for (enc, number), values in cols.items()
        for seed, acc in enumerate(values)
    ]  # fmt: skip


def _tables(markdown: str) -> list[list[list[str]]]:
    """Every markdown table of a report, as rows of cells (header first)."""
    tables, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            if not line.startswith("|---"):
                current.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    return tables


def test_number_both_headers_are_unique_and_best_real_includes_real_complex_order(tmp_path):
    rows = _both_rows()
    text, _ = render_report(rows, str(tmp_path), plots=False)
    tables = _tables(text)
    assert len(tables) == 4  # Table 2 layout, per row, pooled, paper
    for table in tables:
        assert len(set(table[0])) == len(table[0]), table[0]
    main_table = _tables(results_table(rows))[0]
    assert main_table[0][:5] == [
        "model",
        "MR none (real)",
        "MR none (complex)",
        "MR complex-order (real)",
        "MR complex-order (complex)",
    ]
    assert main_table[0][5] == "MR: complex-order (complex) vs best real"
    cnn = next(r for r in main_table if r[0] == "cnn")
    assert cnn[3] == "**0.810 ± 0.010**"  # the real twin is the best of the row ...
    # ... and is the baseline of the comparison
    assert cnn[5] == "-0.047 vs complex-order (real); p = 0.25 (n=3, min p = 0.25)"
    lstm = next(r for r in main_table if r[0] == "lstm")
    assert lstm[5].startswith("-0.023 vs none (real);")
    per_row = {(r[0], r[1]): r for r in _tables(significance_table(rows))[0][1:]}
    assert per_row[("TREC", "cnn")][2:6] == [
        "complex-order (complex)",
        "0.763",
        "complex-order (real)",
        "0.810",
    ]
    paper = tables[3]
    assert paper[0] == [
        "model",
        "MR none (real)",
        "MR complex-order (complex)",
        "TREC none (real)",
        "TREC complex-order (complex)",
    ]
    assert paper[1] == ["cnn", "0.809", "0.825", "0.898", "0.939"]


def test_no_target_column_means_no_comparison_column(results_csv):
    rows = [r for r in load_results(results_csv) if r["encoding"] != "complex-order"]
    table = results_table(rows)
    assert table.splitlines()[0] == "| model | MR none (real) | MR sinusoidal (real) |"
    assert "No complex-order column" in table and significance_table(rows) == ""


def test_target_in_the_real_field_is_not_its_own_baseline():
    """A --number real grid: the target column is complex-order (real); the best *other* real
    column is its baseline even when the target has the best mean."""
    rows = [r for r in _both_rows() if r["number"] == "real"]
    cnn = _table_cells(results_table(rows))["cnn"]
    assert cnn[1] == "**0.810 ± 0.010**"
    assert cnn[2].startswith("+0.100 vs none;")


def test_runs_are_kept_and_matched_by_fold_and_seed():
    """Cross-validation rows: a cell keeps one run per (fold, seed), so the folds of one seed do
    not overwrite each other, its std is the sample std, and the paired test matches runs of the
    same fold and seed."""
    import statistics

    from cplxnet.compare.report.statistics import summarize

    accs = {
        ("none", "real"): [0.70, 0.72, 0.74, 0.76],
        ("complex-order", "complex"): [0.71, 0.74, 0.77, 0.80],
    }
    rows = [
        {
            "data": "mr", "fold": i // 2, "family": "cnn", "encoding": enc, "number": number,
            "seed": i % 2, "test_accuracy": acc, "status": "ok", "mode": "grid",
        }
        for (enc, number), values in accs.items()
        for i, acc in enumerate(values)
    ]  # fmt: skip
    groups, *_ = summarize(rows)
    none = groups[("mr", "cnn", "none", "real")]
    assert none.values == {(0, 0): 0.70, (0, 1): 0.72, (1, 0): 0.74, (1, 1): 0.76}
    assert none.mean == pytest.approx(0.73)
    assert none.std == pytest.approx(statistics.stdev(accs[("none", "real")]))
    # differences 0.01, 0.02, 0.03, 0.04 (fold 0 seed 0, ..., fold 1 seed 1): all positive
    assert _table_cells(results_table(rows))["cnn"][-1] == (
        "+0.025 vs none; p = 0.12 (n=4, min p = 0.12)"
    )


def test_runs_at_different_thread_counts_are_noted(tmp_path):
    """A grid resumed with other --jobs/--threads mixes thread counts (sums round differently):
    both reports say so in their budget section; one count, or none recorded, says nothing."""
    from cplxnet.compare.report.lm_report import render_lm_report

    rows = [r for r in _rows() if r["status"] == "ok"]
    mixed = [{**r, "machine": {"threads": 1 + (i % 2)}} for i, r in enumerate(rows)]
    text, _ = render_report(mixed, str(tmp_path / "a"), plots=False)
    assert "the runs trained with 1 and 2 torch threads" in text
    for same in (rows, [{**r, "machine": {"threads": 2}} for r in rows]):
        text, _ = render_report(same, str(tmp_path / "b"), plots=False)
        assert "torch threads" not in text
    lm = [{"mode": "lm", "data": "mr", "encoding": "rotary", "number": "real", "seed": s,
           "metric": "bpc", "test": {"64": {"bpc": 2.0 + s}}, "status": "ok",
           "cell_id": f"c{s}", "machine": {"threads": 4 - s}} for s in range(3)]  # fmt: skip
    text, _ = render_lm_report(lm, str(tmp_path / "c"), plots=False)
    assert "- note: the runs trained with 2, 3 and 4 torch threads" in text
