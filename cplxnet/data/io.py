"""Reading labelled text: the bundled MR and TREC data and user files (TSV, CSV, JSONL).

Every problem with a file is a :class:`DataError` whose one-line message names the file, the line
and what to do, so the command line can print it without a traceback.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources

__all__ = [
    "DataError",
    "Example",
    "Dataset",
    "BUNDLED",
    "FORMATS",
    "load_dataset",
    "read_examples",
    "read_text_lines",
    "infer_format",
    "check_text_bytes",
    "clip",
    "short_repr",
]

#: Bundled datasets: name -> {part: file inside ``cplxnet/data/bundled``}.
BUNDLED: dict[str, dict[str, str]] = {
    "mr": {"all": "mr/mr.tsv.gz"},
    "trec": {"train": "trec/train.tsv.gz", "test": "trec/test.tsv.gz"},
}
FORMATS = ("tsv", "csv", "jsonl")
_EXTENSIONS = {".tsv": "tsv", ".tab": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_UTF8_BOM = b"\xef\xbb\xbf"
#: Byte-order marks of the UTF-16 and UTF-32 encodings (UTF-32 first: its LE mark starts with
#: UTF-16's).
_WIDE_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32",
              b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}  # fmt: skip
_SEPARATOR = {"tsv": "<TAB>", "csv": ","}
_CSV_LIMIT = threading.Lock()


class DataError(ValueError):
    """A problem with the user's data: the message names the file, the line and the fix."""


def clip(text: str, limit: int = 80) -> str:
    """``repr(text)`` cut to about ``limit`` characters, for quoting user input in a message."""
    quoted = repr(text)
    if len(quoted) <= limit:
        return quoted
    return f"{quoted[: limit - 3]}... ({len(text)} characters)"


def short_repr(value: object, limit: int = 80) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[: limit - 3]}..."


def _show_columns(columns: list[str], limit: int = 8) -> str:
    shown = ", ".join(clip(c, 40) for c in columns[:limit])
    return f"[{shown}{f', ... ({len(columns)} columns)' if len(columns) > limit else ''}]"


@dataclass(frozen=True)
class Example:
    """One labelled text and where it came from (``source`` file, 1-based ``line``)."""

    text: str
    label: str
    source: str = "<memory>"
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.source} line {self.line}" if self.line else self.source


@dataclass
class Dataset:
    """A loaded dataset: ``parts`` maps ``"all"`` or ``"train"``/``"test"`` to examples."""

    name: str
    parts: dict[str, list[Example]] = field(default_factory=dict)
    bundled: bool = False

    @property
    def examples(self) -> list[Example]:
        return [ex for part in self.parts.values() for ex in part]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts.values())

    def labels(self) -> list[str]:
        return sorted({ex.label for ex in self.examples})


