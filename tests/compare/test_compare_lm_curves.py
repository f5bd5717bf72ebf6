"""The training section of a language-model report: the plateau gain over the last fifth of the
steps each run trained, early stops, the budget per run and the learning-curve figure, from
hand-made cell rows."""

from __future__ import annotations

import os

import pytest

from cplxnet.compare.report.lm_curves import curve_groups, dev_key, plateau_gain, training_table
from cplxnet.compare.report.lm_report import render_lm_report


def _history(values, every=100, key="dev_bpc"):
    return [{"step": every * (i + 1), key: v, "dev_loss": v * 0.69, "best": True}
            for i, v in enumerate(values)]  # fmt: skip


def _row(encoding, seed, values, *, number="real", steps=None, every=100, **extra):
    history = _history(values, every)
    return {
        "status": "ok", "mode": "lm", "data": "mr", "encoding": encoding, "number": number,
        "seed": seed, "metric": "bpc", "context": 64, "parameters": 1000,
        "test": {"64": {"bpc": values[-1]}, "128": {"bpc": values[-1] + 0.1}},
        "steps": steps or history[-1]["step"], "train_seconds": 10.0,
        "train_cpu_seconds": 8.0 + seed, "history": history, **extra,
    }  # fmt: skip


def test_plateau_gain_is_the_best_so_far_over_the_last_fifth():
    # 10 evaluations to step 1000: best until step 800 is 2.0, best until 1000 is 1.9
    values = [3.0, 2.6, 2.4, 2.2, 2.1, 2.05, 2.02, 2.0, 2.1, 1.9]
    assert plateau_gain(_history(values)) == pytest.approx((2.0 - 1.9) / 2.0)
    # a worse last evaluation does not count as a loss: the best so far stays
    assert plateau_gain(_history([3.0, 2.0, 2.0, 2.0, 2.5])) == 0.0
    # a run stopped early: the fifth of the steps it trained (500 -> from step 400)
    assert plateau_gain(_history([3.0, 2.5, 2.2, 2.0, 1.0])) == pytest.approx(0.5)
    assert plateau_gain(_history([2.0], every=100)) is None  # nothing before 80 steps
    assert plateau_gain([]) is None


def test_training_table_marks_learning_runs_and_counts_early_stops():
    flat = [3.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.99]  # 0.5%: plateaued
    steep = [3.0, 2.8, 2.6, 2.4, 2.2, 2.0, 1.8, 1.6, 1.4, 1.2]  # 1.6 at 800 -> 1.2: 25%
    slow = [*flat[:9], 1.96]  # 2.0 -> 1.96: 2%, still learning by the 1% rule
    rows = [
        _row("none", 0, flat), _row("none", 1, flat[:6], steps=600), _row("t5", 0, slow),
        _row("rotary", 0, steep), _row("rotary", 1, steep),
        _row("rotary-yarn", 0, steep, rescored={"cell_id": "x"}),
        {"status": "error", "encoding": "alibi", "number": "real", "seed": 0},
    ]  # fmt: skip
    options = {"lm": {"train": {"steps": 1000, "batch_size": 8}}}
    labels = {("none", "real"): "none", ("rotary", "real"): "rotary", ("t5", "real"): "t5"}
    table, notes = training_table(rows, labels, options)
    lines = table.splitlines()
    assert lines[0].startswith("| encoding | steps/run | stopped early | training tokens/run")
    none = next(x for x in lines if x.startswith("| none |"))
    rotary = next(x for x in lines if x.startswith("| rotary |"))
    assert not any(x.startswith("| rotary-yarn") or x.startswith("| alibi") for x in lines)
    # steps: mean (range); one of two stopped by patience; tokens = steps x batch x L
    assert "| 800 (600-1,000) | 1/2 (seed 1) | 409,600 (307,200-512,000) | 8 (8-9) |" in none
    gain_flat = plateau_gain(_history(flat))
    gain_short = plateau_gain(_history(flat[:6]))
    assert gain_short == 0.0 and gain_flat == pytest.approx(0.005)
    assert none.endswith(f"| {100 * (gain_flat + gain_short) / 2:.2f}% ± 0.35% |")
    assert rotary.endswith("| 25.00% ± 0.00% † |") and "| 0/2 |" in rotary
    # one run: no standard deviation to print
    assert next(x for x in lines if x.startswith("| t5 |")).endswith("| 2.00% † |")
    assert "still learning: 2 of 3 configurations" in notes[0]
    assert not any("Stopped early" in n for n in notes)  # no patience: no such sentence
    options["lm"]["train"]["patience"] = 3
    assert "Stopped early: runs that ended by patience before 1,000 steps." in " ".join(
        training_table(rows, labels, options)[1]
    )
    assert set(curve_groups(rows)) == {("none", "real"), ("t5", "real"), ("rotary", "real")}
    assert curve_groups(rows)[("none", "real")][600] == [2.0, 2.0]
    assert curve_groups(rows)[("none", "real")][1000] == [1.99]


