"""The README's language-model results line (and compare/README's table of the 24k copy
follow-up) states what the committed reports say.

Reads the bullet of README.md that links ``lm-char-L64-cosine`` and the report it links: each
``NAME a / b`` pair is that encoding's test bpc at L and at 8L rounded to two decimals (half
up), the number of encodings is the report's row count, and the smallest last-fifth gain is at
least the bound the README states."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = "benchmarks/compare/lm-char-L64-cosine"
NAMES = {"NoPE": "none", "ALiBi": "alibi", "complex-order": "complex-order (complex)"}


def _bullet() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    start = text.index("- **Language models**")
    end = text.index("\n- ", start + 1)
    bullet = " ".join(text[start:end].split())
    assert STUDY in bullet
    return bullet


def _report() -> tuple[dict[str, list[float]], dict[str, float]]:
    """Test bpc per length and the last-fifth gain (%) per encoding, from report.md."""
    with open(os.path.join(ROOT, STUDY, "report.md"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    bpc, gain = {}, {}
    for line in lines:
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if len(cells) == 8 and re.match(r"\d\.\d{3}\b", cells[1]):  # "2.109" or "2.109 ± 0.002"
            bpc[cells[0]] = [
                float(c.split()[0]) if re.match(r"\d\.\d+", c) else None for c in cells[1:5]
            ]
        if len(cells) == 6 and cells[5].endswith(("%", "†")) and "," in cells[1]:
            gain[cells[0]] = float(cells[5].split("%")[0])
    return bpc, gain


def test_lm_results_line_equals_the_committed_report():
    bullet, (bpc, gain) = _bullet(), _report()
    pairs = re.findall(r"([A-Za-z0-9-]+) (\d\.\d\d) / (\d\.\d\d)", bullet)
    assert len(pairs) >= 5, bullet
    for name, at_l, at_8l in pairs:
        key = NAMES.get(name, name.lower())
        key = key if key in bpc else f"{key} (real)"  # a row may name its field: "t5 (real)"
        assert key in bpc, (name, sorted(bpc))
        # the report's three decimals rounded half up (2.155 -> 2.16)
        assert abs(bpc[key][0] - float(at_l)) <= 0.005 + 1e-9, (name, bpc[key])
        assert abs(bpc[key][3] - float(at_8l)) <= 0.005 + 1e-9, (name, bpc[key])
    count = re.search(r"(\d+) encodings", bullet)  # the trained ones: a row each in both tables
    assert count is not None and int(count.group(1)) == len(gain)
    assert set(gain) <= set(bpc) and set(bpc) - set(gain) == {"rotary-yarn (real)"}
    yarn = re.search(r"YaRN at evaluation: (\d\.\d\d)", bullet)  # rotary re-scored, at 8L
    assert yarn is not None and abs(bpc["rotary-yarn (real)"][3] - float(yarn.group(1))) <= 0.005
    bound = re.search(r"gain ≥ (\d+(?:\.\d+)?)% in the last fifth", bullet)
    assert bound is not None and min(gain.values()) >= float(bound.group(1))


COPY = "benchmarks/compare/lm-copy-12k"
COPY_24K = "benchmarks/compare/lm-copy-24k"
COPY_NAMES = {"KERPLE": "kerple (real)", "ALiBi": "alibi (real)", "FIRE": "fire (real)"}


def _copy_report(folder: str) -> tuple[dict[str, float | None], dict[str, bool], str]:
    """Exact match at 17-32 per row, whether each trained row is marked still learning (†),
    and the report's text."""
    with open(os.path.join(ROOT, folder, "report.md"), encoding="utf-8") as fh:
        text = fh.read()
    lines = text.splitlines()
    header = next(x for x in lines if x.startswith("| encoding |") and "17-32" in x)
    column = [c.strip() for c in header.strip("|").split("|")].index("17-32")
    at = {}
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("| "):
            break
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        value = cells[column].split()[0]
        at[cells[0]] = None if value == "n/a" else float(value)  # n/a: lengths it cannot take
    learning = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[5].endswith(("pts", "†")) and "/" in cells[2]:
            learning[cells[0]] = cells[5].endswith("†")
    return at, learning, text


def test_copy_results_sentence_equals_the_committed_report():
    """The bullet's copy sentence: the named encodings' exact match at 17-32 (L+1..2L) rounded
    to two decimals, every other row at most the bound it states, and the number of
    configurations still learning as the report counts them; then the 24k follow-up's named
    values and which of its configurations plateau or still learn."""
    bullet = _bullet()
    assert COPY in bullet and COPY_24K in bullet
    sentence = bullet[bullet.index("Copy (") :]
    first, follow_up = sentence.split("; at 24k ")
    at, _, text = _copy_report(COPY)
    named = re.findall(r"(KERPLE|ALiBi|FIRE) \.(\d\d)", first)
    assert [n for n, _ in named] == ["KERPLE", "ALiBi", "FIRE"], sentence
    for name, value in named:
        assert abs(at[COPY_NAMES[name]] - float("." + value)) <= 0.005 + 1e-9, (name, at)
    bound = re.search(r"the rest ≤ \.(\d\d)", first)
    assert bound is not None
    rest = [v for k, v in at.items() if k not in COPY_NAMES.values() and v is not None]
    assert len(rest) >= 10 and max(rest) <= float("." + bound.group(1)) + 1e-9
    learning = re.search(r"(\d+) of (\d+) still learning", first)  # the plateau table's count
    report = re.search(r"still learning: (\d+) of (\d+) configurations", text)
    assert learning is not None and report is not None
    assert learning.groups() == report.groups()
    at, still, _ = _copy_report(COPY_24K)
    plateau, learn = follow_up.split(" plateau, ")
    named = re.findall(r"(KERPLE|FIRE) \.(\d\d)", plateau)
    assert [n for n, _ in named] == ["KERPLE", "FIRE"], follow_up
    for name, value in named:
        key = name.lower()
        assert abs(at[key] - float("." + value)) <= 0.005 + 1e-9, (name, at)
        assert still[key] is False, (name, still)
    assert learn.rstrip(".") == "NoPE, randomized still learn", follow_up
    assert [k for k, v in still.items() if v] == ["none", "randomized:base=rotary"]
    assert len(still) == 4


