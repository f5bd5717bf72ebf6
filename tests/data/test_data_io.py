"""Reading labelled files and the bundled data: formats, fields, and one clear error per problem."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from cplxnet.data import BUNDLED, DataError, load_dataset, read_examples
from cplxnet.data.io import read_text_lines


def write(path, content: str | bytes) -> str:
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return str(path)


# -- bundled data -----------------------------------------------------------------------------


def test_bundled_trec_counts_and_labels():
    ds = load_dataset("trec")
    assert ds.bundled and set(ds.parts) == {"train", "test"}
    assert len(ds.parts["train"]) == 5452 and len(ds.parts["test"]) == 500
    assert Counter(ex.label for ex in ds.parts["train"]) == {
        "ENTY": 1250,
        "HUM": 1223,
        "DESC": 1162,
        "NUM": 896,
        "LOC": 835,
        "ABBR": 86,
    }
    assert Counter(ex.label for ex in ds.parts["test"]) == {
        "DESC": 138,
        "NUM": 113,
        "ENTY": 94,
        "LOC": 81,
        "HUM": 65,
        "ABBR": 9,
    }
    first = ds.parts["test"][0]
    assert (first.label, first.text) == ("NUM", "How far is it from Denver to Aspen ?")
    assert first.line == 2 and first.source == "trec:test.tsv"


def test_bundled_mr_counts_labels_and_quotes():
    ds = load_dataset("mr")
    assert set(ds.parts) == {"all"} and len(ds) == 10576
    assert Counter(ex.label for ex in ds.examples) == {"0": 5297, "1": 5279}
    assert ds.labels() == ["0", "1"]
    assert "''Conan''" in ds.examples[0].text  # no quoting: quotes survive verbatim
    assert any('"' in ex.text for ex in ds.examples)


def test_bundled_files_are_in_the_package_with_provenance():
    from importlib import resources

    root = resources.files("cplxnet.data").joinpath("bundled")
    assert "Pang & Lee" in root.joinpath("PROVENANCE.md").read_text(encoding="utf-8")
    for files in BUNDLED.values():
        for f in files.values():
            data = gzip.decompress(root.joinpath(*f.split("/")).read_bytes())
            assert data.split(b"\n", 1)[0].rstrip(b"\r") == b"label\ttext"


def test_unknown_bundled_name_lists_valid_ones():
    with pytest.raises(DataError, match=r"unknown dataset 'sst2'.*mr, trec"):
        load_dataset("sst2")


# -- formats ----------------------------------------------------------------------------------


def test_tsv_splits_on_first_tab_and_keeps_quotes(tmp_path):
    p = write(tmp_path / "d.tsv", "label\ttext\npos\the said \"hi\"\tthere\nneg\t''ok''\n\n")
    ex = read_examples(p)
    assert [(e.label, e.text, e.line) for e in ex] == [
        ("pos", 'he said "hi"\tthere', 2),
        ("neg", "''ok''", 3),
    ]


def test_tsv_custom_fields_crlf_bom_and_gzip(tmp_path):
    body = "\ufeffid\ttext\tcat\r\n1\thello world\tA\r\n2\tbye\tB\r\n"
    p = tmp_path / "d.tsv.gz"
    p.write_bytes(gzip.compress(body.encode("utf-8")))
    ex = read_examples(str(p), label_field="cat")
    assert [(e.label, e.text) for e in ex] == [("A", "hello world"), ("B", "bye")]


def test_csv_with_quoted_commas(tmp_path):
    p = write(tmp_path / "d.csv", 'text,label\n"a, b and ""c""",x\nplain,y\n')
    ex = read_examples(p)
    assert [(e.label, e.text, e.line) for e in ex] == [("x", 'a, b and "c"', 2), ("y", "plain", 3)]


def test_jsonl_with_integer_labels_and_custom_fields(tmp_path):
    lines = [{"y": 1, "sentence": "good"}, {"y": 0, "sentence": "bad", "extra": 3}]
    p = write(tmp_path / "d.jsonl", "\n".join(json.dumps(r) for r in lines) + "\n")
    ex = read_examples(p, label_field="y", text_field="sentence")
    assert [(e.label, e.text) for e in ex] == [("1", "good"), ("0", "bad")]


def test_format_override_and_unknown_extension(tmp_path):
    p = write(tmp_path / "d.txt", "label\ttext\na\tx\n")
    with pytest.raises(DataError, match=r"d\.txt: cannot tell the format.*--format"):
        read_examples(p)
    assert read_examples(p, fmt="tsv")[0].text == "x"
    with pytest.raises(DataError, match="unknown data format 'xml'"):
        read_examples(p, fmt="xml")


# -- errors: one clear message naming the file, the line and the fix ---------------------------


