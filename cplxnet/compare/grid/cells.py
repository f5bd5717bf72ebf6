"""The cells of a comparison grid: the budget every cell shares (:class:`GridOptions`), the
per-cell presets (:func:`parse_presets`, :func:`cell_preset`), one run (:class:`Cell`) and the
registry of cell kinds (:class:`CellKind`, :data:`CELL_KINDS`: classification, extrapolation,
language model; each kind's module registers it) and the parsing of ``--seeds``,
``--folds`` and ``--set``. :mod:`cplxnet.compare.grid.expand` turns the axes into cells.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...encodings.specs import EncodingSpec

__all__ = [
    "REAL_WIDTHS",
    "SYNTHETIC",
    "MAX_SEEDS",
    "MAX_CONFIGURATIONS",
    "MAX_CELLS",
    "check_count",
    "CompareError",
    "parse_seeds",
    "parse_folds",
    "parse_sets",
    "PRESET_NUMBERS",
    "preset_key",
    "preset_label",
    "parse_presets",
    "cell_preset",
    "cell_train",
    "GridOptions",
    "data_slug",
    "has_own_test",
    "Cell",
    "CellKind",
    "CELL_KINDS",
    "cell_kind",
    "next_ready",
    "register_kind",
    "data_spec",
    "split_spec",
]

REAL_WIDTHS = {"same": "width", "params": "params", "flops": "flops"}
SYNTHETIC = "synthetic"


class CompareError(Exception):
    """A problem with the comparison's arguments or output folder (the message says the fix)."""


#: The most seeds a grid takes (``--seeds``).
MAX_SEEDS = 1_000
#: The most configurations (datasets x families x encodings x number fields) a grid checks.
MAX_CONFIGURATIONS = 10_000
#: The most cells a grid expands to.
MAX_CELLS = 100_000


def check_count(what: str, count: int, limit: int, name: str | None = None) -> None:
    """A :class:`CompareError` if ``count`` is above ``limit`` (checked before anything of that
    size is built); ``name`` is the limit's name in this module, for the message."""
    if count > limit:
        where = f" (cplxnet.compare.grid.cells.{name})" if name else ""
        raise CompareError(
            f"{what}: {count:,} is more than the limit of {limit:,}{where}; give fewer, or "
            "split the study into several grids"
        )


def _parse_int_list(text: str, what: str, limit: int, name: str | None = None) -> list[int]:
    out: list[int] = []
    count = 0
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
                count += b - a + 1
                check_count(f"{what}: the values of {text.strip()!r}", count, limit, name)
                out += list(range(a, b + 1))
            else:
                out.append(int(item))
                count += 1
                check_count(f"{what}: the values of {text.strip()!r}", count, limit, name)
        except ValueError:
            raise CompareError(
                f"{what}: expected integers or ranges like 0-4, got {item!r}"
            ) from None
    if not out:
        raise CompareError(f"{what}: nothing given")
    return list(dict.fromkeys(out))


def parse_seeds(text: str | int) -> list[int]:
    """``5`` -> seeds 0..4; ``0,3,7`` or ``10-14`` -> those seeds (each a seed of ``cplxnet
    train --seed``, 0..2**63-1; at most :data:`MAX_SEEDS` of them)."""
    from ...engine.runtime import MAX_SEED

    text = str(text).strip()
    if re.fullmatch(r"\d+", text):
        n = int(text)
        if n < 1:
            raise CompareError("--seeds: need at least one seed")
        check_count("--seeds: the number of seeds", n, MAX_SEEDS, "MAX_SEEDS")
        return list(range(n))
    seeds = _parse_int_list(text, "--seeds", MAX_SEEDS, "MAX_SEEDS")
    bad = [s for s in seeds if not 0 <= s <= MAX_SEED]
    if bad:
        raise CompareError(
            f"--seeds: seed {bad[0]} is out of range; seeds are 0..2**63-1 (as cplxnet train "
            "--seed), e.g. --seeds 3 or --seeds 0-4"
        )
    return seeds