def _rows(folder: str) -> dict[str, list[float]]:
    """Exact match at 1-16 / 17-32 / 33-64 per row of a copy report (field suffix dropped)."""
    with open(os.path.join(ROOT, folder, "report.md"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    header = next(x for x in lines if x.startswith("| encoding |") and "17-32" in x)
    rows = {}
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("| "):
            break
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        values = [c.split()[0] for c in cells[1:4]]
        rows[cells[0].removesuffix(" (real)")] = [None if v == "n/a" else float(v) for v in values]
    return rows


def test_compare_readme_copy_24k_table_equals_both_reports():
    """benchmarks/compare/README.md's table of the 24k follow-up against the 12k grid."""
    names = {
        "KERPLE": "kerple",
        "FIRE": "fire",
        "NoPE": "none",
        "randomized rotary, at plain positions": "randomized:base=rotary",
        "randomized rotary, re-scored at random positions": "randomized-eval:base=rotary",
    }
    with open(os.path.join(ROOT, "benchmarks/compare/README.md"), encoding="utf-8") as fh:
        text = fh.read()
    reports = {"24k": _rows(COPY_24K), "12k": _rows(COPY)}
    seen = 0
    for line in text[text.index("| configuration | 24k | 12k |") :].splitlines()[2:]:
        if not line.startswith("| "):
            break
        label, *columns = [c.strip() for c in line.strip("|").split("|")]
        for budget, column in zip(("24k", "12k"), columns):
            want = reports[budget][names[label]]
            got = [float(v) for v in column.split(" / ")]
            assert all(abs(g - w) <= 0.005 + 1e-9 for g, w in zip(got, want)), (label, budget)
        seen += 1
    assert seen == len(names)


def _accuracy(target: str, folds: bool) -> float:
    """The mean test accuracy over seeds of a target's committed records
    (benchmarks/accuracy-runs); with ``folds``, each seed's mean over its 10 folds first."""
    import glob
    import json

    per_seed: dict[int, list[float]] = {}
    for path in glob.glob(os.path.join(ROOT, "benchmarks/accuracy-runs", f"{target}-seed*.json")):
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
        if record["target"] == target and (record["fold"] is not None) == folds:
            per_seed.setdefault(record["seed"], []).append(record["test"])
    assert per_seed and all(len(v) == (10 if folds else 1) for v in per_seed.values()), target
    means = [sum(v) / len(v) for v in per_seed.values()]
    return sum(means) / len(means)


def test_readme_accuracy_line_equals_the_committed_records():
    """README's accuracy bullet: each figure is its preset's mean test accuracy over seeds
    (10-fold CV: the mean over seeds of each seed's 10-fold mean), to three decimals."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        text = " ".join(fh.read().split())
    start = text.index("- **Accuracy**")
    bullet = text[start : text.index(" - ", start + 1)]
    claims = {
        r"TREC CNN (\.\d{3})": ("trec-cnn", False),
        r"TREC Trf\. (\.\d{3})": ("trec-transformer", False),
        r"MR CNN (\.\d{3}) \(10-fold CV\)": ("mr-cnn", True),
        r"MR Trf\. (\.\d{3})": ("mr-transformer", False),
        r"\(`kim-cnn`\) TREC (\.\d{3})": ("trec-kim-cnn", False),
        r"MR (\.\d{3}) on 10-fold CV": ("mr-kim-cnn", True),
    }
    for pattern, (target, folds) in claims.items():
        found = re.search(pattern, bullet)
        assert found, pattern
        assert found.group(1) == f"{_accuracy(target, folds):.3f}"[1:], (target, found.group(1))


def _report_rows(folder: str, cells: int) -> list[list[str]]:
    with open(os.path.join(ROOT, folder, "report.md"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line[:2] == "| "]
    return [r for r in rows if len(r) == cells]


def test_readme_classification_grid_line_equals_the_reports():
    """README's classification bullet: the pooled p of complex-order against sinusoidal in
    table2-e3 (to three decimals) and each row's difference from the best real column in
    table2-full."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        text = " ".join(fh.read().split())
    start = text.index("- **Classification grid:**")
    bullet = text[start : text.index(" - ", start + 1)]
    pooled = next(r for r in _report_rows("benchmarks/compare/table2-e3", 7)
                  if r[:2] == ["complex-order (complex)", "sinusoidal (real)"])  # fmt: skip
    claimed = re.search(r"beats sinusoidal on Table 2 \(p = (0\.\d+)\)", bullet)
    assert claimed and claimed.group(1) == f"{float(pooled[6]):.3f}"
    rows = _report_rows("benchmarks/compare/table2-full", 11)
    names = {("TREC", "cnn"): "TREC CNN", ("TREC", "transformer"): "TREC Trf.",
             ("MR", "cnn"): "MR CNN", ("MR", "transformer"): "MR Trf."}  # fmt: skip
    for (data, model), label in names.items():
        row = next(r for r in rows if r[:2] == [data, model])
        diff = re.search(re.escape(label) + r" (-?\.\d{3})", bullet)
        assert diff and float(diff.group(1)) == float(row[6]), label
