"""Encoding specs as the command line writes them (``cplxnet train --encoding``, ``--set``, the
axes of ``cplxnet compare``): names, options, the Complex Order ablations and the number field
(complex or real) each encoding runs in.

An encoding spec is a registered name (:func:`cplxnet.encodings.available_encodings`), optionally
with options, ``name:key=value:key=value`` (values are JSON where they parse: ``true``,
``3``, ``0.5``; otherwise strings), e.g. ``complex-order:phase=false:frequency=shared``, or a
named variant of :data:`VARIANTS` (the Complex Order paper's Table 4 ablations of the encoding) or
of :data:`MODEL_VARIANTS` (its Table 4 ablation of the model: ``complex-order-real-proj``, the
encoding with model fields set, here ``projection="real"``: a Transformer whose projections
share one real weight between the real and imaginary parts). In a comma-separated list an item
``key=value`` without ``:`` continues the options of the item before it, so
``complex-order:phase=false,frequency=shared,sinusoidal`` is two specs.
``table4`` in a list expands to ``complex-order`` and every variant of both kinds (a model
variant is skipped, with a note, for families that lack its fields).

A combination of registered encodings is their names joined by ``+``
(:mod:`cplxnet.encodings.combined`), its options prefixed by the member they address:
``complex-order+rotary:rotary.base=500:complex-order.frequency=shared``.

An evaluation variant of :data:`EVAL_VARIANTS` (``rotary-yarn``, ``randomized-eval``) is no model
of its own: its cells re-score the kept run folders of the encoding it names (``rotary``, or
``randomized`` with the options written after the variant's name, trained in the same grid) with
the encoding rebuilt at evaluation time (YaRN scaling of factor ``n / L`` at each evaluation
length ``n``; randomized positions at evaluation too), so it costs no training
(:func:`cplxnet.compare.grid.lm.rescore_lm_cell`).

Number field: ``natural`` (the default) runs each encoding in the number field of the paper's
Table 2: complex models for the complex encodings (``complex-order``, ``complex-vanilla``, the
variants and any combination with one of them), real models for every other encoding (the paper's
"no PE", "learned PE" and "sinusoidal" columns are real-valued embeddings). ``real``,
``complex`` or ``both`` force it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .registry import kind_error, parse_value

__all__ = [
    "EncodingSpec",
    "VARIANTS",
    "MODEL_VARIANTS",
    "EVAL_VARIANTS",
    "NUMBERS",
    "parse_encoding",
    "parse_encodings",
    "parse_numbers",
    "numbers_for",
    "parse_value",
    "parse_sets",
    "is_complex_name",
    "check_option_values",
    "check_distinct",
    "check_field_values",
    "field_defaults",
]

NUMBERS = ("complex", "real")

# The Complex Order paper's Table 4 ablations that the complex-order encoding can express
# (cplxnet.encodings.ComplexOrderEncoding options): name -> (encoding, options, description).
VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "complex-order-no-phase": (
        "complex-order",
        {"phase": False},
        "no initial phase (theta = 0)",
    ),
    "complex-order-freq-shared": (
        "complex-order",
        {"frequency": "shared"},
        "one frequency per dimension, shared by all words",
    ),
    "complex-order-freq-word": (
        "complex-order",
        {"frequency": "dimension"},
        "one frequency per word, shared by its dimensions",
    ),
    "complex-order-amp-shared": (
        "complex-order",
        {"amplitude": "shared"},
        "one amplitude per dimension, shared by all words",
    ),
    "complex-order-amp-word": (
        "complex-order",
        {"amplitude": "dimension"},
        "one amplitude per word, shared by its dimensions",
    ),
}
# Its Table 4 ablation "real and imaginary projections shared or not" is a property of the
# complex layers, not of the encoding: a model variant, name -> (encoding, model fields,
# description); the fields override the family's config (a family without them skips the column).
MODEL_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "complex-order-real-proj": (
        "complex-order",
        {"projection": "real"},
        "shared projections: one real weight for the real and imaginary parts (Transformer)",
    ),
}
TABLE4 = ("complex-order", *VARIANTS, *MODEL_VARIANTS)
# Evaluation-time variants of a language-model grid: name -> (encoding, evaluation options,
# description). The encoding trains as itself; a scaling option is set at each evaluation length
# n > L with factor n / L (the rotary scalings of cplxnet.encodings.rope_scaling), any other
# option at every evaluation length.
EVAL_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "rotary-yarn": (
        "rotary",
        {"scaling": "yarn"},
        "trained as rotary; scored at n > L with YaRN scaling of factor n / L",
    ),
    "randomized-eval": (
        "randomized",
        {"eval_positions": "random"},
        "trained as randomized; scored at sorted random positions too (the paper code's "
        "protocol; one draw per scored batch, from eval_seed)",
    ),
}
# Options an evaluation variant's spec may add that act at evaluation only (the others are the
# trained column's): ``randomized-eval:base=rotary:eval_seed=3`` re-scores randomized:base=rotary.
EVAL_VARIANT_OPTIONS: dict[str, frozenset[str]] = {"randomized-eval": frozenset({"eval_seed"})}

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def is_complex_name(name: str) -> bool:
    """Whether encoding ``name`` (a registered name or a ``+`` combination) runs in complex
    models by default: one of its members declares the natural field ``"complex"``
    (:attr:`cplxnet.encodings.PositionalEncoding.field`)."""
    from cplxnet.encodings import encoding_members, get_encoding_class

    return any(get_encoding_class(m).field == "complex" for m in encoding_members(str(name)))


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))  # base=500 and base=500.0 name one encoding
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class EncodingSpec:
    """One encoding column of the grid.

    Attributes:
        label: what the tables show (the spec as given: a name, a variant name or
            ``name:key=value...``).
        name: the registered encoding name.
        options: keyword options for :func:`cplxnet.encodings.create_encoding`.
        model: model-config fields the column sets (a :data:`MODEL_VARIANTS` entry), e.g.
            ``{"projection": "real"}``; empty for a plain encoding.
        evaluation: encoding options set at evaluation time only (an :data:`EVAL_VARIANTS`
            entry, e.g. ``{"scaling": "yarn"}``): the column re-scores the runs of
            :attr:`trained`; empty for a column that trains.
    """

    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)

    @property
    def is_complex(self) -> bool:
        """A complex encoding (its natural number field is complex)."""
        return is_complex_name(self.name)

    @property
    def canonical(self) -> str:
        """``name:key=value:...`` with sorted keys (what the run was built with), then
        ``+field=value:...`` for the model fields of a model variant."""
        parts = [self.name] + [
            f"{k}={_format_value(self.options[k])}" for k in sorted(self.options)
        ]
        text = ":".join(parts)
        if self.model:
            fields = [f"{k}={_format_value(self.model[k])}" for k in sorted(self.model)]
            text += "+" + ":".join(fields)
        if self.evaluation:
            text += "@eval:" + ":".join(
                f"{k}={_format_value(self.evaluation[k])}" for k in sorted(self.evaluation)
            )
        return text

    @property
    def slug(self) -> str:
        """A file-name-safe form of :attr:`canonical`."""

        def pairs(d: dict[str, Any]) -> list[str]:
            return [f"{k}={_format_value(d[k])}".replace("=", "-") for k in sorted(d)]

        # a combination's "+" becomes "_"; a model variant's fields follow "--model-"
        text = ":".join([self.name, *pairs(self.options)])
        if self.model:
            text += "--model-" + ":".join(pairs(self.model))
        if self.evaluation:
            text += "--eval-" + ":".join(pairs(self.evaluation))
        return re.sub(r"[^A-Za-z0-9.-]+", "_", text)

    def to_dict(self) -> dict[str, Any]:
        d = {"label": self.label, "name": self.name, "options": dict(self.options)}
        if self.model:  # only then: plain specs serialise as before
            d["model"] = dict(self.model)
        if self.evaluation:
            d["evaluation"] = dict(self.evaluation)
        return d

    @property
    def trained(self) -> EncodingSpec:
        """The column whose runs an evaluation variant re-scores (the spec without
        :attr:`evaluation`; the spec itself for a column that trains)."""
        if not self.evaluation:
            return self
        return EncodingSpec(self.canonical.split("@eval:")[0], self.name, dict(self.options),
                            dict(self.model))  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EncodingSpec:
        return cls(
            d["label"],
            d["name"],
            dict(d.get("options") or {}),
            dict(d.get("model") or {}),
            dict(d.get("evaluation") or {}),
        )


def _check_name(name: str) -> None:
    from cplxnet.encodings import encoding_members

    try:
        encoding_members(name)
    except ValueError as err:
        raise ValueError(
            f"{err}; Complex Order variants: {', '.join([*VARIANTS, *MODEL_VARIANTS])} (or "
            f"'table4' for all of them); evaluation variants: {', '.join(EVAL_VARIANTS)}"
        ) from None


def parse_encoding(text: str) -> EncodingSpec:
    """Parse one spec (see the module docstring). Unknown names are a ValueError listing the
    valid names and variants; option names are checked when the model is built."""
    text = text.strip()
    if not text:
        raise ValueError("empty encoding spec")
    head, *rest = text.split(":")
    head = head.strip()
    options: dict[str, Any] = {}
    given: dict[str, str] = {}  # the options written in ``text`` (a variant's own may be replaced)
    model: dict[str, Any] = {}
    evaluation: dict[str, Any] = {}
    if head in EVAL_VARIANTS:
        name, extra, _ = EVAL_VARIANTS[head]
        evaluation.update(extra)
    elif head in VARIANTS:
        name, base, _ = VARIANTS[head]
        options.update(base)
    elif head in MODEL_VARIANTS:
        name, fields, _ = MODEL_VARIANTS[head]
        model.update(fields)
    else:
        name = head
        _check_name(name)
    for item in rest:
        if "=" not in item:
            raise ValueError(
                f"encoding spec {text!r}: option {item!r} is not key=value "
                "(e.g. complex-order:phase=false)"
            )
        key, value = item.split("=", 1)
        key = key.strip()
        if not _NAME.match(key):
            raise ValueError(f"encoding spec {text!r}: bad option name {key!r}")
        if key in given:
            raise ValueError(
                f"encoding spec {text!r}: option {key} is given twice ({given[key].strip()} and "
                f"{value.strip()}); keep one"
            )
        given[key] = value
        if key in EVAL_VARIANT_OPTIONS.get(head, ()):
            evaluation[key] = parse_value(value)
        else:
            options[key] = parse_value(value)
    clash = sorted(set(options) & set(evaluation))
    if clash:
        raise ValueError(
            f"encoding spec {text!r}: {', '.join(clash)} is set at evaluation by {head}; drop it"
        )
    return EncodingSpec(text, name, options, model, evaluation)


def parse_encodings(text: str | list[str]) -> list[EncodingSpec]:
    """Parse a comma-separated list of specs (``table4`` expands to the ablation set).
    Duplicates (same label) are dropped."""
    items = text if isinstance(text, list) else [text]
    pieces: list[str] = []
    for chunk in items:
        for item in chunk.split(","):
            item = item.strip()
            if not item:
                continue
            if "=" in item and ":" not in item:
                if not pieces:
                    raise ValueError(
                        f"option {item!r} comes before any encoding; write name:key=value"
                    )
                pieces[-1] += ":" + item
            else:
                pieces.append(item)
    out: list[EncodingSpec] = []
    seen: set[str] = set()
    for piece in pieces:
        expanded = list(TABLE4) if piece == "table4" else [piece]
        for p in expanded:
            spec = parse_encoding(p)
            if spec.label not in seen:
                seen.add(spec.label)
                out.append(spec)
    if not out:
        raise ValueError("no encodings given")
    check_distinct((spec, None) for spec in out)
    return out


def check_distinct(specs: Iterable[tuple[EncodingSpec, Hashable]]) -> None:
    """A ValueError if two ``(spec, tag)`` pairs of one tag (a number field, or ``None``) differ
    only in options given at their encoding's default (``rotary`` and ``rotary:base=10000``):
    they are one encoding, and a grid would train it twice under two names. Two spellings of one
    canonical spec (``sinusoidal:base=500``, ``base=5e2``) are one cell; the grid names those."""
    first: dict[tuple[str, Hashable], EncodingSpec] = {}
    for spec, tag in specs:
        other = first.setdefault((_without_defaults(spec), tag), spec)
        if other.canonical != spec.canonical:
            raise ValueError(
                f"{other.label} and {spec.label} are one encoding (the options they differ in "
                "are at their defaults) and would train twice; give it once"
            )


def _without_defaults(spec: EncodingSpec) -> str:
    """:attr:`EncodingSpec.canonical` of ``spec`` without the options at their default."""
    import inspect

    from cplxnet.encodings import encoding_option_parameters

    try:
        params = encoding_option_parameters(spec.name)
    except (KeyError, ValueError, TypeError):  # an unknown name: left to create_encoding
        params = {}

    def at_default(key: str, value: Any) -> bool:
        p = params.get(key)
        if p is None or p.default is inspect.Parameter.empty:
            return False
        return isinstance(value, bool) == isinstance(p.default, bool) and value == p.default

    options = {k: v for k, v in spec.options.items() if not at_default(k, v)}
    return replace(spec, options=options).canonical


def parse_sets(
    items: Sequence[str] | None, reserved: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """``--set key=value`` (every family that has the field) or ``--set family.key=value``, as
    ``{"*": {key: value}, family: {key: value}}``; values as :func:`parse_value` (and ``3,4,5``
    a list of ints). ``reserved`` maps keys the caller sets itself to the hint of the error a
    ``--set`` of them raises (``cplxnet compare``: the encoding and number field)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected key=value or family.key=value")
        key, value = item.split("=", 1)
        key = key.strip()
        family = "*"
        if "." in key:
            family, key = key.split(".", 1)
        if not key or not family:
            raise ValueError(f"--set {item!r}: expected key=value or family.key=value")
        parsed = parse_value(value)
        if isinstance(parsed, str) and "," in parsed:  # 3,4,5 (a list of what each item is)
            parsed = [parse_value(v) for v in parsed.split(",")]
        if reserved and key in reserved:
            raise ValueError(f"--set {key}: {reserved[key]}")
        out.setdefault(family, {})[key] = parsed
    return out