def parse_folds(text: str, num_folds: int = 10) -> list[int | None]:
    """``quick`` -> the one quick split (``[None]``); ``all`` -> folds 0..9; ``3``, ``0-4``,
    ``0,5`` -> those cross-validation test folds (numbered 0..9 as ``cplxnet train --fold``)."""
    text = str(text).strip().lower()
    if text in ("quick", "none", ""):
        return [None]
    if text == "all":
        return list(range(num_folds))
    folds = _parse_int_list(text, "--folds", num_folds)
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
    from ...encodings.specs import parse_sets as parse

    try:
        return parse(items, _GRID_CHOSEN)
    except ValueError as err:
        raise CompareError(str(err)) from None


PRESET_NUMBERS = ("real", "complex")


def preset_key(key: str) -> tuple[str, str, str]:
    """``"DATA:FAMILY@NUMBER"`` (``*`` for a part not given) -> its three parts."""
    data, rest = key.rsplit(":", 1)
    family, number = rest.split("@", 1)
    return data, family, number


def preset_label(key: str) -> str:
    """``"*:cnn@*"`` -> ``"cnn"``: a key as it is written on the command line."""
    data, family, number = preset_key(key)
    return ("" if data == "*" else f"{data}:") + family + ("" if number == "*" else f"@{number}")


