"""The result store of a comparison grid: one file per finished cell, the tables made from them,
and the rows a cell writes.

Layout of an output folder ``OUT``::

    grid.json       the budget (training options, model overrides, data options); a later run
                    into the same folder must use the same budget (the axes may change)
    cells/<id>.json one finished cell (written atomically when it ends, success or error)
    results.csv     one row per run (regenerated from cells/ after each cell)
    results.json    the same rows with the budget ({"format", "grid", "rows"})
    runs/<id>/      the run folder of a cell in progress (its checkpoint lets an interrupted cell
                    continue exactly); removed when the cell ends unless keep_runs
    logs/<id>.log   output of a cell run in a worker process (--jobs > 1)

A cell is *done* when ``cells/<id>.json`` exists; a re-run skips done cells (cells that ended in an
error too, unless ``retry_errors``).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from .cells import SYNTHETIC, Cell, CompareError, GridOptions, cell_kind, cell_preset

__all__ = [
    "FORMAT",
    "RESULT_COLUMNS",
    "BIN_COLUMNS",
    "atomic_json",
    "base_row",
    "result_fields",
    "read_history",
    "stored_run_config",
    "ResultStore",
    "is_comparison",
    "rows_to_csv",
    "budget_diffs",
]

FORMAT = "cplxnet-compare-1"
RESULT_COLUMNS = (
    "data",
    "split",
    "fold",
    "family",
    "encoding",
    "number",
    "seed",
    "parameters",
    "dev_accuracy",
    "test_accuracy",
    "seconds",
    "epochs_run",
    "best_epoch",
    "test_macro_f1",
    "test_size",
    "train_size",
    "status",
    "error",
    "encoding_spec",
    "mode",
    "cell_id",
    "options",
)
BIN_COLUMNS = ("train_len", "bin", "bin_n", "bin_accuracy")


def _readable(path: str) -> None:
    """Give a file written through ``tempfile.mkstemp`` (mode 0600) the usual mode (0666 minus
    the umask)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def atomic_json(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (its folder created, the usual file mode)."""
    from ...engine.runs import write_json

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json(path, obj)
    _readable(path)


#: The fields of :func:`base_row` every reader of a row relies on, with their types.
_ROW_FIELDS: dict[str, type] = {"mode": str, "data": str, "encoding": str, "number": str}


def _row_problem(row: dict[str, Any]) -> str | None:
    """What makes a cell file's row unusable (a field missing or of another type, a status
    other than ``ok``/``error``), or None."""
    for key, kind in _ROW_FIELDS.items():
        if key not in row:
            return f"no {key!r}"
        if not isinstance(row[key], kind):
            return f"{key!r} is {row[key]!r}"
    if row.get("status") not in ("ok", "error"):
        return f"'status' is {row.get('status')!r}, not 'ok' or 'error'"
    return None


def base_row(cell: Cell, options: GridOptions) -> dict[str, Any]:
    """The fields every row of a cell has, whatever its outcome: the cell's axes, its id, the
    budget (``options``), the cell itself and, for a classification cell with one, its preset."""
    row = {
        "cell_id": cell.cell_id,
        "mode": cell.mode,
        "data": cell.data,
        "split": cell.split,
        "fold": cell.fold,
        "family": cell.family,
        "encoding": cell.encoding.label,
        "encoding_spec": cell.encoding.canonical,
        "number": cell.number,
        "seed": cell.seed,
        "options": options.summary(),
        "cell": cell.to_dict(),
    }
    entry = cell_preset(cell.data, cell.family, cell.number, options)
    if entry is not None and cell_kind(cell.mode).presets:
        row["preset"] = entry["preset"]
        row["preset_values"] = entry
    return row


def result_fields(results: dict[str, Any]) -> dict[str, Any]:
    """The row fields of a finished classification run from the ``results.json`` of
    :func:`cplxnet.tasks.classify.task.train`."""
    return {
        "parameters": results["real_parameters"],
        "dev_accuracy": results["dev_accuracy"],
        "test_accuracy": results["test_accuracy"],
        "test_macro_f1": results["test_macro_f1"],
        "test_size": results["test_size"],
        "train_size": results["splits"]["train"],
        "epochs_run": results["epochs_run"],
        "best_epoch": results["best_epoch"],
        "stopped_early": results["stopped_early"],
        "split_description": results["split"],
    }


def read_history(run_dir: str) -> list[dict]:
    """The per-epoch metrics of a run folder (its ``metrics.jsonl``; empty if there is none)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def stored_run_config(run_dir: str, config: Any) -> dict[str, Any] | None:
    """The ``config.json`` of a run folder if its model config is ``config`` (the fields set
    from the data aside), else None: a cell reads back or resumes only a run of its own model
    (``cplxnet train --resume RUN`` may have changed the options, which the caller compares)."""
    try:
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
            stored = json.load(fh)
    except (OSError, ValueError):
        return None
    fitted = ("vocab_size", "num_classes", "padding_idx", "max_len")  # set from the data
    model = {k: v for k, v in stored.get("model", {}).items() if k not in fitted}
    mine = {k: v for k, v in json.loads(json.dumps(dataclasses.asdict(config))).items()
            if k not in fitted}  # fmt: skip
    return stored if model == mine else None