def check_option_values(spec: EncodingSpec, set_by: Mapping[str, str] | None = None) -> None:
    """A ValueError naming the option if a value of ``spec.options`` cannot be what its
    encoding's default is (:func:`~cplxnet.encodings.registry.kind_error`): ``rotary:base=abc``,
    ``base=nan``, ``phase=maybe``; also an option the model passes itself (``max_len``,
    ``d_model``, ...), the message naming what sets it when ``set_by`` (option -> its source)
    does. Options the encoding lacks are left to :func:`create_encoding`."""
    import inspect

    from cplxnet.encodings import encoding_option_parameters
    from cplxnet.encodings.registry import CONTEXT, infinite_option_flags

    for key, value in spec.options.items():
        name = key.rsplit(".", 1)[-1]  # a combination's member.option
        if name in CONTEXT:
            source = f" (set by {set_by[name]})" if set_by and name in set_by else ""
            raise ValueError(
                f"encoding {spec.label}: {key} is not an encoding option: the model passes its "
                f"own {name} to the encoding{source}; drop {key}={value}"
            )
    params = encoding_option_parameters(spec.name)
    infinite = infinite_option_flags(spec.name)
    for key, value in spec.options.items():
        p = params.get(key)
        if p is None or p.default is inspect.Parameter.empty or p.default is None:
            continue
        kind = kind_error(p.default, value, infinite[key])
        if kind is not None:
            raise ValueError(f"encoding {spec.label}: option {key} must be {kind}, got {value!r}")


