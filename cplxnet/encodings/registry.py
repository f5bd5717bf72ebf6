"""Encodings by name: ``create_encoding("rotary", d_model=..., num_heads=..., base=500.0)``.

Names joined by ``+`` (``"complex-order+rotary"``) or a list of names build one
:class:`~cplxnet.encodings.combined.CombinedEncoding` applying each member at its own sites; its
options address a member (``**{"rotary.base": 500}`` or ``rotary={"base": 500}``).

A model knows its context (``d_model``, ``num_heads``, ``vocab_size``, ``max_len``, ``causal``,
``device``, ``dtype``) and passes all of it; each encoding receives only the context its
``__init__`` accepts.
User options (everything else) are passed strictly: an option the encoding does not have is an
error listing the options it does have.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from .base import FIELDS, SITES, PositionalEncoding

__all__ = [
    "register_encoding",
    "create_encoding",
    "available_encodings",
    "get_encoding_class",
    "encoding_members",
    "encoding_option_parameters",
    "check_sites",
    "SITE_DESCRIPTIONS",
]

_REGISTRY: dict[str, type[PositionalEncoding]] = {}
CONTEXT = ("d_model", "num_heads", "vocab_size", "max_len", "causal", "device", "dtype")
_ATTENTION_SITES = frozenset({"qk", "logits", "values"})
_SEPARATOR = "+"  # joins the member names of a combination (cplxnet.encodings.combined)

SITE_DESCRIPTIONS = {
    "token": "the word embedding",
    "input": "the input embeddings",
    "layer": "the inputs of Transformer layers",
    "qk": "attention queries/keys",
    "logits": "attention logits",
    "values": "attention values",
}


def register_encoding(cls: type[PositionalEncoding]) -> type[PositionalEncoding]:
    """Class decorator: make ``cls`` creatable by its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, PositionalEncoding)):
        raise TypeError(f"register_encoding: {cls!r} is not a PositionalEncoding subclass")
    if not cls.name:
        raise ValueError(f"register_encoding: {cls.__name__} has no name")
    if _SEPARATOR in cls.name:
        raise ValueError(
            f"register_encoding: name {cls.name!r} contains {_SEPARATOR!r}, which joins the names "
            "of combined encodings"
        )
    unknown = set(cls.acts_on) - set(SITES)
    if unknown:
        raise ValueError(f"register_encoding: {cls.__name__} acts on unknown sites {unknown}")
    if cls.field not in FIELDS:
        raise ValueError(
            f"register_encoding: {cls.__name__}.field must be one of {FIELDS}, got {cls.field!r}"
        )
    other = _REGISTRY.get(cls.name)
    if other is not None and other is not cls:
        raise ValueError(
            f"register_encoding: name {cls.name!r} is already taken by {other.__name__}"
        )
    _REGISTRY[cls.name] = cls
    return cls


# Listing order: absolute (input), word-level complex, then attention-level families.
_ORDER = (
    "none", "trainable", "hierarchical", "sinusoidal", "floater", "multiplicative",
    "complex-order", "complex-vanilla", "rotary", "xpos", "shaw", "xl", "t5", "alibi",
    "deberta", "tupe", "kerple", "fire", "cope", "randomized",
)  # fmt: skip


def available_encodings() -> tuple[str, ...]:
    """Names of every registered encoding (built-in ones in a fixed order, then others)."""
    known = [n for n in _ORDER if n in _REGISTRY]
    return tuple(known + [n for n in _REGISTRY if n not in _ORDER])