def by_name(data: str) -> bool:
    """Whether a cell's data is named (bundled or synthetic) rather than a user's file."""
    from ...data import BUNDLED

    return data in BUNDLED or data == SYNTHETIC


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def sha256_file(path: str) -> str:
    """SHA-256 of a file (cached by path, size and modification time within a process)."""
    from ...engine.files import file_sha256

    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        _SHA_CACHE[key] = file_sha256(path)
    return _SHA_CACHE[key]


def is_comparison(folder: str) -> bool:
    """Whether ``folder`` holds a comparison: a ``grid.json`` of this :data:`FORMAT`."""
    try:
        with open(os.path.join(folder, "grid.json"), encoding="utf-8") as fh:
            return json.load(fh).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


class ResultStore:
    """The per-cell result files of an output folder and the tables made from them."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.cells_dir = os.path.join(out, "cells")

    def check_out(self) -> None:
        """Refuse an output folder compare may not write into: a file, a run folder of ``cplxnet
        train`` (or one a train holds), or an existing folder that is not a comparison (no
        ``grid.json`` of this format) and holds anything but compare's lock or temporary
        files. Touches nothing."""
        from ...engine.runs import TEMP_PREFIX, is_run_folder, run_holder

        out = self.out
        if os.path.lexists(out) and not os.path.isdir(out):
            raise CompareError(f"--out {out} is a file, not a folder; choose another --out")
        holder = run_holder(out)
        if holder is not None:
            raise CompareError(
                f"--out {out} is in use by cplxnet train ({holder}); choose another --out"
            )
        if not os.path.isdir(out):
            return
        if is_run_folder(out):
            raise CompareError(
                f"--out {out} is a run folder of cplxnet train; choose another --out"
            )
        grid = os.path.join(out, "grid.json")
        if os.path.lexists(grid):
            if not is_comparison(out):
                raise CompareError(
                    f"{grid} is not the budget file of a cplxnet comparison; choose another --out"
                )
            return
        others = sorted(
            e for e in os.listdir(out) if e != ".lock" and not e.startswith(TEMP_PREFIX)
        )
        if others:
            shown = ", ".join(others[:3]) + (
                f" and {len(others) - 3} more" if len(others) > 3 else ""
            )
            raise CompareError(
                f"--out {out} holds files cplxnet compare did not write ({shown}); give a new "
                "folder, or the folder of an earlier comparison to continue it"
            )

    def load(self, strict: bool = False) -> dict[str, dict[str, Any]]:
        """The cell files' rows by cell id. An unreadable or truncated file is skipped (its cell
        runs again), or with ``strict`` (a report) refused in one line naming it."""
        rows: dict[str, dict[str, Any]] = {}
        if not os.path.isdir(self.cells_dir):
            return rows
        for name in sorted(os.listdir(self.cells_dir)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            try:
                with open(os.path.join(self.cells_dir, name), encoding="utf-8") as fh:
                    row = json.load(fh)
            except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
                if strict:
                    raise CompareError(
                        f"{os.path.join(self.cells_dir, name)} cannot be read ({err}); restore "
                        "it, or move it away and re-run the grid's command to train that cell "
                        "again"
                    ) from None
                continue  # an unreadable file: the cell runs again
            if not isinstance(row, dict) or row.get("cell_id") != name[:-5]:
                raise CompareError(
                    f"{os.path.join(self.cells_dir, name)} is not a cell file of cplxnet compare "
                    "(no matching cell_id); move it away and run the command again"
                )
            problem = _row_problem(row)
            if problem is not None:
                if strict:
                    raise CompareError(
                        f"{os.path.join(self.cells_dir, name)} is damaged ({problem}); restore "
                        "it, or move it away and re-run the grid's command to train that cell "
                        "again"
                    )
                continue  # the cell runs again
            rows[row["cell_id"]] = row
        return rows

    def check_options(self, options: GridOptions) -> None:
        """Write ``grid.json``, or check that an existing one has the same budget. Per-cell
        presets are checked cell by cell (:meth:`check_presets`): a later run may add presets
        for cells not run yet (another dataset); ``grid.json`` then lists every preset used."""
        path = os.path.join(self.out, "grid.json")
        current = options.to_dict()
        grid: dict[str, Any] = {}  # the other entries of grid.json (data_sha256) are kept
        if os.path.exists(path) and self._holds_work():  # else: no cell ran, a new budget
            with open(path, encoding="utf-8") as fh:
                grid = json.load(fh)
            stored = grid.get("options", {})
            if isinstance(stored, dict) and bool(stored.get("lm")) != bool(current.get("lm")):
                kind = ("a language-model grid (--task lm)", "a classification grid")
                raise CompareError(
                    f"{self.out} holds {kind[not stored.get('lm')]}, and this command runs "
                    f"{kind[not current.get('lm')]}; give it another --out"
                )
            try:
                presets = stored.pop("presets", {})
                diffs = budget_diffs({**stored, "presets": presets}, current)
            except (AttributeError, TypeError, ValueError) as err:
                raise CompareError(
                    f"{path} is damaged (its options: {type(err).__name__}: {err}); restore it, "
                    "or start the grid in another --out"
                ) from None
            if diffs:
                raise CompareError(
                    f"{self.out} holds a grid run with other options ({'; '.join(diffs[:5])}); "
                    "every cell of a grid must have the same budget: use the same options or "
                    "another --out"
                )
            merged = {**presets, **current.get("presets", {})}
            if merged == presets:
                return
            current = {**stored, "presets": merged}
        os.makedirs(self.out, exist_ok=True)
        atomic_json(path, {**grid, "format": FORMAT, "options": current})

    def _holds_work(self) -> bool:
        """Whether a cell ran here: a cell file, or anything in ``runs/``."""
        cells = os.listdir(self.cells_dir) if os.path.isdir(self.cells_dir) else []
        runs = os.path.join(self.out, "runs")
        return any(n.endswith(".json") for n in cells) or (
            os.path.isdir(runs) and bool(os.listdir(runs))
        )

    def check_data(self, cells: Sequence[Cell], options: GridOptions) -> None:
        """Record in ``grid.json`` the SHA-256 of each user file the cells read (``--data``
        files, ``--vectors``), or refuse to go on when a recorded file has changed: the grid's
        cells would be trained on different data and pooled in one table."""
        paths = [c.data for c in cells if not by_name(c.data)] + [options.vectors or ""]
        now = {
            os.path.abspath(p): sha256_file(os.path.abspath(p))
            for p in dict.fromkeys(paths)
            if p and os.path.isfile(p)
        }
        path = os.path.join(self.out, "grid.json")
        with open(path, encoding="utf-8") as fh:
            grid = json.load(fh)
        recorded = grid.get("data_sha256") or {}
        if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
            raise CompareError(
                f"{path} is damaged (its data_sha256 is not a mapping of file to hash); restore "
                "it, or start the grid in another --out"
            )
        for file, digest in now.items():
            if recorded.get(file, digest) != digest:
                raise CompareError(
                    f"{file} changed since {self.out} first read it (recorded sha256 "
                    f"{recorded[file][:12]}..., now {digest[:12]}...); restore the file, or "
                    "compare on the changed one in another --out"
                )
        if not now.keys() <= recorded.keys():
            atomic_json(path, {**grid, "data_sha256": {**recorded, **now}})

    def check_presets(self, cells: Sequence[Cell], options: GridOptions, done: dict) -> None:
        """Refuse to reuse a finished cell trained with other preset values than its preset has
        now (a preset retuned or another preset given for it)."""
        for cell in cells:
            row = done.get(cell.cell_id)
            if row is None or not cell_kind(cell.mode).presets:
                continue
            now = cell_preset(cell.data, cell.family, cell.number, options)
            if row.get("preset_values") != now:
                was = row.get("preset_values")
                raise CompareError(
                    f"{self.out} holds {cell.describe()} trained with "
                    + (f"preset {was['preset']}" if was else "no preset")
                    + (" of other values" if was and now and was["preset"] == now["preset"] else "")
                    + ", now "
                    + (f"preset {now['preset']}" if now else "no preset")
                    + ": use the presets of that grid or another --out"
                )

    def write_tables(self, order: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Regenerate ``results.csv`` and ``results.json`` from the cell files; rows follow
        ``order`` (cell ids), then the others by id. Returns the rows."""
        rows = self.load()
        position = {cid: i for i, cid in enumerate(order)}
        ordered = sorted(
            rows.values(), key=lambda r: (position.get(r["cell_id"], len(order)), r["cell_id"])
        )
        options = None
        grid_path = os.path.join(self.out, "grid.json")
        if os.path.exists(grid_path):
            with open(grid_path, encoding="utf-8") as fh:
                options = json.load(fh).get("options")
        slim = [slim_row(r) for r in ordered]
        atomic_json(
            os.path.join(self.out, "results.json"),
            {"format": FORMAT, "grid": options, "rows": slim},
        )
        from ...engine.runs import atomic_write

        text = rows_to_csv(slim)
        atomic_write(os.path.join(self.out, "results.csv"), lambda fh: fh.write(text))
        _readable(os.path.join(self.out, "results.csv"))
        return slim


