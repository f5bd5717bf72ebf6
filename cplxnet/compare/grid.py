"""The comparison grid: datasets x folds x families x encodings x number fields x seeds, every cell
trained with the same budget, results stored one file per cell so a grid can be interrupted and
continued, and run in parallel processes or on a Dask cluster (:mod:`.executors`).

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

import contextlib
import csv
import dataclasses
import datetime
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .specs import EncodingSpec, numbers_for

__all__ = [
    "Cell",
    "GridOptions",
    "CompareError",
    "expand_grid",
    "check_combination",
    "cell_config",
    "run_cell",
    "run_grid",
    "ResultStore",
    "RESULT_COLUMNS",
    "CellKind",
    "CELL_KINDS",
    "cell_kind",
    "parse_folds",
    "parse_seeds",
    "parse_sets",
    "parse_presets",
    "cell_preset",
    "cell_train",
]

FORMAT = "cplxnet-compare-1"
REAL_WIDTHS = {"same": "width", "params": "params", "flops": "flops"}
SYNTHETIC = "synthetic"

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


class CompareError(Exception):
    """A problem with the comparison's arguments or output folder (the message says the fix)."""


# ------------------------------------------------------------------------------------------------
# parsing helpers


def _parse_int_list(text: str, what: str) -> list[int]:
    out: list[int] = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"(-?\d+)\s*-\s*(-?\d+)", item)
        try:
            if m:
                a, b = int(m.group(1)), int(m.group(2))
                if b < a:
                    raise CompareError(f"{what}: empty range {item!r}")
                out += list(range(a, b + 1))
            else:
                out.append(int(item))
        except ValueError:
            raise CompareError(
                f"{what}: expected integers or ranges like 0-4, got {item!r}"
            ) from None
    if not out:
        raise CompareError(f"{what}: nothing given")
    return list(dict.fromkeys(out))


def parse_seeds(text: str | int) -> list[int]:
    """``5`` -> seeds 0..4; ``0,3,7`` or ``10-14`` -> those seeds."""
    text = str(text).strip()
    if re.fullmatch(r"\d+", text):
        n = int(text)
        if n < 1:
            raise CompareError("--seeds: need at least one seed")
        return list(range(n))
    return _parse_int_list(text, "--seeds")


def parse_folds(text: str, num_folds: int = 10) -> list[int | None]:
    """``quick`` -> the one quick split (``[None]``); ``all`` -> folds 0..9; ``3``, ``0-4``,
    ``0,5`` -> those cross-validation test folds (numbered 0..9 as ``cplxnet train --fold``)."""
    text = str(text).strip().lower()
    if text in ("quick", "none", ""):
        return [None]
    if text == "all":
        return list(range(num_folds))
    folds = _parse_int_list(text, "--folds")
    bad = [f for f in folds if not 0 <= f < num_folds]
    if bad:
        raise CompareError(
            f"--folds: fold {bad[0]} is out of range; folds are numbered 0..{num_folds - 1} "
            f"(as cplxnet train --fold), e.g. --folds 0-{num_folds - 1} or --folds all"
        )
    return folds


_GRID_CHOSEN = {
    key: f"the grid chooses {key}; use --encodings / --number instead"
    for key in ("encoding", "encoding_options", "complex", "family")
}