def parse_presets(items: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """``--preset [DATA:]FAMILY[@NUMBER]=PRESET`` (repeatable) -> ``{"DATA:FAMILY@NUMBER":
    {"preset", "model", "train"}}`` with ``*`` for the parts not given, the preset's model fields
    (:data:`models.PRESETS` without its family) and its training budget
    (:data:`models.PRESET_TRAINING`), copied so that the grid stores what its cells used.

    ``DATA`` is mr, trec, synthetic or a data file; ``NUMBER`` is real or complex."""
    import copy

    import cplxnet.models as models

    from ...data import BUNDLED

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
                f"--preset {item}: {preset_label(key)} is given twice ({out[key]['preset']} and "
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
        d, f, n = preset_key(key)
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


@dataclass
class GridOptions:
    """The budget shared by every cell (stored in ``grid.json``).

    Attributes:
        train: :class:`cplxnet.tasks.classify.task.TrainOptions` fields except ``seed`` (epochs,
        lr, ...).
        sets: model field overrides, ``{"*": {...}, "cnn": {...}}`` (``*``: every family that
            has the field).
        real_width: widths of a real cell relative to the complex config: ``flops`` (x 2, the
            equal-FLOP twin; the default), ``params`` (x sqrt 2) or ``same`` (same ``d_model``
            and hidden widths, the setting of Wang et al.'s Table 2), see
            :func:`models.real_twin`. A real preset (``complex=False``, e.g. ``kim-cnn``) keeps
            its own widths.
        data: :class:`cplxnet.data.DataSpec` options (split_seed, limit, max_len, min_freq,
            max_size, clean).
        vectors: pretrained word vectors file for every cell (``None``: none).
        extrapolate: length-extrapolation options (``train_len`` per dataset, ``factors``,
            synthetic task sizes); see :mod:`cplxnet.compare.grid.extrapolate`.
        lm: language-model grid options (preset, tokens, context and the
            :class:`cplxnet.tasks.lm.LMOptions` fields); see :mod:`cplxnet.compare.grid.lm`. Left
            out of :meth:`to_dict` when empty (a classification grid's ``grid.json`` has no ``lm``).
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
    real_width: str = "flops"
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
        from ...tasks.classify.task import TrainOptions

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


def data_slug(data: str) -> str:
    """A dataset in a cell id: ``mr``, ``trec``, ``synthetic``, or a file's base name with a hash
    of its absolute path (two files of one name stay apart)."""
    if data in ("mr", "trec", SYNTHETIC):
        return data
    base = os.path.splitext(os.path.basename(data[:-3] if data.endswith(".gz") else data))[0]
    digest = hashlib.sha1(os.path.abspath(data).encode()).hexdigest()[:6]
    return f"{re.sub(r'[^A-Za-z0-9.-]+', '_', base)}-{digest}"


def has_own_test(data: str) -> bool:
    """Datasets with an official test set (folds do not apply): bundled TREC, the synthetic task."""
    from ...data import BUNDLED

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
        return cell_kind(self.mode).split(self)

    @property
    def cell_id(self) -> str:
        return cell_kind(self.mode).cell_id(self)

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
    """A kind of cell (its ``Cell.mode``): how it is named, trained, reported in progress lines
    and written to ``results.csv``; the store, the scheduler and the workers are shared. Every
    kind is registered in :data:`CELL_KINDS` (:func:`register_kind`) by the module that defines
    it: ``grid`` and ``extrapolate`` (:mod:`~cplxnet.compare.grid.classify`) and ``lm``
    (:mod:`~cplxnet.compare.grid.lm`).

    Attributes:
        split: ``cell -> text`` of the ``split`` column of its rows.
        cell_id: ``cell -> id`` (a file name).
        train: ``(cell, options, run_dir, callback) -> fields`` of the row; resumes from
            ``run_dir`` when it holds an interrupted run.
        outcome: ``row -> text`` of a finished cell's progress line.
        progress: ``(cell, options, step, metrics) -> text`` of an in-training progress line.
        to_csv: ``rows -> CSV text`` of ``results.csv``.
        presets: whether its cells take the per-cell presets (``--preset``) and their rows
            record them.
        needs: ``cell -> id`` of the cell whose run this one reads (it starts only after that
            cell has ended), or ``None``.
    """

    split: Callable[[Cell], str]
    cell_id: Callable[[Cell], str]
    train: Callable[..., dict[str, Any]]
    outcome: Callable[[dict[str, Any]], str]
    progress: Callable[[Cell, GridOptions, int, dict[str, Any]], str]
    to_csv: Callable[[Sequence[dict[str, Any]]], str]
    presets: bool = False
    needs: Callable[[Cell], str | None] = lambda cell: None


#: ``mode -> CellKind`` of every kind of cell (filled by :func:`register_kind`).
CELL_KINDS: dict[str, CellKind] = {}


def register_kind(mode: str, kind: CellKind) -> CellKind:
    """Make ``kind`` the :class:`CellKind` of cells of ``mode``; returns it."""
    CELL_KINDS[mode] = kind
    return kind


def next_ready(queue: Sequence[Cell], pending: Collection[str]) -> int | None:
    """Index of the first cell of ``queue`` whose needed cell (:attr:`CellKind.needs`) is
    neither in ``queue`` nor among the ``pending`` ids (running or not yet collected), or
    ``None`` when every queued cell waits."""
    waiting = set(pending) | {c.cell_id for c in queue}
    for i, cell in enumerate(queue):
        need = cell_kind(cell.mode).needs(cell)
        if need is None or need == cell.cell_id or need not in waiting:
            return i
    return None


def cell_kind(mode: str) -> CellKind:
    """The :class:`CellKind` of ``mode``."""
    kind = CELL_KINDS.get(mode)
    if kind is None:
        raise CompareError(f"unknown cell mode {mode!r}; the kinds are {', '.join(CELL_KINDS)}")
    return kind


def data_spec(cell: Cell, options: GridOptions) -> Any:
    """The :class:`cplxnet.data.DataSpec` of a cell: its dataset and fold (``cv`` with a fold,
    else the quick split) with the grid's data options."""
    return split_spec(cell.data, cell.fold, options)


def split_spec(data: str, fold: int | None, options: GridOptions) -> Any:
    """The :class:`cplxnet.data.DataSpec` of dataset ``data`` and ``fold`` (see
    :func:`data_spec`)."""
    from ...data import DataSpec

    known = {f.name for f in dataclasses.fields(DataSpec)}
    extra = {k: v for k, v in options.data.items() if k in known and v is not None}
    return DataSpec(data=data, split="cv" if fold is not None else "quick", fold=fold, **extra)
