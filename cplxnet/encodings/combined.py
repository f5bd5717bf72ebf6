r"""Several encodings as one: each member acts at its own sites through the same hooks.

``create_encoding("complex-order+rotary", ...)`` or ``create_encoding(["complex-order",
"rotary"], ...)`` builds a :class:`CombinedEncoding`; the ``"+"`` form is accepted wherever an
encoding name is (the zoo's ``encoding=``, ``cplxnet train --encoding``, ``cplxnet compare
--encodings``).

Options address a member by its name (or its module key, ``-`` written ``_``):

* dotted keys, the command-line form: ``complex-order+rotary:rotary.base=500`` or, in Python,
  ``create_encoding("complex-order+rotary", **{"rotary.base": 500})``;
* one dict per member: ``create_encoding("complex-order+rotary", rotary={"base": 500},
  complex_order={"frequency": "shared"})`` (the same in a config's ``encoding_options``).

Each member's options are then checked strictly by :func:`create_encoding`, as for a single
encoding; an option that names no member is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .base import SITES, PositionalEncoding

__all__ = ["CombinedEncoding", "SEPARATOR", "member_key"]

SEPARATOR = "+"

# Sites whose hooks transform their input (embed replaces the word table, the others map x or
# q, k, v to new values): two members there would have to be composed in some order, which is not
# defined in general, so a combination allows one member per such site. "logits" and "values"
# terms are added.
EXCLUSIVE_SITES = ("token", "input", "layer", "qk")
ADDITIVE_SITES = ("logits", "values")


def member_key(name: str) -> str:
    """The module key of a member named ``name`` in ``CombinedEncoding.members`` (and so in the
    state_dict): ``complex-order`` -> ``complex_order``."""
    return re.sub(r"\W", "_", name)


def _label(encoding: PositionalEncoding) -> str:
    return encoding.name or type(encoding).__name__


class CombinedEncoding(PositionalEncoding):
    r"""Members applied together, each at its own sites:

    * ``embed``, ``encode_input``, ``layer_input``, ``rotate``: the hook of the one member acting
      on that site ("token", "input", "layer", "qk"); the others' hooks are no-ops there;
    * ``logits_bias``: the sum of the members' biases, each computed from the same ``q, k``: those
      attention passes (rotated by the "qk" member) seen through that member's
      :meth:`~cplxnet.encodings.base.PositionalEncoding.logits_operands` (xPos's rotation
      without its window-centred scale, so that e.g. xpos+shaw keeps the prefix property: the
      logits at ``t`` do not depend on the window length);
    * ``value_term``: the sum of the members' value terms;
    * ``logit_scale``: that of the one member that changes the content scale (DeBERTa, TUPE), or
      1. Each member scales its own terms by its own :meth:`content_scale`.

    So the model runs exactly as if each member had been applied by hand at its sites. A site
    where two members would have to be composed (two at "token", "input", "layer" or "qk") or
    two members with a content scale are a ValueError naming both members and the site.

    Members live in ``self.members`` (an ``nn.ModuleDict`` keyed by :func:`member_key`), so a
    model's state_dict reads ``encoding.members.complex_order.amplitude_weight``,
    ``encoding.members.rotary...``. Build through :func:`cplxnet.encodings.create_encoding`.

    Args:
        members: built encodings, at least two, all for the same model dtype, no name twice.

    Examples::

        >>> from cplxnet.encodings import create_encoding
        >>> enc = create_encoding('complex-order+rotary', vocab_size=10, d_model=8, num_heads=2)
        >>> type(enc).__name__, sorted(enc.acts_on)
        ('CombinedEncoding', ['qk', 'token'])
    """

    def __init__(self, members: Sequence[PositionalEncoding]) -> None:
        super().__init__()
        owner = type(self).__name__
        members = list(members)
        if len(members) < 2:
            raise ValueError(f"{owner}: combine at least two encodings, got {len(members)}")
        for m in members:
            if not isinstance(m, PositionalEncoding) or isinstance(m, CombinedEncoding):
                raise TypeError(
                    f"{owner}: members must be single PositionalEncoding instances, got "
                    f"{type(m).__name__}"
                )
        self.name = SEPARATOR.join(_label(m) for m in members)
        dtypes = {m.dtype for m in members}
        if len(dtypes) > 1:
            listed = ", ".join(f"{_label(m)}: {m.dtype}" for m in members)
            raise TypeError(f"{owner}: members built for different dtypes ({listed})")
        self._dtype = members[0].dtype
        self.complex_model = members[0].complex_model
        self.members = nn.ModuleDict()
        for m in members:
            key = member_key(_label(m))
            if key in self.members:
                raise ValueError(
                    f"encoding {self.name!r}: {_label(m)!r} appears twice (or two members share "
                    f"the key {key!r}); combine distinct encodings"
                )
            self.members[key] = m
        self.acts_on = frozenset().union(*(m.acts_on for m in members))
        self._at: dict[str, list[PositionalEncoding]] = {
            site: [m for m in members if site in m.acts_on] for site in SITES
        }
        for site in EXCLUSIVE_SITES:
            at = self._at[site]
            if len(at) > 1:
                raise ValueError(
                    f"encoding {self.name!r}: {_label(at[0])!r} and {_label(at[1])!r} both act "
                    f"on site {site!r}, where their hooks would have to be composed in an "
                    "undefined order; combine encodings that act on different sites (only "
                    "'logits' and 'values' terms add)"
                )
        scaled = [m for m in members if m.logit_scale != 1.0]
        if len(scaled) > 1:
            a, b = scaled[0], scaled[1]
            raise ValueError(
                f"encoding {self.name!r}: {_label(a)!r} (logit_scale {a.logit_scale:.4g}) and "
                f"{_label(b)!r} (logit_scale {b.logit_scale:.4g}) both change the scale of the "
                "content score at site 'logits'; combine at most one of them"
            )
        self.logit_scale = scaled[0].logit_scale if scaled else 1.0
        self.supports_kv_cache = all(m.supports_kv_cache for m in members)

    def _one(self, site: str) -> PositionalEncoding | None:
        at = self._at[site]
        return at[0] if at else None

    def reset_parameters(self) -> None:
        for m in self.members.values():
            m.reset_parameters()

    def embed(self, ids: torch.Tensor, **offset: int) -> torch.Tensor:
        member = self._one("token")
        if member is None:
            return super().embed(ids)  # the base class's error
        return member.embed(ids, **offset)

    def encode_input(self, x: torch.Tensor, **offset: int) -> torch.Tensor:
        member = self._one("input")
        return x if member is None else member.encode_input(x, **offset)

    def layer_input(self, x: torch.Tensor, layer: int, num_layers: int) -> torch.Tensor:
        member = self._one("layer")
        return x if member is None else member.layer_input(x, layer, num_layers)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **offset: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        member = self._one("qk")
        return (q, k, v) if member is None else member.rotate(q, k, v, **offset)

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        if not self._at["logits"]:
            return None
        rotating = self._one("qk")
        if rotating is not None:
            q, k = rotating.logits_operands(q, k)
        return _sum(m.logits_bias(q, k) for m in self._at["logits"])

    def value_term(self, weights: torch.Tensor) -> torch.Tensor | None:
        return _sum(m.value_term(weights) for m in self._at["values"])

    def extra_repr(self) -> str:
        return f"name={self.name!r}, dtype={self.dtype}"


def _sum(terms: Iterable[torch.Tensor | None]) -> torch.Tensor | None:
    total = None
    for t in terms:
        if t is not None:
            total = t if total is None else total + t
    return total


# ------------------------------------------------------------------------------------------------
# building from names and options (used by cplxnet.encodings.create_encoding)


def split_members(spec: str | Sequence[Any]) -> list[Any]:
    """The members of ``"a+b"`` (names) or of a list (names, classes, instances)."""
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(SEPARATOR)]
        if any(not p for p in parts):
            raise ValueError(
                f"encoding {spec!r}: empty member name; write names joined by "
                f"{SEPARATOR!r}, e.g. 'complex-order+rotary'"
            )
        return parts
    return list(spec)


def _member_label(member: Any) -> str:
    if isinstance(member, str):
        return member
    if isinstance(member, PositionalEncoding):
        return _label(member)
    if isinstance(member, type) and issubclass(member, PositionalEncoding):
        return member.name or member.__name__
    raise TypeError(
        "create_encoding: a combination's members must be encoding names, PositionalEncoding "
        f"subclasses or instances, got {type(member).__name__}"
    )


def member_options(
    labels: Sequence[str], options: Mapping[str, Any], parameters_of: Any = None
) -> dict[str, dict[str, Any]]:
    """Route a combination's options to its members: ``{"rotary.base": 500}`` or
    ``{"rotary": {"base": 500}}`` -> ``{"rotary": {"base": 500}}`` (members named by their
    name or :func:`member_key`). ``parameters_of(name)`` (the registry's
    ``encoding_option_parameters``) gives the members' options for the hint of an error."""
    combo = SEPARATOR.join(labels)
    by_key = {}
    for label in labels:
        by_key[label] = label
        by_key[member_key(label)] = label
    out: dict[str, dict[str, Any]] = {label: {} for label in labels}
    for key, value in options.items():
        if key in by_key and isinstance(value, Mapping):
            out[by_key[key]].update(value)
            continue
        head, dot, option = key.partition(".")
        if dot and head in by_key and option:
            out[by_key[head]][option] = value
            continue
        hint = _option_hint(labels, option if dot else key, parameters_of)
        if dot and head not in by_key:
            raise TypeError(
                f"encoding {combo!r}: option {key!r} names no member; members: "
                f"{', '.join(labels)}{hint}"
            )
        raise TypeError(f"encoding {combo!r}: option {key!r} must name its member{hint}")
    return out