def field_defaults(config_class: type) -> dict[str, Any]:
    """``{field: default}`` of a config dataclass (fields with a plain default)."""
    import dataclasses

    return {
        f.name: f.default
        for f in dataclasses.fields(config_class)
        if f.init and f.default is not dataclasses.MISSING
    }


def check_field_values(defaults: Mapping[str, Any], fields: Mapping[str, Any], flag: str) -> None:
    """A ValueError naming ``flag KEY=VALUE`` if a model field's value cannot be what its
    default is (``defaults``: field -> default): ``--set num_filters=abc``,
    ``--set kernel_sizes=3,x``, ``--set dropout=nan``."""
    for key, value in fields.items():
        if key not in defaults:
            continue
        kind = kind_error(defaults[key], value)
        if kind is not None:
            shown = ",".join(map(str, value)) if isinstance(value, list) else value
            raise ValueError(f"{flag} {key}={shown}: expected {kind}")


def parse_numbers(text: str) -> tuple[str, ...]:
    """``natural`` (default), ``real``, ``complex``, ``both`` or ``real,complex``."""
    values: list[str] = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        if item == "both":
            values += ["real", "complex"]
        elif item in ("natural", "real", "complex"):
            values.append(item)
        else:
            raise ValueError(f"unknown number field {item!r}; use natural, real, complex or both")
    if not values:
        raise ValueError("no number field given; use natural, real, complex or both")
    if "natural" in values and len(set(values)) > 1:
        raise ValueError("'natural' cannot be combined with real/complex")
    return tuple(dict.fromkeys(values))


def numbers_for(spec: EncodingSpec, numbers: tuple[str, ...]) -> list[str]:
    """The number fields ``spec`` runs in: its natural one, or those asked for."""
    if numbers == ("natural",):
        return ["complex" if spec.is_complex else "real"]
    return [n for n in NUMBERS if n in numbers]
