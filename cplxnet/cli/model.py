"""The model config of ``cplxnet train`` from its command line: ``--preset`` / ``--model``, the
overrides (``--encoding``, ``--complex``/``--real``, ``--d-model``, ...) and ``--set``
(also used by the language-model commands, :mod:`cplxnet.cli.lm`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from ..engine.runs import check_model_memory
from .options import CLIError

__all__ = ["SET_RESERVED", "encoding_overrides", "set_fields", "apply_sets", "model_config"]

# --set fields that have their own options
SET_RESERVED = {
    "family": "the family is chosen by --model or --preset",
    "encoding": "use --encoding NAME",
    "encoding_options": "use --encoding NAME:option=value",
    "complex": "use --complex or --real",
}


# what sets the model context an encoding receives (cplxnet.encodings.registry.CONTEXT)
_CONTEXT_FROM = {
    "max_len": "--max-len (a language model's --context)",
    "d_model": "--d-model",
    "num_heads": "--set num_heads=N",
    "vocab_size": "the vocabulary of the data",
    "causal": "the task (a language model is causal)",
    "device": "the device the model runs on",
    "dtype": "--complex or --real",
}


def encoding_overrides(text: str) -> dict[str, Any]:
    """Config fields of ``--encoding NAME[:option=value...]`` (parsed as ``cplxnet compare``
    does: a name, a ``+`` combination or a Complex Order variant, with its options)."""
    from ..encodings.specs import check_option_values, parse_encoding

    try:
        spec = parse_encoding(text)
        # rotary:base=abc or max_len=2 named here, not at build time
        check_option_values(spec, set_by=_CONTEXT_FROM)
    except ValueError as err:
        raise CLIError(str(err)) from None
    return {**spec.model, "encoding": spec.name, "encoding_options": dict(spec.options)}


def set_fields(family: str, items: Sequence[str], zoo: Any) -> dict[str, Any]:
    """The fields of the ``--set`` items (``field=value`` or ``family.field=value``) for a
    ``family`` model, their values checked against the field types of its config."""
    from ..encodings.specs import check_field_values, field_defaults, parse_sets

    try:
        sets = parse_sets(items, SET_RESERVED)
    except ValueError as err:
        raise CLIError(str(err)) from None
    other = sorted(set(sets) - {"*", family})
    if other:
        raise CLIError(
            f"--set {other[0]}.*: the model is a {family!r} model; write "
            f"{family}.FIELD=VALUE or FIELD=VALUE"
        )
    fields = {**sets.get("*", {}), **sets.get(family, {})}
    try:
        check_field_values(field_defaults(zoo.CONFIG_CLASSES[family]), fields, "--set")
    except ValueError as err:
        raise CLIError(str(err)) from None
    return fields


def apply_sets(
    config: Any, items: Sequence[str], zoo: Any, also: dict[str, Any] | None = None
) -> Any:
    """``config`` with the ``--set`` fields (``field=value`` or ``family.field=value``) and the
    fields ``also`` (``--d-model``; a ``--set`` of the same field wins), all applied at once, so
    that the config's checks see the values actually used (``d_model`` with ``num_heads``)."""
    fields = {**(also or {}), **set_fields(config.family, items, zoo)}
    current = config.to_dict()
    current.pop("family")
    return zoo.make_config(config.family, **{**current, **fields})


def model_config(args: argparse.Namespace, zoo: Any) -> Any:
    """The model config from --preset / --model and the overrides; validated by building it."""
    for flag, name, family in (
        ("--model", args.model, args.model),
        ("--preset", args.preset, zoo.PRESETS.get(args.preset or "", {}).get("family")),
    ):
        if family in zoo.LM_FAMILIES:  # next-token logits: not a classifier's (B, classes)
            raise CLIError(
                f"{flag} {name} is a language model ({family!r}); train it with --task lm, or "
                f"give a classifier family with --model ({', '.join(zoo.FAMILIES)})"
            )
    overrides: dict[str, Any] = {}
    if args.encoding is not None:
        overrides.update(encoding_overrides(args.encoding))
    for arg, field in (
        ("complex", "complex"),
        ("d_model", "d_model"),
        ("dropout", "dropout"),
        ("max_len", "max_len"),
    ):
        value = getattr(args, arg)
        if value is not None:
            overrides[field] = value
    preset = "default" if args.preset is None and args.model is None else args.preset
    family = args.model if preset is None else zoo.PRESETS.get(preset, {}).get("family")
    if args.preset is not None and args.model is not None and family not in (None, args.model):
        raise CLIError(
            f"--preset {args.preset} is a {family!r} model but --model is {args.model!r}; drop "
            "one of them"
        )
    if args.set and family in zoo.CONFIG_CLASSES:  # with the other overrides: one check of all
        overrides.update(set_fields(family, args.set, zoo))
    try:
        if preset is not None:
            config = zoo.preset_config(preset, **overrides)
        else:
            config = zoo.make_config(args.model, **overrides)
        # Build a tiny copy once (first on the meta device, so that a size that does not fit in
        # memory is an error, not an allocation): unknown encodings and incompatible options fail
        # here, before any data is read or any folder is created.
        tiny = dataclasses.replace(config, vocab_size=4, num_classes=2)
        check_model_memory(tiny, zoo)
        zoo.build_model(tiny)
    except (ValueError, TypeError, KeyError) as err:
        raise CLIError(err.args[0] if isinstance(err, KeyError) else str(err)) from None
    return config