def infer_format(path: str, fmt: str | None = None) -> str:
    """The file format: ``fmt`` if given, else from the extension (``.gz`` is looked through)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise DataError(f"unknown data format {fmt!r}; valid formats are {', '.join(FORMATS)}")
        return fmt
    name = path[:-3] if path.endswith(".gz") else path
    ext = os.path.splitext(name)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    raise DataError(
        f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; name the file "
        f".tsv, .csv or .jsonl or pass the format explicitly (--format tsv|csv|jsonl)"
    )


def not_found(path: str, flag: str = "the path") -> DataError:
    """The error for a ``path`` that cannot be opened because nothing is there: a symbolic link
    to nothing (broken, or a loop) is named as such, else the file is not found."""
    if os.path.islink(path):
        return DataError(f"{path}: a symbolic link to nothing (broken, or a loop); check {flag}")
    return DataError(f"{path}: file not found; check {flag}")


def _read_bytes(path: str, what: str = "a data file (TSV, CSV or JSONL)") -> bytes:
    if os.path.isdir(path):
        raise DataError(f"{path}: is a directory; give {what}")
    if not os.path.exists(path):
        raise not_found(path)
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        with open(path, "rb") as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error) as err:  # a read error, a damaged .gz
        raise DataError(f"{path}: cannot read the file ({err})") from None


def check_text_bytes(raw: bytes, source: str) -> None:
    """Refuse bytes that are not UTF-8 text in a way a decoder would not name: a UTF-16 or
    UTF-32 byte-order mark, or a NUL byte (binary data, or UTF-16 without a mark)."""
    for mark, encoding in _WIDE_BOMS.items():
        if raw.startswith(mark):
            raise DataError(
                f"{source}: the file is {encoding} text (it starts with a {encoding} byte-order "
                f"mark); re-save it as UTF-8 (e.g. iconv -f {encoding.lower()} -t utf-8 in > out)"
            )
    at = raw.find(b"\x00")
    if at >= 0:
        line = raw[:at].count(b"\n" if b"\n" in raw else b"\r") + 1
        raise DataError(
            f"{source} line {line}: a NUL byte, so the file is binary or "
            "UTF-16 without a byte-order mark; give UTF-8 text (iconv -f utf-16 -t utf-8 in > out "
            "converts UTF-16)"
        )


def _decode_lines(raw: bytes, source: str) -> list[str]:
    """Split into lines (``\\n``, ``\\r\\n``, or ``\\r`` alone in a file without ``\\n``) and
    decode each as UTF-8, naming the bad line."""
    check_text_bytes(raw, source)
    raw = raw.removeprefix(_UTF8_BOM)
    lines = raw.split(b"\n" if b"\n" in raw or b"\r" not in raw else b"\r")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            bad = line[err.start : err.start + 1].hex()
            raise DataError(
                f"{source} line {number}: bytes that are not UTF-8 (0x{bad} at byte {err.start + 1}"
                "); re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 in > out)"
            ) from None
    return out


def read_text_lines(path: str) -> list[tuple[int, str]]:
    """Non-blank lines of a plain text file (one text per line) as ``(line number, text)``."""
    lines = _decode_lines(_read_bytes(path, "a text file (one text per line)"), path)
    out = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not out:
        raise DataError(f"{path}: the file has no non-blank lines; put one text per line")
    return out


def _check_header(
    columns: list[str], label_field: str, text_field: str, source: str, fmt: str
) -> None:
    missing = [f for f in (label_field, text_field) if f not in columns]
    if missing:
        raise DataError(
            f"{source} line 1: the header {_show_columns(columns)} lacks the field(s) "
            f"{', '.join(map(repr, missing))}; the first line must name the columns, e.g. "
            f"'{label_field}{_SEPARATOR[fmt]}{text_field}', or choose the fields with "
            "--label-field/--text-field"
        )


def _check_not_header(fields: list[str], columns: list[str], source: str, number: int) -> None:
    """A record equal to the header is a second header (files joined with ``cat``)."""
    if [f.strip().lstrip("\ufeff") for f in fields] == [c.strip() for c in columns]:
        raise DataError(
            f"{source} line {number}: the header again (files joined with their headers?); "
            "remove the line"
        )


def _make_example(label, text, source: str, number: int, label_field: str, text_field: str):
    if label is None or (isinstance(label, str) and not label.strip()):
        raise DataError(
            f"{source} line {number}: no label (field {label_field!r}); every example needs a "
            "label and a text"
        )
    if text is None:
        raise DataError(
            f"{source} line {number}: no text (field {text_field!r}); every example needs a "
            "label and a text"
        )
    if not isinstance(text, str):
        raise DataError(
            f"{source} line {number}: the text (field {text_field!r}) must be a string, got "
            f"{type(text).__name__}"
        )
    if not text.strip():
        raise DataError(
            f"{source} line {number}: the text is empty; remove the line or give it a text"
        )
    if isinstance(label, bool) or not isinstance(label, (str, int)):
        raise DataError(
            f"{source} line {number}: the label {short_repr(label)} must be a string or an integer"
        )
    return Example(text=text.strip(), label=str(label).strip(), source=source, line=number)


def _iter_tsv(
    lines: list[str], source: str, label_field: str, text_field: str
) -> Iterator[Example]:
    columns = lines[0].split("\t")
    _check_header(columns, label_field, text_field, source, "tsv")
    li, ti = columns.index(label_field), columns.index(text_field)
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        # No quoting: split on tabs; the last column keeps any further tabs when it is the text.
        fields = line.split("\t", len(columns) - 1)
        if len(fields) < len(columns):
            raise DataError(
                f"{source} line {number}: expected {len(columns)} tab-separated fields "
                f"{_show_columns(columns)}, found {len(fields)}; separate the label and the text "
                "with a tab"
            )
        head, tab, extra = fields[-1].partition("\t")
        if tab and ti != len(columns) - 1:
            if extra.strip():
                raise DataError(
                    f"{source} line {number}: {line.count(chr(9)) + 1} tab-separated fields "
                    f"where the header {_show_columns(columns)} has {len(columns)}; a tab can be "
                    "part of the text only when the text is the last column: remove the tab, or "
                    "use CSV or JSONL"
                )
            fields[-1] = head  # empty trailing fields (a padded export)
        _check_not_header(fields, columns, source, number)
        yield _make_example(fields[li], fields[ti], source, number, label_field, text_field)


def _iter_csv(
    lines: list[str], source: str, label_field: str, text_field: str
) -> Iterator[Example]:
    text = "\n".join(lines) + "\n"
    with _CSV_LIMIT:  # the field size limit is the process's: one reader changes it at a time
        columns, rows = _read_csv_rows(text, source, label_field, text_field)
    li, ti = columns.index(label_field), columns.index(text_field)
    _check_swallowed(rows, source, li, ti, len(columns))
    for first, _, row in rows:
        if not row or not any(cell.strip() for cell in row):
            continue
        surplus = any(cell.strip() for cell in row[len(columns) :])  # empty ones: padding
        if len(row) <= max(li, ti) or surplus:
            raise DataError(
                f"{source} line {first}: expected {len(columns)} comma-separated fields "
                f"{_show_columns(columns)}, found {len(row)}; quote texts "
                "that contain commas"
            )
        _check_not_header(row, columns, source, first)
        yield _make_example(row[li], row[ti], source, first, label_field, text_field)


def _read_csv_rows(
    text: str, source: str, label_field: str, text_field: str
) -> tuple[list[str], list[tuple[int, int, list[str]]]]:
    """The header and the records ``(first line, last line, fields)`` of a CSV text; a field
    may be as long as the text."""
    reader = csv.reader(io.StringIO(text), strict=True)
    start = 1  # the line where the record being read begins
    rows: list[tuple[int, int, list[str]]] = []
    limit = csv.field_size_limit()
    try:
        csv.field_size_limit(max(limit, len(text)))
        columns = next(reader)
        _check_header(columns, label_field, text_field, source, "csv")
        start = reader.line_num + 1
        for row in reader:
            rows.append((start, reader.line_num, row))
            start = reader.line_num + 1
    except csv.Error as err:
        if "end of data" in str(err):
            raise DataError(
                f"{source} line {start}: a quote opened on this line is never closed, so the rest "
                'of the file would be read as one text; close the quote (write "" for a quote '
                "inside a quoted text)"
            ) from None
        raise DataError(
            f"{source} line {reader.line_num}: malformed CSV ({err}); a quoted text must end "
            'with a quote followed by a comma or the line end (write "" for a quote inside it)'
        ) from None
    finally:
        csv.field_size_limit(limit)
    return columns, rows


def _check_swallowed(
    rows: list[tuple[int, int, list[str]]], source: str, li: int, ti: int, width: int
) -> None:
    """A quoted text over several lines is legal CSV, but one whose inner lines are records with
    a known label is an unclosed quote that swallowed them: name the line where it opened."""
    labels = {row[li] for first, last, row in rows if first == last and len(row) > li}
    for first, last, row in rows:
        if first == last or len(row) <= max(li, ti):
            continue
        for offset, inner in enumerate(row[ti].split("\n")[1:], 1):
            try:
                fields = next(csv.reader([inner]))
            except (csv.Error, StopIteration):
                continue
            if len(fields) == width and fields[li] in labels:
                raise DataError(
                    f"{source} line {first}: a quote opened on this line runs to line {last} and "
                    f'swallows records such as line {first + offset}; close the quote (write "" '
                    "for a quote inside a quoted text)"
                )


def _iter_jsonl(
    lines: list[str], source: str, label_field: str, text_field: str
) -> Iterator[Example]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(
                f"{source} line {number}: not valid JSON ({err.msg} at column {err.colno}); "
                "JSONL needs one JSON object per line"
            ) from None
        except (ValueError, RecursionError) as err:  # an integer of >4300 digits, deep nesting
            reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)
            raise DataError(
                f"{source} line {number}: a JSON value cplxnet cannot read ({clip(reason)}); "
                "give the label and the text as strings"
            ) from None
        if not isinstance(record, dict):
            raise DataError(
                f"{source} line {number}: expected a JSON object like "
                f'{{"{label_field}": ..., "{text_field}": ...}}, got {type(record).__name__}'
            )
        yield _make_example(
            record.get(label_field), record.get(text_field), source, number, label_field, text_field
        )


_READERS = {"tsv": _iter_tsv, "csv": _iter_csv, "jsonl": _iter_jsonl}


def read_examples(
    path: str | os.PathLike[str],
    label_field: str = "label",
    text_field: str = "text",
    fmt: str | None = None,
    *,
    _raw: bytes | None = None,
    _source: str | None = None,
) -> list[Example]:
    """Read one labelled file (TSV with a header, CSV with a header, or JSONL).

    TSV is read without quoting: each line is split on tabs into as many fields as the header has
    (a text in the last column keeps any further tabs; elsewhere a further tab is an error), so
    texts may contain ``"`` and ``''``. A CSV record with more fields than the header (an
    unquoted comma) and a record equal to the header are errors. Blank lines
    are skipped. Raises :class:`DataError` naming the file and line for every problem.
    """
    path = os.fspath(path)
    source = _source or path
    raw = _read_bytes(path) if _raw is None else _raw
    if not raw.removeprefix(_UTF8_BOM).strip():
        raise DataError(f"{source}: the file is empty; give a file of labelled examples")
    fmt = infer_format(path, fmt)
    lines = _decode_lines(raw, source)
    examples = list(_READERS[fmt](lines, source, label_field, text_field))
    if not examples:
        if fmt == "jsonl":
            raise DataError(
                f'{source}: no examples; add lines {{"{label_field}": ..., "{text_field}": ...}}'
            )
        raise DataError(
            f"{source}: no examples after the header; add lines "
            f"'<{label_field}>{_SEPARATOR[fmt]}<{text_field}>'"
        )
    return examples


def _read_bundled(name: str, file: str) -> list[Example]:
    resource = resources.files("cplxnet.data").joinpath("bundled", *file.split("/"))
    with resource.open("rb") as fh:
        raw = gzip.decompress(fh.read())
    return read_examples(file, _raw=raw, _source=f"{name}:{file.split('/')[-1][:-3]}")


def load_dataset(
    name_or_path: str | os.PathLike[str],
    label_field: str = "label",
    text_field: str = "text",
    fmt: str | None = None,
) -> Dataset:
    """Load a bundled dataset (``"mr"``, ``"trec"``) or a labelled file.

    Bundled TREC has parts ``"train"`` (5,452) and ``"test"`` (500, the official test set); MR and
    user files have one part, ``"all"``. Labels are strings. See ``bundled/PROVENANCE.md``.
    """
    name_or_path = os.fspath(name_or_path)
    if name_or_path in BUNDLED:
        parts = {part: _read_bundled(name_or_path, f) for part, f in BUNDLED[name_or_path].items()}
        return Dataset(name=name_or_path, parts=parts, bundled=True)
    bare = os.sep not in name_or_path and "." not in name_or_path
    if bare and not os.path.exists(name_or_path) and not os.path.islink(name_or_path):
        raise DataError(
            f"unknown dataset {name_or_path!r}: not a bundled dataset "
            f"({', '.join(BUNDLED)}) and no such file; give one of those names or a path"
        )
    examples = read_examples(name_or_path, label_field, text_field, fmt)
    return Dataset(name=name_or_path, parts={"all": examples})