@pytest.mark.parametrize(
    "name, content, pattern",
    [
        ("empty.tsv", "", r"empty\.tsv: the file is empty"),
        ("blank.tsv", "\n\n  \n", r"blank\.tsv: the file is empty"),
        ("header_only.tsv", "label\ttext\n", r"header_only\.tsv: no examples after the header"),
        (
            "bad_header.tsv",
            "lbl\ttxt\na\tb\n",
            r"bad_header\.tsv line 1: the header \['lbl', 'txt'\] lacks the field\(s\) 'label', "
            r"'text'.*--label-field",
        ),
        (
            "no_tab.tsv",
            "label\ttext\npos\tgood\nneg bad\n",
            r"no_tab\.tsv line 3: expected 2 tab-separated fields.*found 1",
        ),
        ("no_label.tsv", "label\ttext\npos\tgood\n\tbad\n", r"no_label\.tsv line 3: no label"),
        (
            "empty_text.tsv",
            "label\ttext\npos\tgood\nneg\t  \n",
            r"empty_text\.tsv line 3: the text is empty",
        ),
        ("bad.csv", "label,text\npos\n", r"bad\.csv line 2: expected 2 comma-separated fields"),
        (
            "bad.jsonl",
            '{"label": 1, "text": "a"}\n{"label": 1,\n',
            r"bad\.jsonl line 2: not valid JSON",
        ),
        ("notobj.jsonl", "[1, 2]\n", r"notobj\.jsonl line 1: expected a JSON object"),
        ("nolabel.jsonl", '{"text": "a"}\n', r"nolabel\.jsonl line 1: no label \(field 'label'\)"),
        ("notext.jsonl", '{"label": "a"}\n', r"notext\.jsonl line 1: no text \(field 'text'\)"),
        (
            "numtext.jsonl",
            '{"label": "a", "text": 5}\n',
            r"numtext\.jsonl line 1: the text \(field 'text'\) must be a string",
        ),
    ],
)
def test_malformed_files(tmp_path, name, content, pattern):
    with pytest.raises(DataError, match=pattern):
        read_examples(write(tmp_path / name, content))


def test_non_utf8_bytes_name_the_line(tmp_path):
    p = write(tmp_path / "latin.tsv", b"label\ttext\npos\tgood\n" + b"neg\tcaf\xe9\n")
    with pytest.raises(DataError, match=r"latin\.tsv line 3: bytes that are not UTF-8.*0xe9"):
        read_examples(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(DataError, match=r"nope\.tsv: file not found"):
        load_dataset(str(tmp_path / "nope.tsv"))
    with pytest.raises(DataError, match="is a directory"):
        read_examples(str(tmp_path))


def test_read_text_lines(tmp_path):
    p = write(tmp_path / "t.txt", "first text\n\nsecond\n")
    assert read_text_lines(p) == [(1, "first text"), (3, "second")]
    with pytest.raises(DataError, match="no non-blank lines"):
        read_text_lines(write(tmp_path / "e.txt", "\n \n"))


# -- unclosed quotes and over-long input in messages -------------------------------------------


def _csv(n: int, broken: int | None = None, close_at: int | None = None) -> str:
    """``n`` records; record ``broken`` opens a quote, closed at the end of record ``close_at``."""
    lines = ["label,text"]
    for i in range(n):
        text = f"record {i} is fine"
        if i == broken:
            text = '"' + text
        if i == close_at:
            text = text + '"'
        lines.append(f"{'pos' if i % 2 else 'neg'},{text}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "content, pattern",
    [
        (_csv(80, broken=40), r"line 42: a quote opened on this line is never closed"),
        (
            _csv(80, broken=3, close_at=9),
            r"line 5: a quote opened on this line runs to line 11 "
            r"and swallows records such as line 6",
        ),
        ('label,text\npos,"good" movie\nneg,bad\n', r"line 2: malformed CSV"),
    ],
    ids=["never-closed", "closed-later", "text-after-quote"],
)
def test_csv_unclosed_quote_names_the_line_where_it_opened(tmp_path, content, pattern):
    with pytest.raises(DataError, match=pattern):
        read_examples(write(tmp_path / "q.csv", content))


def test_csv_quoted_text_over_several_lines_is_still_read(tmp_path):
    content = 'label,text\npos,"first paragraph\nsecond paragraph, with a comma"\nneg,bad\n'
    examples = read_examples(write(tmp_path / "multi.csv", content))
    assert [(ex.label, ex.line) for ex in examples] == [("pos", 2), ("neg", 4)]
    assert examples[0].text == "first paragraph\nsecond paragraph, with a comma"
    assert len(read_examples(write(tmp_path / "ok.csv", _csv(80)))) == 80


@pytest.mark.parametrize(
    "name, content",
    [
        ("header.tsv", "x" * 5_000_000 + "\tcat\npos\tgood\n"),
        ("header.csv", "x" * 5_000_000 + ",cat\npos,good\n"),
        ("fields.tsv", "label\t" + "t" * 5_000_000 + "\npos\n"),
        ("label.jsonl", json.dumps({"label": ["x" * 5_000_000], "text": "good"}) + "\n"),
    ],
)
def test_huge_input_is_cut_in_messages(tmp_path, name, content):
    with pytest.raises(DataError) as err:
        read_examples(write(tmp_path / name, content))
    message = str(err.value)
    assert len(message) < 600 and "\n" not in message, message[:300]
    assert name in message