def parse_sets(items: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """``--set key=value`` (every family that has the field) or ``--set family.key=value``
    (:func:`cplxnet.compare.specs.parse_sets`; the grid chooses the encoding, the number field
    and the family)."""
    from .specs import parse_sets as parse

    try:
        return parse(items, _GRID_CHOSEN)
    except ValueError as err:
        raise CompareError(str(err)) from None


PRESET_NUMBERS = ("real", "complex")


def _preset_key(key: str) -> tuple[str, str, str]:
    """``"DATA:FAMILY@NUMBER"`` (``*`` for a part not given) -> its three parts."""
    data, rest = key.rsplit(":", 1)
    family, number = rest.split("@", 1)
    return data, family, number


def _preset_label(key: str) -> str:
    """``"*:cnn@*"`` -> ``"cnn"``: a key as it is written on the command line."""
    data, family, number = _preset_key(key)
    return ("" if data == "*" else f"{data}:") + family + ("" if number == "*" else f"@{number}")


def parse_presets(items: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """``--preset [DATA:]FAMILY[@NUMBER]=PRESET`` (repeatable) -> ``{"DATA:FAMILY@NUMBER":
    {"preset", "model", "train"}}`` with ``*`` for the parts not given, the preset's model fields
    (:data:`models.PRESETS` without its family) and its training budget
    (:data:`models.PRESET_TRAINING`), copied so that the grid stores what its cells used.

    ``DATA`` is mr, trec, synthetic or a data file; ``NUMBER`` is real or complex."""
    import copy

    import cplxnet.models as models

    from ..data import BUNDLED

    out: dict[str, dict[str, Any]] = {}
    for item in items or ():
        form = "use --preset [DATA:]FAMILY[@real|@complex]=PRESET, e.g. trec:cnn@real=kim-cnn"
        lhs, eq, name = item.partition("=")
        lhs, name = lhs.strip(), name.strip()
        if not eq or not lhs or not name:
            raise CompareError(f"--preset {item}: {form}")
        data, _, rest = lhs.rpartition(":")
        family, _, number = rest.partition("@")
        data, family, number = data.strip() or "*", family.strip(), number.strip() or "*"
        if family not in models.FAMILIES or family == "decoder":
            usable = ", ".join(f for f in models.FAMILIES if f != "decoder")
            raise CompareError(f"--preset {item}: unknown family {family!r}; use one of {usable}")
        if number not in ("*", *PRESET_NUMBERS):
            raise CompareError(
                f"--preset {item}: unknown number field {number!r}; use @real or @complex "
                "(or neither for both)"
            )
        if data not in ("*", SYNTHETIC, *BUNDLED) and not os.path.isfile(data):
            raise CompareError(
                f"--preset {item}: unknown data {data!r}; use {', '.join(BUNDLED)}, "
                f"{SYNTHETIC} or a data file"
            )
        if name not in models.PRESETS:
            same = [k for k, v in models.PRESETS.items() if v["family"] == family]
            raise CompareError(
                f"--preset {item}: unknown preset {name!r}; {family} presets are " + ", ".join(same)
            )
        fields = copy.deepcopy(models.PRESETS[name])
        if fields.pop("family") != family:
            same = [k for k, v in models.PRESETS.items() if v["family"] == family]
            raise CompareError(
                f"--preset {item}: {name} is a {models.PRESETS[name]['family']} preset, not "
                f"{family}; {family} presets are " + ", ".join(same)
            )
        key = f"{data}:{family}@{number}"
        if key in out:
            raise CompareError(
                f"--preset {item}: {_preset_label(key)} is given twice ({out[key]['preset']} and "
                f"{name}); keep one"
            )
        train = copy.deepcopy(models.PRESET_TRAINING.get(name, {}))
        out[key] = json.loads(json.dumps({"preset": name, "model": fields, "train": train}))
    return out


def cell_preset(data: str | None, family: str, number: str, options: GridOptions) -> dict | None:
    """The preset entry of :attr:`GridOptions.presets` that applies to a cell (``None``: none):
    the most specific match, the data counting more than the number field
    (``trec:cnn@real`` > ``trec:cnn`` > ``cnn@real`` > ``cnn``)."""
    best: tuple[int, dict] | None = None
    for key, entry in options.presets.items():
        d, f, n = _preset_key(key)
        if f != family or n not in ("*", number):
            continue
        if d != "*" and (
            data is None or (d != data and os.path.abspath(d) != os.path.abspath(data))
        ):
            continue
        score = 2 * (d != "*") + (n != "*")
        if best is None or score > best[0]:
            best = (score, entry)
    return None if best is None else best[1]


def cell_train(cell: Cell, options: GridOptions) -> dict[str, Any]:
    """The training options of a cell (without the seed): its preset's budget, if any, with the
    budget flags given (``options.train``) over it."""
    entry = cell_preset(cell.data, cell.family, cell.number, options)
    return {**(entry["train"] if entry else {}), **options.train}


# ------------------------------------------------------------------------------------------------
# options and cells


@dataclass
class GridOptions:
    """The budget shared by every cell (stored in ``grid.json``).

    Attributes:
        train: :class:`cplxnet.train.TrainOptions` fields except ``seed`` (epochs, lr, ...).
        sets: model field overrides, ``{"*": {...}, "cnn": {...}}`` (``*``: every family that
            has the field).
        real_width: widths of a real cell relative to the complex config: ``same`` (same
            ``d_model`` and hidden widths, the config convention), ``params`` (x sqrt 2) or
            ``flops`` (x 2), see :func:`models.real_twin`.
        data: :class:`cplxnet.data.DataSpec` options (split_seed, limit, max_len, min_freq,
            max_size, clean).
        vectors: pretrained word vectors file for every cell (``None``: none).
        extrapolate: length-extrapolation options (``train_len`` per dataset, ``factors``,
            synthetic task sizes); see :mod:`cplxnet.compare.extrapolate`.
        lm: language-model grid options (preset, tokens, context and the
            :class:`cplxnet.lm.LMOptions` fields); see :mod:`cplxnet.compare.lm`. Left out of
            :meth:`to_dict` when empty, so classification grids store what they always did.
        presets: per-cell presets of a classification grid (:func:`parse_presets`): the preset's
            model fields and budget as they were when the grid started, so that a re-run with
            a changed preset is refused rather than mixed with the old cells. A cell's config is
            its preset's fields, then ``sets``, then the column's encoding (the preset's encoding
            options are kept for its own encoding); its training options are the preset's
            budget with ``train`` over it (:func:`cell_train`). Left out of :meth:`to_dict` when
            empty.
    """

    train: dict[str, Any] = field(default_factory=dict)
    sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    real_width: str = "same"
    data: dict[str, Any] = field(default_factory=dict)
    vectors: str | None = None
    extrapolate: dict[str, Any] = field(default_factory=dict)
    lm: dict[str, Any] = field(default_factory=dict)
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.real_width not in REAL_WIDTHS:
            raise CompareError(
                f"unknown real width {self.real_width!r}; use one of {', '.join(REAL_WIDTHS)}"
            )
        self.train = {k: v for k, v in self.train.items() if k != "seed"}
        from ..train import TrainOptions

        for entry in [{"train": {}}, *self.presets.values()]:
            try:
                TrainOptions(**{**entry["train"], **self.train})
            except (TypeError, ValueError) as err:
                where = f" (preset {entry['preset']})" if "preset" in entry else ""
                raise CompareError(f"training options{where}: {err}") from None

    def to_dict(self) -> dict[str, Any]:
        d = json.loads(json.dumps(dataclasses.asdict(self)))
        for key in ("lm", "presets"):
            if not d[key]:
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GridOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def summary(self) -> str:
        """The options as one compact JSON string (the ``options`` column)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


def _data_slug(data: str) -> str:
    if data in ("mr", "trec", SYNTHETIC):
        return data
    base = os.path.splitext(os.path.basename(data[:-3] if data.endswith(".gz") else data))[0]
    digest = hashlib.sha1(os.path.abspath(data).encode()).hexdigest()[:6]
    return f"{re.sub(r'[^A-Za-z0-9.-]+', '_', base)}-{digest}"


def has_own_test(data: str) -> bool:
    """Datasets with an official test set (folds do not apply): bundled TREC, the synthetic task."""
    from ..data import BUNDLED

    return data == SYNTHETIC or (data in BUNDLED and "test" in BUNDLED[data])


@dataclass(frozen=True)
class Cell:
    """One run of the grid."""

    data: str
    fold: int | None
    family: str
    encoding: EncodingSpec
    number: str
    seed: int
    mode: str = "grid"

    @property
    def split(self) -> str:
        kind = cell_kind(self.mode)
        if kind is not None:
            return kind.split
        if self.fold is not None:
            return "cv"
        return "test set" if has_own_test(self.data) else "quick"

    @property
    def cell_id(self) -> str:
        kind = cell_kind(self.mode)
        if kind is not None:
            return kind.cell_id(self)
        fold = f"cv{self.fold}" if self.fold is not None else self.split.split()[0]
        prefix = "x-" if self.mode == "extrapolate" else ""
        return (
            f"{prefix}{_data_slug(self.data)}-{fold}-{self.family}-{self.encoding.slug}-"
            f"{self.number}-s{self.seed}"
        )

    def describe(self) -> str:
        where = self.data if self.fold is None else f"{self.data} fold {self.fold}"
        return f"{where} {self.family} {self.encoding.label} {self.number} seed {self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "fold": self.fold,
            "family": self.family,
            "encoding": self.encoding.to_dict(),
            "number": self.number,
            "seed": self.seed,
            "mode": self.mode,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(
            d["data"],
            d["fold"],
            d["family"],
            EncodingSpec.from_dict(d["encoding"]),
            d["number"],
            int(d["seed"]),
            d.get("mode", "grid"),
        )


@dataclass(frozen=True)
class CellKind:
    """A kind of cell other than classification (its ``Cell.mode``): how it is named, trained,
    reported in progress lines and written to ``results.csv``; the store, the scheduler and the
    workers are shared. Registered in :data:`CELL_KINDS` by the module that defines it.

    Attributes:
        split: the ``split`` column of its rows.
        cell_id: ``cell -> id`` (a file name).
        train: ``(cell, options, run_dir, callback) -> fields`` of the row; resumes from
            ``run_dir`` when it holds an interrupted run.
        outcome: ``row -> text`` of a finished cell's progress line.
        progress: ``(cell, step, metrics) -> text`` of an in-training progress line.
        to_csv: ``rows -> CSV text`` of ``results.csv``.
    """

    split: str
    cell_id: Callable[[Cell], str]
    train: Callable[..., dict[str, Any]]
    outcome: Callable[[dict[str, Any]], str]
    progress: Callable[[Cell, int, dict[str, Any]], str]
    to_csv: Callable[[Sequence[dict[str, Any]]], str]


CELL_KINDS: dict[str, str] = {"lm": "cplxnet.compare.lm"}  # mode -> module with ``KIND``


def cell_kind(mode: str) -> CellKind | None:
    """The :class:`CellKind` of ``mode`` (``None`` for the classification modes)."""
    module = CELL_KINDS.get(mode)
    if module is None:
        return None
    import importlib

    return importlib.import_module(module).KIND


# ------------------------------------------------------------------------------------------------
# model configs and grid expansion


def cell_config(
    family: str,
    encoding: EncodingSpec,
    number: str,
    options: GridOptions,
    *,
    data: str | None = None,
    **extra: Any,
) -> Any:
    """The model config of a cell: ``make_config(family)`` of the zoo with the model fields of the
    cell's preset (:func:`cell_preset` for ``data``), the ``--set`` overrides, the model fields
    of a model variant (``encoding.model``, e.g. ``projection="real"``) and the encoding (with
    the preset's encoding options under the column's when it is the preset's own encoding); a
    real cell is :func:`models.real_twin` of the complex config with ``options.real_width``."""
    import cplxnet.models as models

    names = {f.name for f in dataclasses.fields(models.CONFIG_CLASSES[family]) if f.init}
    entry = cell_preset(data, family, number, options)
    preset = dict(entry["model"]) if entry else {}
    own = preset.pop("encoding", None) == encoding.name
    enc_options = {**(preset.pop("encoding_options", {}) if own else {}), **encoding.options}
    preset.pop("encoding_options", None)
    fields = preset  # its ``complex`` is replaced below: the cell's number field decides
    fields.update({k: v for k, v in options.sets.get("*", {}).items() if k in names})
    fields.update(options.sets.get(family, {}))
    fields.update(encoding.model)
    fields.update(extra)
    fields.update(encoding=encoding.name, encoding_options=enc_options, complex=True)
    config = models.make_config(family, **fields)
    if number == "real":
        config = models.real_twin(config, match=REAL_WIDTHS[options.real_width])
    return config


def _check_option_types(encoding: EncodingSpec) -> None:
    """An option whose default is a bool must be true/false, a number must be a number (the
    encodings themselves accept e.g. any truthy value for a flag)."""
    import inspect

    from ..encodings import encoding_option_parameters

    params = encoding_option_parameters(encoding.name)
    for key, value in encoding.options.items():
        p = params.get(key)
        if p is None or p.default is inspect.Parameter.empty or p.default is None:
            continue
        default = p.default
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = True
        if not ok:
            kind = "true or false" if isinstance(default, bool) else "a number"
            raise CompareError(
                f"encoding {encoding.label}: option {key} must be {kind}, got {value!r}"
            )


def check_combination(
    family: str, encoding: EncodingSpec, number: str, options: GridOptions, data: str | None = None
) -> str | None:
    """``None`` if the cell can be built; a note if the encoding acts on a site the family lacks
    (e.g. a relative encoding with a model without attention) or a model variant sets a field
    the family does not have. Any other problem (an unknown option, a bad width) raises
    :class:`CompareError`."""
    import torch

    import cplxnet.models as models

    from ..encodings import check_sites, create_encoding

    names = {f.name for f in dataclasses.fields(models.CONFIG_CLASSES[family]) if f.init}
    missing = sorted(set(encoding.model) - names)
    if missing:
        return f"the {family} model has no field {', '.join(missing)}"

    entry = cell_preset(data, family, number, options)
    what = f"{family} with {encoding.label} ({number}" + (
        f", preset {entry['preset']} on {data})" if entry else ")"
    )
    try:
        config = cell_config(family, encoding, number, options, data=data)
        config = dataclasses.replace(config, vocab_size=8, num_classes=2)
    except (TypeError, ValueError) as err:
        raise CompareError(f"{what}: {err}") from None
    _check_option_types(encoding)
    cls = models.MODEL_CLASSES[family]
    try:
        enc = create_encoding(
            encoding.name,
            d_model=config.d_model,
            num_heads=getattr(config, "num_heads", 1),
            vocab_size=config.vocab_size,
            max_len=config.max_len,
            dtype=None if number == "complex" else torch.get_default_dtype(),
            **config.encoding_options,
        )
    except (TypeError, ValueError) as err:
        raise CompareError(f"encoding {encoding.label} ({number}, {family}): {err}") from None
    if not set(enc.acts_on) <= set(cls.supported_sites):
        try:
            check_sites(enc, cls.supported_sites, family)
        except ValueError as err:
            return str(err).split(";")[0]
    try:
        models.build_model(config)
    except (TypeError, ValueError) as err:
        raise CompareError(f"{what}: {err}") from None
    return None


def expand_grid(
    datas: Sequence[str],
    families: Sequence[str],
    encodings: Sequence[EncodingSpec],
    numbers: tuple[str, ...],
    seeds: Sequence[int],
    folds: Sequence[int | None],
    options: GridOptions,
    *,
    mode: str = "grid",
) -> tuple[list[Cell], list[str]]:
    """The cells (seed-major order: every cell of the first seed, then the next seed, ...) and
    notes on skipped combinations.

    A combination of family and encoding that cannot work (an attention encoding with a family
    without attention) is skipped with a note; if an encoding or a family is left with no cell
    at all, that is an error (nothing of what was asked for it would run) -- except for a model
    variant (``complex-order-real-proj``, e.g. from ``table4``) that no family has the fields
    for, which is only noted.
    ``folds`` apply to datasets without their own test set (MR, a user file); bundled TREC and
    the synthetic task always use their test set.
    """
    import cplxnet.models as models

    for family in families:
        if family not in models.FAMILIES:
            raise CompareError(f"unknown family {family!r}; families: {', '.join(models.FAMILIES)}")
    known = {f.name for fam in families for f in dataclasses.fields(models.CONFIG_CLASSES[fam])}
    for key in options.sets.get("*", {}):
        if key not in known:
            raise CompareError(
                f"--set {key}: no family of {', '.join(families)} has the field {key!r}"
            )
    for family in options.sets:
        if family != "*" and family not in models.FAMILIES:
            raise CompareError(f"--set {family}.*: unknown family {family!r}")
    if options.presets and mode != "grid":
        raise CompareError("--preset applies to the classification grid; drop it or --extrapolate")
    # with presets a combination is also built with each dataset's preset (errors name it)
    preset_datas = list(dict.fromkeys(datas)) if options.presets else [None]
    notes: list[str] = []
    valid: list[tuple[str, EncodingSpec, str]] = []
    used_enc: set[str] = set()
    used_fam: set[str] = set()
    for family in families:
        for spec in encodings:
            for number in numbers_for(spec, numbers):
                for data in preset_datas:
                    note = check_combination(family, spec, number, options, data=data)
                    if note is not None:
                        break
                if note is None:
                    valid.append((family, spec, number))
                    used_enc.add(spec.label)
                    used_fam.add(family)
                else:
                    msg = f"skipped {family} x {spec.label} ({number}): {note}"
                    if msg not in notes:
                        notes.append(msg)
    for spec in encodings:
        if spec.label not in used_enc and not spec.model:  # a model variant: noted, not an error
            raise CompareError(
                f"encoding {spec.label} cannot run with any of the families "
                f"{', '.join(families)}: {'; '.join(n for n in notes if spec.label in n)}"
            )
    for family in families:
        if family not in used_fam:
            raise CompareError(f"family {family} has no usable encoding among those given")
    for key, entry in options.presets.items():
        d, f, _ = _preset_key(key)
        if f not in families or (
            d != "*"
            and not any(
                cell_preset(x, f, n, options) is entry for x in datas for n in PRESET_NUMBERS
            )
        ):
            notes.append(f"--preset {_preset_label(key)}={entry['preset']} matches no cell")
    cells: list[Cell] = []
    for seed in seeds:
        for data in datas:
            data_folds = [None] if has_own_test(data) else list(folds)
            for fold in data_folds:
                for family, spec, number in valid:
                    cells.append(Cell(data, fold, family, spec, number, seed, mode))
    if any(has_own_test(d) for d in datas) and any(f is not None for f in folds):
        notes.append(
            "folds apply to datasets without their own test set; "
            + ", ".join(d for d in datas if has_own_test(d))
            + " use their test set"
        )
    return cells, notes


# ------------------------------------------------------------------------------------------------
# running one cell


def _readable(path: str) -> None:
    """Give a file written through ``tempfile.mkstemp`` (mode 0600) the usual mode (0666 minus
    the umask)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _atomic_json(path: str, obj: Any) -> None:
    from ..runs import write_json

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json(path, obj)
    _readable(path)


def _data_spec(cell: Cell, options: GridOptions) -> Any:
    from ..data import DataSpec

    known = {f.name for f in dataclasses.fields(DataSpec)}
    extra = {k: v for k, v in options.data.items() if k in known and v is not None}
    return DataSpec(
        data=cell.data, split="cv" if cell.fold is not None else "quick", fold=cell.fold, **extra
    )


def _base_row(cell: Cell, options: GridOptions) -> dict[str, Any]:
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
    if entry is not None and cell_kind(cell.mode) is None:
        row["preset"] = entry["preset"]
    return row


def run_cell(
    cell: Cell,
    out: str,
    options: GridOptions,
    *,
    keep_runs: bool = False,
    callback: Callable[[int, dict], None] | None = None,
) -> dict[str, Any]:
    """Train one cell and write ``out/cells/<id>.json`` (atomically). Never raises for a failed
    training: the error is recorded in the row (``status="error"``); KeyboardInterrupt passes.
    ``callback(epoch, metrics)`` is called after each epoch (as :func:`cplxnet.train.train`)."""
    row = _base_row(cell, options)
    started = time.perf_counter()
    run_dir = os.path.join(out, "runs", cell.cell_id)
    kind = cell_kind(cell.mode)
    try:
        if kind is not None:
            result = kind.train(cell, options, run_dir, callback)
        elif cell.mode == "extrapolate":
            from .extrapolate import train_extrapolation_cell

            result = train_extrapolation_cell(cell, options, run_dir, callback=callback)
        else:
            result = _train_grid_cell(cell, options, run_dir, callback=callback)
        row.update(result)
        row["status"] = "ok"
        row["error"] = ""
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded, the grid goes on
        row["status"] = "error"
        row["error"] = f"{type(err).__name__}: {err}"
        row["traceback"] = traceback.format_exc(limit=8)
    row["seconds"] = round(time.perf_counter() - started + row.pop("previous_seconds", 0.0), 1)
    row["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    _atomic_json(os.path.join(out, "cells", cell.cell_id + ".json"), row)
    if not keep_runs and row["status"] == "ok":
        shutil.rmtree(run_dir, ignore_errors=True)
    return row


def _result_fields(results: dict[str, Any]) -> dict[str, Any]:
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


def _read_history(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _train_grid_cell(
    cell: Cell,
    options: GridOptions,
    run_dir: str,
    callback: Callable[[int, dict], None] | None = None,
) -> dict[str, Any]:
    from .. import train as engine
    from ..data import prepare_data

    config = cell_config(cell.family, cell.encoding, cell.number, options, data=cell.data)
    topts = engine.TrainOptions(**cell_train(cell, options), seed=cell.seed)
    resumed = False
    done = os.path.join(run_dir, "results.json")
    if os.path.exists(done):  # finished but not yet recorded (interrupted in between)
        with open(done, encoding="utf-8") as fh:
            results = json.load(fh)
        resumed = True
    elif os.path.exists(os.path.join(run_dir, "checkpoint.pt")) and cell.data != SYNTHETIC:
        results = engine.resume(run_dir, quiet=True, callback=callback)
        resumed = True
    else:
        if os.path.lexists(run_dir):
            shutil.rmtree(run_dir)
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        if cell.data == SYNTHETIC:
            from .extrapolate import synthetic_data

            data = synthetic_data(options, cell, bins=False)
        else:
            data = prepare_data(_data_spec(cell, options), model_max_len=config.max_len)
        results = engine.train(
            config, data, run_dir, topts, vectors=options.vectors, quiet=True, callback=callback
        )
    out = _result_fields(results)
    out["resumed"] = resumed
    out["history"] = _read_history(run_dir)
    return out


# ------------------------------------------------------------------------------------------------
# results store


class ResultStore:
    """The per-cell result files of an output folder and the tables made from them."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.cells_dir = os.path.join(out, "cells")

    def load(self) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        if not os.path.isdir(self.cells_dir):
            return rows
        for name in sorted(os.listdir(self.cells_dir)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            try:
                with open(os.path.join(self.cells_dir, name), encoding="utf-8") as fh:
                    row = json.load(fh)
            except (OSError, json.JSONDecodeError):
                continue  # an unreadable file: the cell runs again
            rows[row.get("cell_id", name[:-5])] = row
        return rows

    def check_options(self, options: GridOptions) -> None:
        """Write ``grid.json``, or check that an existing one has the same budget."""
        path = os.path.join(self.out, "grid.json")
        current = options.to_dict()
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                stored = json.load(fh).get("options", {})
            diffs = _diff(stored, current)
            if diffs:
                raise CompareError(
                    f"{self.out} holds a grid run with other options ({'; '.join(diffs[:5])}); "
                    "every cell of a grid must have the same budget: use the same options or "
                    "another --out"
                )
            return
        os.makedirs(self.out, exist_ok=True)
        _atomic_json(path, {"format": FORMAT, "options": current})

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
        slim = [{k: v for k, v in r.items() if k not in ("cell", "traceback")} for r in ordered]
        _atomic_json(
            os.path.join(self.out, "results.json"),
            {"format": FORMAT, "grid": options, "rows": slim},
        )
        from ..runs import atomic_write

        text = rows_to_csv(slim)
        atomic_write(os.path.join(self.out, "results.csv"), lambda fh: fh.write(text))
        _readable(os.path.join(self.out, "results.csv"))
        return slim


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    if a != b:
        return [f"{prefix[:-1]}: was {a!r}, now {b!r}"]
    return []


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """CSV text: one line per run (grid rows), or per run and length bin (extrapolation rows)."""
    rows = list(rows)
    kinds = {r.get("mode") for r in rows if cell_kind(r.get("mode", "grid")) is not None}
    if kinds:
        return cell_kind(sorted(kinds)[0]).to_csv(rows)
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


# ------------------------------------------------------------------------------------------------
# the grid runner


def _fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


class _Eta:
    """Remaining time from the mean duration of finished cells of the same family and mode."""

    def __init__(self, previous: Iterable[dict[str, Any]]) -> None:
        self.times: dict[tuple[str, str], list[float]] = {}
        for row in previous:
            if row.get("status") == "ok" and row.get("seconds"):
                self.add(row["family"], row.get("mode", "grid"), float(row["seconds"]))

    def add(self, family: str, mode: str, seconds: float) -> None:
        self.times.setdefault((family, mode), []).append(seconds)

    def estimate(self, cell: Cell) -> float | None:
        times = self.times.get((cell.family, cell.mode))
        if times:
            return sum(times) / len(times)
        every = [t for ts in self.times.values() for t in ts]
        return sum(every) / len(every) if every else None

    def remaining(self, queued: Sequence[Cell], running: dict[str, tuple[Cell, float]], jobs: int):
        total = 0.0
        for cell in queued:
            est = self.estimate(cell)
            if est is None:
                return None
            total += est
        now = time.perf_counter()
        for cell, start in running.values():
            est = self.estimate(cell)
            if est is None:
                return None
            total += max(0.0, est - (now - start))
        return total / max(1, jobs)


class _Lock:
    """``out/.lock`` with our pid: two comparisons never write one folder at once."""

    def __init__(self, out: str) -> None:
        self.path = os.path.join(out, ".lock")

    def __enter__(self) -> _Lock:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    with open(self.path) as fh:
                        pid = int(fh.read().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and _alive(pid):
                    raise CompareError(
                        f"{os.path.dirname(self.path)} is in use by another cplxnet compare "
                        f"(pid {pid}); wait for it or choose another --out (if no comparison is "
                        f"running, delete {self.path})"
                    ) from None
                os.remove(self.path)  # stale lock of a process that is gone
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
            return self
        raise CompareError(f"cannot lock {self.path}")

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.remove(self.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def default_threads(jobs: int) -> int:
    """Torch threads per cell: ``max(1, cores // jobs)``."""
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def run_grid(
    cells: Sequence[Cell],
    out: str,
    options: GridOptions,
    *,
    jobs: int = 1,
    threads: int | None = None,
    retry_errors: bool = False,
    keep_runs: bool = False,
    log: Callable[[str], None] = print,
    heartbeat: float = 600.0,
    executor: Any = None,
) -> list[dict[str, Any]]:
    """Run every cell not yet done; returns all rows of the folder (in grid order).

    ``executor`` runs the cells (:mod:`cplxnet.compare.executors`); the default,
    ``LocalExecutor(jobs, threads)``, trains in this process with ``jobs == 1`` and otherwise runs
    each cell in its own worker process (``python -m cplxnet.compare.worker``), at most ``jobs``
    at a time, each with ``threads`` torch threads (default ``max(1, cores // jobs)``); a
    ``DaskExecutor`` sends the cells to a Dask cluster. A cell that fails (or whose worker dies)
    is recorded with its error and the grid goes on. Progress goes to ``log``: a line per
    finished cell with the elapsed time and an ETA (mean time of the finished cells of the same
    family, wall clock including process start-up), a line per epoch with ``jobs == 1``, and the
    epoch each running cell has reached every ``heartbeat`` seconds otherwise.
    """
    from .executors import LocalExecutor, RunContext

    if executor is None:
        if jobs < 1:
            raise CompareError(f"--jobs must be >= 1, got {jobs}")
        executor = LocalExecutor(jobs, threads)
    store = ResultStore(out)
    os.makedirs(out, exist_ok=True)
    with _Lock(out):
        store.check_options(options)
        done = store.load()
        order = [c.cell_id for c in cells]
        if len(set(order)) != len(order):
            raise CompareError("the grid has duplicate cells (repeated data, family or seed?)")
        errors = [c for c in cells if done.get(c.cell_id, {}).get("status") == "error"]
        todo = [
            c
            for c in cells
            if c.cell_id not in done or (retry_errors and done[c.cell_id].get("status") == "error")
        ]
        n_done = len(cells) - len(todo)
        msg = f"grid: {len(cells)} cells, {n_done} already done"
        if errors:
            msg += f" ({len(errors)} ended in an error" + (
                ", running them again)" if retry_errors else "; --retry-errors runs them again)"
            )
        log(msg + f"; {len(todo)} to run {executor.describe()} -> {out}")
        eta = _Eta(done.values())
        started = time.perf_counter()
        counter = [n_done, 0]

        def finished(
            cell: Cell,
            row: dict[str, Any],
            running: dict,
            queued: Sequence[Cell],
            wall: float | None = None,
        ) -> None:
            counter[0] += 1
            kind = cell_kind(cell.mode)
            if row.get("status") == "ok":
                eta.add(cell.family, cell.mode, wall or float(row.get("seconds") or 0.0))
                what = (
                    kind.outcome(row)
                    if kind is not None
                    else f"dev {row['dev_accuracy']:.4f} test {row['test_accuracy']:.4f}"
                )
            else:
                counter[1] += 1
                what = f"ERROR {row.get('error', '')[:200]}"
            store.write_tables(order)
            rest = eta.remaining(queued, running, executor.slots)
            failed = f", {counter[1]} failed" if counter[1] else ""
            log(
                f"[{counter[0]}/{len(cells)}{failed}] {cell.describe()}: {what} "
                f"({_fmt_duration(float(row.get('seconds') or 0))}) | elapsed "
                f"{_fmt_duration(time.perf_counter() - started)}, ETA "
                + ("?" if rest is None else _fmt_duration(rest))
            )

        executor.run(todo, RunContext(out, options, keep_runs, finished, log, heartbeat, eta))
        rows = store.write_tables(order)
    return rows


def _run_serial(todo: Sequence[Cell], ctx: Any, threads: int) -> None:
    """Train the cells one after the other in this process, a log line per epoch."""
    _set_threads(threads)
    queue = list(todo)
    while queue:
        cell = queue.pop(0)
        _forget(ctx.out, cell)
        epochs = cell_train(cell, ctx.options).get("epochs", 10)

        def progress(epoch: int, metrics: dict, cell: Cell = cell, epochs: int = epochs) -> None:
            kind = cell_kind(cell.mode)
            if kind is not None:
                ctx.log(kind.progress(cell, epoch, metrics))
                return
            ctx.log(
                f"  {cell.describe()}: epoch {epoch}/{epochs} dev "
                f"{metrics['dev_accuracy']:.4f} ({metrics['seconds']:.0f}s)"
            )

        row = run_cell(cell, ctx.out, ctx.options, keep_runs=ctx.keep_runs, callback=progress)
        ctx.finished(cell, row, {}, queue)


def _status(out: str, running: dict, queue: Sequence[Cell], jobs: int, eta: _Eta) -> str:
    """One line: each running cell with its last finished epoch, the queue and the ETA."""
    now = time.perf_counter()
    parts = []
    for cid, (cell, start) in running.items():
        path = os.path.join(out, "runs", cid, "metrics.jsonl")
        epochs = 0
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                epochs = sum(1 for line in fh if line.strip())
        parts.append(f"{cell.describe()} ({_fmt_duration(now - start)}, {epochs} epoch(s) done)")
    rest = eta.remaining(queue, running, jobs)
    return (
        "running: "
        + "; ".join(parts)
        + f" | {len(queue)} queued, ETA "
        + ("?" if rest is None else _fmt_duration(rest))
    )


def _forget(out: str, cell: Cell) -> None:
    """Remove the old result of a cell about to run again (an error being retried)."""
    path = os.path.join(out, "cells", cell.cell_id + ".json")
    if os.path.exists(path):
        os.remove(path)


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _run_parallel(
    todo: Sequence[Cell],
    out: str,
    jobs: int,
    threads: int,
    keep_runs: bool,
    options: GridOptions,
    finished: Callable[..., None],
    log: Callable[[str], None],
    heartbeat: float,
    eta: _Eta,
) -> None:
    logs = os.path.join(out, "logs")
    last_beat = time.perf_counter()
    os.makedirs(logs, exist_ok=True)
    queue = list(todo)
    running: dict[str, tuple[Cell, float]] = {}
    procs: dict[str, tuple[subprocess.Popen, Any]] = {}
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    try:
        while queue or procs:
            while queue and len(procs) < jobs:
                cell = queue.pop(0)
                _forget(out, cell)
                log_fh = open(os.path.join(logs, cell.cell_id + ".log"), "w", encoding="utf-8")  # noqa: SIM115
                cmd = [
                    sys.executable,
                    "-m",
                    "cplxnet.compare.worker",
                    "--out",
                    out,
                    "--threads",
                    str(threads),
                    "--cell",
                    json.dumps(cell.to_dict()),
                ]
                if keep_runs:
                    cmd.append("--keep-runs")
                procs[cell.cell_id] = (
                    subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT, env=env),
                    log_fh,
                )
                running[cell.cell_id] = (cell, time.perf_counter())
            time.sleep(0.2)
            if time.perf_counter() - last_beat >= heartbeat and procs:
                last_beat = time.perf_counter()
                log(_status(out, running, queue, jobs, eta))
            for cid in list(procs):
                proc, log_fh = procs[cid]
                if proc.poll() is None:
                    continue
                log_fh.close()
                del procs[cid]
                cell, start = running.pop(cid)
                path = os.path.join(out, "cells", cid + ".json")
                wall = time.perf_counter() - start
                row = None
                if os.path.exists(path):
                    with open(path, encoding="utf-8") as fh:
                        row = json.load(fh)
                elif proc.returncode in (130, -signal.SIGINT, -signal.SIGTERM):
                    log(f"{cell.describe()}: interrupted; it runs again next time")
                    continue
                if row is None:  # the worker died without recording: record it here
                    with open(
                        os.path.join(logs, cid + ".log"), encoding="utf-8", errors="replace"
                    ) as fh:
                        tail = fh.read()[-2000:]
                    row = _base_row(cell, options)
                    row.update(
                        status="error",
                        error=f"worker exited with status {proc.returncode}"
                        + (
                            " (killed: out of memory?)"
                            if proc.returncode == -signal.SIGKILL
                            else ""
                        )
                        + ": "
                        + (tail.strip().splitlines() or [""])[-1],
                        traceback=tail,
                        seconds=round(time.perf_counter() - start, 1),
                        finished=datetime.datetime.now().isoformat(timespec="seconds"),
                    )
                    _atomic_json(path, row)
                finished(cell, row, running, queue, wall)
    except BaseException:
        for proc, _ in procs.values():
            proc.terminate()
        for proc, log_fh in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log_fh.close()
        raise