def _option_hint(labels: Sequence[str], option: str, parameters_of: Any) -> str:
    """``": write rotary.base=..."`` for the members that have ``option``; else the closest
    ``member.option`` names (difflib), else every member option; only options that exist."""
    import difflib

    keys: list[str] = []
    for label in labels if parameters_of is not None else ():
        try:
            keys += [f"{label}.{name}" for name in parameters_of(label)]
        except (ValueError, TypeError):  # an unregistered member class: its options are unknown
            continue
    having = [k for k in keys if k.rsplit(".", 1)[1] == option]
    if having:
        return ": write " + " or ".join(f"{k}=..." for k in having)
    close = difflib.get_close_matches(option, [k.rsplit(".", 1)[1] for k in keys], n=3)
    near = [k for k in keys if k.rsplit(".", 1)[1] in close]
    if near:
        return f"; no member has {option!r}; did you mean " + " or ".join(near) + "?"
    return f"; no member has {option!r} (member options: {', '.join(keys) or 'none'})"


def create_combined(
    spec: str | Sequence[Any],
    create: Any,
    context: Mapping[str, Any],
    defaults: Mapping[str, Any],
    options: Mapping[str, Any],
    parameters_of: Any = None,
) -> PositionalEncoding:
    """Build the members of ``spec`` with ``create`` (:func:`create_encoding`), each with the
    model context, the ``defaults`` it accepts and its own options, and combine them. A
    one-member list gives that member itself."""
    members = split_members(spec)
    if not members:
        raise ValueError("create_encoding: an empty list of encodings; give at least one")
    labels = [_member_label(m) for m in members]
    if len(members) == 1:
        return create(members[0], **context, defaults=defaults, **options)
    routed = member_options(labels, options, parameters_of)
    built = []
    for member, label in zip(members, labels):
        try:
            built.append(create(member, **context, defaults=defaults, **routed[label]))
        except TypeError as err:  # an option or context the member lacks
            raise TypeError(f"encoding {SEPARATOR.join(labels)!r}: {err}") from None
    return CombinedEncoding(built)


def combined_option_parameters(spec: str | Sequence[Any], parameters_of: Any) -> dict[str, Any]:
    """The user options of a combination as ``member.option`` keys (the command-line form),
    each with what ``parameters_of(member)`` gives for it (the member's ``inspect.Parameter``,
    or whether it takes ``inf``)."""
    out: dict[str, Any] = {}
    for member in split_members(spec):
        label = _member_label(member)
        for name, param in parameters_of(member).items():
            out[f"{label}.{name}"] = param
    return out