def test_training_table_counts_early_stops_inside_five_patience_windows():
    """A run stopped by patience within 5 windows gained nothing over its last fifth by
    construction; the note counts those among the runs stopped early."""
    flat = [3.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    rows = [_row("none", 0, flat[:5], steps=500), _row("none", 1, flat[:9], steps=900),
            _row("t5", 0, flat)]  # fmt: skip
    train = {"steps": 1000, "batch_size": 8, "patience": 1, "eval_every": 100}
    _, notes = training_table(rows, {}, {"lm": {"train": train}})
    assert "1 of the 2 runs stopped early ended within 500 steps" in notes[2]
    assert "(100 steps without a better dev loss)" in notes[2] and "their gain is" in notes[2]
    train["patience"] = 2
    _, notes = training_table(rows, {}, {"lm": {"train": train}})
    assert "2 of the 2 runs stopped early ended within 1,000 steps" in notes[2]
    _, notes = training_table(rows[:1], {}, {"lm": {"train": train}})
    assert notes[2].startswith("The one run stopped early ended within 1,000 steps")
    assert "its gain is zero by construction" in notes[2]
    del train["patience"]
    assert "by construction" not in " ".join(training_table(rows, {}, {"lm": {"train": train}})[1])


def test_patience_on_the_loss_does_not_make_an_exact_match_gain_zero():
    """Patience that watched the dev loss says nothing of the exact match's gain."""
    rows = [_row("rotary", 0, [3.0, 2.0, 1.0, 0.5, 0.4], steps=500)]
    rows[0]["data"] = "synthetic:copy"
    for m, a in zip(rows[0]["history"], [0.1, 0.5, 0.8, 0.5, 0.9]):
        del m["dev_bpc"]
        m["dev_accuracy"] = a
    train = {"steps": 1000, "batch_size": 8, "patience": 1, "eval_every": 100}
    _, notes = training_table(rows, {}, {"lm": {"train": train}})
    assert "Patience watched the dev loss, while the gain reads the exact match" in notes[2]
    assert "by construction" not in " ".join(notes)
    train["monitor"] = "accuracy"
    _, notes = training_table(rows, {}, {"lm": {"train": train}})
    assert "without a better dev exact match) covers the last fifth" in notes[2]


def test_synthetic_rows_use_the_dev_loss_and_count_sequences():
    rows = [_row("rotary", 0, [3.0, 2.0, 1.0, 0.5, 0.4])]
    for r in rows:
        r["data"] = "synthetic:copy"
        for m in r["history"]:
            del m["dev_bpc"]
    assert dev_key(rows) == "dev_loss"
    table, notes = training_table(rows, {}, {"lm": {"train": {"batch_size": 32}}})
    assert "training sequences/run" in table and "| 16,000 |" in table
    assert "dev loss gain, last fifth" in table and "recorded no dev exact match" in notes[-1]


def test_synthetic_rows_with_a_dev_exact_match_read_it_higher_is_better():
    rows = [_row("rotary", 0, [3.0, 2.0, 1.0, 0.5, 0.4])]
    rows[0]["data"] = "synthetic:copy"
    exact = [0.1, 0.5, 0.8, 0.5, 0.9]  # best until step 400: 0.8; until 500: 0.9
    for m, a in zip(rows[0]["history"], exact):
        del m["dev_bpc"]
        m["dev_accuracy"] = a
    assert dev_key(rows) == "dev_accuracy"
    assert plateau_gain(rows[0]["history"], "dev_accuracy") == pytest.approx(0.1)  # points
    flat = [{**m, "dev_accuracy": v} for m, v in zip(rows[0]["history"], [0.2, 1, 1, 0.9, 1])]
    assert plateau_gain(flat, "dev_accuracy") == 0.0  # a worse evaluation is not a loss
    zero = [{**m, "dev_accuracy": v} for m, v in zip(rows[0]["history"], [0, 0, 0, 0, 0.4])]
    assert plateau_gain(zero, "dev_accuracy") == pytest.approx(0.4)  # still at 0 at 0.8 S
    table, notes = training_table(rows, {}, {"lm": {"train": {"batch_size": 32}}})
    assert "dev exact match gain, last fifth" in table and "| 10.00 pts † |" in table
    assert "| 1/1 (seed 0) |" in table  # 500 steps of the default 1,500 (grid.json left it out)
    assert notes[0].startswith("Gain of the best dev exact match") and "1 point" in notes[0]
    assert "exact match of the greedy answers" in notes[-1]
    assert curve_groups(rows)[("rotary", "real")][500] == [0.9]
    # a run without it (trained before it was recorded): every run reads the dev loss
    old = _row("none", 0, [3.0, 2.0, 1.0, 0.5, 0.4], data="synthetic:copy")
    for m in old["history"]:
        del m["dev_bpc"]
    assert dev_key([*rows, old]) == "dev_loss"


def test_report_has_the_training_section_and_curves(tmp_path):
    steep = [3.0, 2.8, 2.6, 2.4, 2.2]
    rows = [_row("none", s, steep) for s in range(2)] + [_row("rotary", 0, steep)]
    rows.append(_row("rotary-yarn", 0, steep, rescored={"cell_id": "r"}))
    text, written = render_lm_report(rows, str(tmp_path), options={"lm": {"context": 64}})
    assert "over 3 finished runs" in text  # the re-scored cell trained nothing
    assert "rotary-yarn: no training of its own" in text
    assert "## Training: plateau and budget per run" in text
    bpc_rows = [x for x in text.splitlines() if x.startswith("| ")]
    one_seed = next(x for x in bpc_rows if x.startswith("| rotary |") and "2.200" in x)
    two_seeds = next(x for x in bpc_rows if x.startswith("| none |") and "2.200" in x)
    assert "±" not in one_seed and "2.200 ± 0.000" in two_seeds  # a sample std needs n > 1
    png = os.path.join(str(tmp_path), "curves.png")
    assert "[curves.png](curves.png)" in text and png in written and os.path.getsize(png) > 0
    # rows without histories (as read from a results.csv): no section, no figure
    plain, written = render_lm_report([{**r, "history": []} for r in rows], str(tmp_path / "p"))
    assert "## Training" not in plain and not any(w.endswith("curves.png") for w in written)