def slim_row(row: dict[str, Any]) -> dict[str, Any]:
    """A cell's row as ``results.json`` holds it (without the cell spec and the traceback)."""
    return {k: v for k, v in row.items() if k not in ("cell", "traceback")}


def budget_diffs(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The differences of two grid budgets (``grid.json`` options), ``"name: was A, now B"``:
    options left out read as the defaults the cells use, the presets apart (a later run may add
    presets for other cells; each cell's own is checked by :meth:`ResultStore.check_presets`),
    and the classification ``train`` options filled only where neither side has presets."""
    with_presets = bool(a.get("presets") or b.get("presets"))

    def effective(options: dict[str, Any]) -> dict[str, Any]:
        return _effective({k: v for k, v in options.items() if k != "presets"}, with_presets)

    return _diff(effective(a), effective(b))


def _effective(options: dict[str, Any], with_presets: bool) -> dict[str, Any]:
    """``options`` (a ``grid.json`` budget) with each option left out set to the default the
    cells use, so that an option given at its default is the same budget as one left out. The
    classification ``train`` options are filled only in a grid without presets (there a value
    given overrides the preset's, which is a change even when it equals the default)."""
    from ...data import DataSpec
    from ...tasks.classify.task import TrainOptions
    from ...tasks.lm import LMOptions

    def filled(given: dict[str, Any], cls: type, skip: tuple[str, ...]) -> dict[str, Any]:
        defaults = {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.name not in skip and f.default is not dataclasses.MISSING
        }
        return json.loads(json.dumps({**defaults, **given}))

    out = dict(options)
    data = {k: v for k, v in (out.get("data") or {}).items() if v is not None}  # None: default
    out["data"] = filled(data, DataSpec, ("data", "split", "fold"))
    if not with_presets:
        out["train"] = filled(out.get("train") or {}, TrainOptions, ("seed",))
    if isinstance(out.get("lm"), dict) and "train" in out["lm"]:
        out["lm"] = {**out["lm"], "train": filled(out["lm"]["train"], LMOptions, ("seed",))}
    return out


class _Unset:
    def __repr__(self) -> str:
        return "not given"


_UNSET = _Unset()  # an option absent from one side (not the same as one given as None)


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k, _UNSET), b.get(k, _UNSET), f"{prefix}{k}.")
        return out
    if a != b:
        return [f"{prefix[:-1]}: was {a!r}, now {b!r}"]
    return []


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """CSV text of ``rows`` in the layout of their kind (:attr:`CellKind.to_csv`); rows of
    several kinds are written as the kind without presets (a language model's) or else the
    first of them."""
    rows = list(rows)
    modes = {r.get("mode") or "grid" for r in rows} or {"grid"}
    first = min(modes, key=lambda m: (cell_kind(m).presets, m))
    return cell_kind(first).to_csv(rows)


def classification_rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """CSV text: one line per run (grid rows), or per run and length bin (extrapolation rows)."""
    rows = list(rows)
    buf = io.StringIO()
    extrapolation = any("bins" in r for r in rows)
    columns = list(RESULT_COLUMNS)
    if extrapolation:
        columns[columns.index("dev_accuracy") : columns.index("dev_accuracy")] = list(BIN_COLUMNS)
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        flat = {k: ("" if row.get(k) is None else row.get(k)) for k in columns}
        if extrapolation and row.get("bins"):
            for b in row["bins"]:
                writer.writerow(
                    {
                        **flat,
                        "bin": b["bin"],
                        "bin_n": b["n"],
                        "bin_accuracy": _blank(b["accuracy"]),
                    }
                )
        else:
            writer.writerow(flat)
    return buf.getvalue()


def _blank(value: Any) -> Any:
    return "" if value is None else value