def get_encoding_class(name: str) -> type[PositionalEncoding]:
    """The class registered under ``name`` (ValueError listing the known names otherwise)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown encoding {name!r}{_did_you_mean(name)}; available encodings: "
            f"{', '.join(available_encodings())}"
        ) from None


def _did_you_mean(name: object, names: Iterable[str] | None = None) -> str:
    """``" (did you mean 'rotary'?)"`` for the closest registered name (difflib), or ``""``."""
    import difflib

    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, list(available_encodings() if names is None
                                                 else names), n=1)  # fmt: skip
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_value(text: str) -> Any:
    """``"true"`` -> True, ``"3"`` -> 3, ``"0.5"`` -> 0.5, ``"inf"``/``"-inf"``/``"nan"`` (any
    case, ``"infinity"`` too) -> the float, ``"[3,4]"`` -> [3, 4]; else the string itself."""
    lowered = text.strip()
    if lowered.lower() in ("true", "false"):
        return lowered.lower() == "true"
    if lowered.lower() in ("none", "null"):
        return None
    if lowered.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return float(lowered)
    try:
        return json.loads(lowered)
    except json.JSONDecodeError:
        return lowered


def _refuse_spec(name: str) -> None:
    """A ValueError giving the Python form of a command-line spec ``name:key=value``."""
    base, _, written = name.partition(":")
    if not written or not all(p.strip() in _REGISTRY for p in base.split(_SEPARATOR)):
        return
    options = dict(item.partition("=")[::2] for item in written.split(":"))
    options = {k: parse_value(v) for k, v in options.items()}
    raise ValueError(
        f"encoding {name!r}: 'name:key=value' is the command line's spec; in Python pass the "
        f"options as keywords, create_encoding({base!r}, **{options!r}), or in a model config "
        f"encoding={base!r}, encoding_options={options!r}"
    )


def encoding_members(name: str) -> tuple[str, ...]:
    """The registered names in ``name``: ``("rotary",)`` for ``"rotary"``, ``("complex-order",
    "rotary")`` for ``"complex-order+rotary"``; a ValueError names an unknown member and lists
    the known names."""
    if not isinstance(name, str):
        raise TypeError(f"encoding name must be a string, got {type(name).__name__}")
    parts = tuple(p.strip() for p in name.split(_SEPARATOR))
    if len(parts) > 1 and not all(parts):
        raise ValueError(
            f"encoding {name!r}: empty member name; join registered names with {_SEPARATOR!r}, "
            "e.g. complex-order+rotary"
        )
    for part in parts:
        if part not in _REGISTRY:
            where = f" in {name!r}" if len(parts) > 1 else ""
            raise ValueError(
                f"unknown encoding {part!r}{where}{_did_you_mean(part)}; available encodings: "
                f"{', '.join(available_encodings())} (combine them with {_SEPARATOR!r}, e.g. "
                "complex-order+rotary)"
            )
    return parts


def _is_combination(spec: object) -> bool:
    return isinstance(spec, (list, tuple)) or (isinstance(spec, str) and _SEPARATOR in spec)


def encoding_option_parameters(
    spec: str | Sequence[Any] | type[PositionalEncoding],
) -> dict[str, inspect.Parameter]:
    """The user options ``spec`` accepts (its ``__init__`` parameters without the model context),
    as ``inspect.Parameter``; for a combination keyed ``member.option``."""
    if _is_combination(spec):
        from .combined import combined_option_parameters

        return combined_option_parameters(spec, encoding_option_parameters)
    return {n: p for n, p in _options_of(_encoding_class(spec)).items() if n not in CONTEXT}


def _options_of(cls: type) -> dict[str, inspect.Parameter]:
    params = inspect.signature(cls.__init__).parameters
    return {
        n: p
        for n, p in params.items()
        if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def infinite_option_flags(
    spec: str | Sequence[Any] | type[PositionalEncoding],
) -> dict[str, bool]:
    """Whether each user option of ``spec`` (keyed as :func:`encoding_option_parameters` keys
    them) takes ``inf`` (the class's ``infinite_options``)."""
    if _is_combination(spec):
        from .combined import combined_option_parameters

        return combined_option_parameters(spec, infinite_option_flags)
    cls = _encoding_class(spec)
    return {n: n in cls.infinite_options for n in encoding_option_parameters(cls)}


def _encoding_class(spec: str | type[PositionalEncoding] | PositionalEncoding) -> type:
    """The encoding class of a single (not combined) ``spec``: a name, a class or an instance."""
    cls = get_encoding_class(spec) if isinstance(spec, str) else spec
    return type(cls) if isinstance(cls, PositionalEncoding) else cls


def kind_error(default: Any, value: Any, infinite: bool = False) -> str | None:
    """What ``value`` should be for a field or option whose default is ``default`` (``None``:
    it fits): true/false for a flag, an integer for an integer, a finite number (or ``inf``,
    when ``infinite``) for a number, integers for a tuple of integers (the types the command
    line can spell)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "a number"
        if math.isfinite(value) or (infinite and value == math.inf):
            return None
        return "a finite number or inf" if infinite else "a finite number"
    if (
        isinstance(default, (tuple, list))
        and default
        and all(isinstance(d, int) and not isinstance(d, bool) for d in default)
    ):
        items = value if isinstance(value, (list, tuple)) else [value]
        if items and all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return None
        return "integers like 3,4,5"
    return None


def _check_context(owner: str, context: Mapping[str, Any]) -> None:
    """The model's context, when given: positive int sizes and a bool ``causal``; errors name
    the encoding class ``owner``, as its own checks do."""
    for name in ("d_model", "num_heads", "vocab_size", "max_len"):
        value = context[name]
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")
    causal = context["causal"]
    if causal is not None and not isinstance(causal, bool):
        raise TypeError(f"{owner}: causal must be True or False, got {causal!r}")


def create_encoding(
    spec: str | type[PositionalEncoding] | PositionalEncoding | Sequence[Any] | None,
    *,
    d_model: int | None = None,
    num_heads: int | None = None,
    vocab_size: int | None = None,
    max_len: int | None = None,
    causal: bool | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    defaults: Mapping[str, Any] | None = None,
    **options,
) -> PositionalEncoding:
    """Build an encoding from a name, a class or an instance (returned as is), or a combination.

    Args:
        spec: registered name (see :func:`available_encodings`), a ``PositionalEncoding``
            subclass, an instance, ``None`` (same as ``"none"``), or a combination: names joined
            by ``+`` (``"complex-order+rotary"``) or a list of names, classes or instances,
            built into one :class:`~cplxnet.encodings.combined.CombinedEncoding`.
        d_model, num_heads, vocab_size, max_len, causal, device, dtype: what the model knows;
            each is passed only if the encoding's ``__init__`` accepts it (and is not ``None``),
            so a model can always pass all of them. ``causal=True`` says the model masks keys
            after the query (a language model); encodings default to bidirectional attention.
        defaults: options given to the encoding (to each member) only if its ``__init__`` accepts
            them and ``options`` do not set them (the zoo passes its ``padding_idx`` and
            ``sparse`` this way).
        **options: the user's options, passed strictly: an unknown option is a TypeError naming
            the encoding and listing its options. A combination's options name their member:
            ``**{"rotary.base": 500}`` or ``rotary={"base": 500}`` (see
            :mod:`cplxnet.encodings.combined`).
    """
    defaults = dict(defaults or {})
    context = {
        "d_model": d_model,
        "num_heads": num_heads,
        "vocab_size": vocab_size,
        "max_len": max_len,
        "causal": causal,
        "device": device,
        "dtype": dtype,
    }
    if isinstance(spec, str):
        _refuse_spec(spec)
    if _is_combination(spec):
        from .combined import create_combined

        if isinstance(spec, str):
            encoding_members(spec)  # an unknown member: the error names the combination
        return create_combined(
            spec, create_encoding, context, defaults, options, encoding_option_parameters
        )
    if isinstance(spec, PositionalEncoding):
        if options:
            raise TypeError(
                f"create_encoding: options {sorted(options)} given with an already built "
                f"encoding {spec.name!r}; set them when constructing it"
            )
        for name in ("d_model", "num_heads", "vocab_size"):
            built = getattr(spec, name, None)
            if context[name] is not None and built is not None and built != context[name]:
                raise ValueError(
                    f"create_encoding: the encoding {spec.name!r} was built with {name}="
                    f"{built}, but the model has {name}={context[name]}; build it with the "
                    "model's sizes (or pass its name and let the model build it)"
                )
        return spec
    if spec is None:
        spec = "none"
    if isinstance(spec, str):
        cls = get_encoding_class(spec)
    elif isinstance(spec, type) and issubclass(spec, PositionalEncoding):
        cls = spec
    else:
        raise TypeError(
            "create_encoding: spec must be an encoding name, a PositionalEncoding subclass or "
            f"instance, got {type(spec).__name__}"
        )
    label = cls.name or cls.__name__
    accepted = _options_of(cls)
    kwargs = {n: v for n, v in context.items() if n in accepted and v is not None}
    user_options = [n for n in accepted if n not in CONTEXT]
    unknown = sorted(set(options) - set(user_options))
    if unknown:
        listed = ", ".join(user_options) if user_options else "none"
        raise TypeError(
            f"encoding {label!r} got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"its options are: {listed}{_did_you_mean(unknown[0], user_options)}"
        )
    _check_context(cls.__name__, context)
    for name, value in options.items():
        default = accepted[name].default
        if default is not inspect.Parameter.empty and default is not None:
            kind = kind_error(default, value, name in cls.infinite_options)
            if kind is not None:
                raise ValueError(f"encoding {label!r}: option {name} must be {kind}, got {value!r}")
    kwargs.update({n: v for n, v in defaults.items() if n in user_options})
    kwargs.update(options)
    missing = [
        n for n, p in accepted.items() if p.default is inspect.Parameter.empty and n not in kwargs
    ]
    if missing:
        hint = [n for n in missing if n in CONTEXT]
        raise TypeError(
            f"encoding {label!r} needs {', '.join(missing)}"
            + (
                f" (model context: pass {', '.join(f'{n}=...' for n in hint)} to create_encoding)"
                if hint
                else ""
            )
        )
    return cls(**kwargs)


def _describe(sites: Iterable[str]) -> str:
    sites = [s for s in SITES if s in set(sites)]
    att = [s for s in sites if s in _ATTENTION_SITES]
    parts = [SITE_DESCRIPTIONS[s] for s in sites if s not in _ATTENTION_SITES]
    if att:
        names = {"qk": "queries/keys", "logits": "logits", "values": "values"}
        parts.append("attention " + "/".join(names[s] for s in att))
    return " and ".join(parts) if parts else "nothing"


def _sites_of(encoding) -> tuple[str, frozenset[str]]:
    if isinstance(encoding, str):
        classes = [get_encoding_class(n) for n in encoding_members(encoding)]
        return encoding, frozenset().union(*(cls.acts_on for cls in classes))
    if isinstance(encoding, type) and issubclass(encoding, PositionalEncoding):
        return encoding.name or encoding.__name__, frozenset(encoding.acts_on)
    if isinstance(encoding, PositionalEncoding):
        return encoding.name or type(encoding).__name__, frozenset(encoding.acts_on)
    raise TypeError(
        f"check_sites: expected an encoding name, class or instance, got {type(encoding).__name__}"
    )


def check_sites(encoding, supported_sites: Iterable[str], model_name: str) -> None:
    """Raise a ValueError if ``encoding`` acts on a site that model ``model_name`` lacks.

    The message says where the encoding acts, what the model lacks, and lists the registered
    encodings (in their default configuration) usable with that model, e.g. ``encoding 'shaw'
    acts on attention logits/values, but model 'fasttext' has no attention; encodings usable
    with fasttext: none, trainable, ...``.
    """
    supported = frozenset(supported_sites)
    unknown = supported - set(SITES)
    if unknown:
        raise ValueError(f"check_sites: unknown sites {sorted(unknown)}; sites are {SITES}")
    name, sites = _sites_of(encoding)
    missing = sites - supported
    if not missing:
        return
    if missing <= _ATTENTION_SITES and not (supported & _ATTENTION_SITES):
        lack = "has no attention"
    else:
        lack = f"supports only {_describe(supported)}" if supported else "supports no encoding"
    usable = [n for n in available_encodings() if _REGISTRY[n].acts_on <= supported]
    raise ValueError(
        f"encoding {name!r} acts on {_describe(sites)}, but model {model_name!r} {lack}; "
        f"encodings usable with {model_name}: {', '.join(usable) if usable else 'none'}"
    )
