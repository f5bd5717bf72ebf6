"""The model config of a cell (:func:`cell_config`), whether a family and an encoding can be
combined (:func:`check_combination`) and the expansion of the axes (datasets x folds x families x
encodings x number fields x seeds) into cells (:func:`expand_grid`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...encodings.specs import (
    EncodingSpec,
    check_field_values,
    check_option_values,
    field_defaults,
    numbers_for,
)
from .cells import (
    MAX_CELLS,
    MAX_CONFIGURATIONS,
    PRESET_NUMBERS,
    REAL_WIDTHS,
    SYNTHETIC,
    Cell,
    CompareError,
    GridOptions,
    cell_preset,
    check_count,
    has_own_test,
    preset_key,
    preset_label,
    split_spec,
)

__all__ = [
    "check_datas",
    "cell_config",
    "check_combination",
    "expand_grid",
]


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
    real cell is :func:`models.real_twin` of the complex config with ``options.real_width``, or
    with the preset's own widths when its preset is a real model (``complex=False``, as
    ``kim-cnn``: a tuned real baseline is not rescaled)."""
    import cplxnet.models as models

    names = {f.name for f in dataclasses.fields(models.CONFIG_CLASSES[family]) if f.init}
    entry = cell_preset(data, family, number, options)
    preset = dict(entry["model"]) if entry else {}
    real_preset = preset.get("complex") is False
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
        match = "width" if real_preset else REAL_WIDTHS[options.real_width]
        config = models.real_twin(config, match=match)
    return config


def check_datas(
    datas: Sequence[str], folds: Sequence[int | None], options: GridOptions, *, mode: str = "grid"
) -> None:
    """Read and split every data file of the grid as ``cplxnet train`` does (the same
    :class:`~cplxnet.data.DataError` for a missing, empty, binary or too short file), before any
    cell runs; a language-model task (``synthetic:copy``) is an error saying to add ``--task lm``.
    Bundled data and the synthetic task are not read."""
    from ...data import BUNDLED, load_dataset, load_splits

    if not datas:
        raise CompareError("--data: nothing given; give mr, trec, synthetic or data files")
    for data in dict.fromkeys(datas):
        if data.startswith(SYNTHETIC + ":"):
            raise CompareError(f"--data {data} is a language-model task; add --task lm")
        if data == SYNTHETIC or data in BUNDLED:
            continue
        if mode != "grid":  # the extrapolation grid splits a file by length
            load_dataset(data)
            continue
        for fold in [None] if has_own_test(data) else dict.fromkeys(folds):
            load_splits(split_spec(data, fold, options))


def _check_option_types(encoding: EncodingSpec) -> None:
    """The option values of ``encoding`` (:func:`cplxnet.compare.specs.check_option_values`)."""
    try:
        check_option_values(encoding)
    except ValueError as err:
        raise CompareError(str(err)) from None


def check_combination(
    family: str, encoding: EncodingSpec, number: str, options: GridOptions, data: str | None = None
) -> str | None:
    """``None`` if the cell can be built; a note if the encoding acts on a site the family lacks
    (e.g. a relative encoding with a model without attention) or a model variant sets a field
    the family does not have. Any other problem (an unknown option, a bad width) raises
    :class:`CompareError`."""
    import torch

    import cplxnet.models as models

    from ...encodings import check_sites, create_encoding

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

    for what, axis in (("--data", datas), ("--families", families), ("--seeds", seeds)):
        if not axis:
            raise CompareError(f"{what}: nothing given")
    rescored = [s.label for s in encodings if s.evaluation]
    if rescored:
        raise CompareError(
            f"{', '.join(rescored)} re-scores language-model runs with options set at "
            "evaluation; use it with --task lm"
        )
    per_family = sum(len(numbers_for(s, numbers)) for s in encodings)
    configurations = len(families) * len(datas) * per_family
    check_count(
        "datasets x families x encodings x number fields", configurations, MAX_CONFIGURATIONS,
        "MAX_CONFIGURATIONS",
    )  # fmt: skip
    splits = sum(1 if has_own_test(d) else len(folds) for d in datas)  # data x folds
    upper = len(seeds) * splits * len(families) * per_family  # before any skipped combination
    check_count("the number of cells (seeds x folds x configurations)", upper, MAX_CELLS,
                "MAX_CELLS")  # fmt: skip
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
    for family in families:  # each value as its field is (--set num_filters=abc: one line)
        fields = {**options.sets.get("*", {}), **options.sets.get(family, {})}
        try:
            check_field_values(field_defaults(models.CONFIG_CLASSES[family]), fields, "--set")
        except ValueError as err:
            raise CompareError(str(err)) from None
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
        d, f, _ = preset_key(key)
        if f not in families or (
            d != "*"
            and not any(
                cell_preset(x, f, n, options) is entry for x in datas for n in PRESET_NUMBERS
            )
        ):
            notes.append(f"--preset {preset_label(key)}={entry['preset']} matches no cell")
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
