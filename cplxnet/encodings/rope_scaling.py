r"""Rotary frequency scaling for running past the training length, with the semantics of Hugging
Face's ``rope_scaling`` (``transformers.modeling_rope_utils``).

Each scaling is one pure function returning ``(frequencies, attention_factor)``: the ``dim / 2``
rotation frequencies :math:`\theta_j` (float64) of a rotary width ``dim`` (real numbers; a
complex head of width ``Dh`` has ``dim = 2 Dh``), and the factor by which queries and keys are
each multiplied (so the logits by its square; Hugging Face multiplies ``cos`` and ``sin`` by it).
:data:`ROPE_SCALINGS` maps the names to the functions and :func:`rope_frequencies` dispatches.

* no scaling: :math:`\theta_j = b^{-2j/\text{dim}}`, factor 1 (:func:`default_rope`);
* ``"linear"``: :math:`\theta_j / s` (position interpolation), factor 1;
* ``"ntk"``: the base becomes :math:`b\, s^{\text{dim}/(\text{dim}-2)}`, factor 1: the *static*
  NTK-aware change of base. Hugging Face has no ``rope_scaling`` type of that name; its
  NTK-aware type, ``"dynamic"``, recomputes the base at each length ``L`` past the training
  length ``L_0`` as :math:`b\,(sL/L_0 - (s - 1))^{\text{dim}/(\text{dim}-2)}`, which equals
  this one only at :math:`L = L_0 (2s - 1)/s`;
* ``"yarn"``: NTK-by-parts, :math:`\theta_j ((1-\gamma_j)/s + \gamma_j)`, factor
  :math:`0.1 \ln s + 1`; Hugging Face's options ``truncate``, ``mscale``, ``mscale_all_dim``
  and ``attention_factor`` are accepted with its semantics (:func:`yarn_rope`).

References: position interpolation, Chen et al., "Extending Context Window of Large Language
Models via Positional Interpolation", 2023; NTK-aware scaling, bloc97, "NTK-Aware Scaled RoPE"
(2023; the static form, not Hugging Face's ``dynamic`` one that recomputes the base per length);
YaRN, Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models", ICLR 2024.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import torch

__all__ = [
    "ROPE_SCALINGS",
    "default_rope",
    "linear_rope",
    "ntk_rope",
    "yarn_rope",
    "rope_frequencies",
]


def _check_dim(dim: int, owner: str, least: int = 2) -> None:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < least or dim % 2:
        raise ValueError(f"{owner}: rotary width dim must be an even int >= {least}, got {dim!r}")


def _check_factor(factor: float, owner: str) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"{owner}: factor must be a number, got {type(factor).__name__}")
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"{owner}: factor must be a finite positive number, got {factor!r}")
    return float(factor)


def default_rope(dim: int, base: float) -> tuple[torch.Tensor, float]:
    r"""RoFormer's frequencies :math:`\theta_j = \text{base}^{-2j/\text{dim}}`, ``j < dim/2``;
    attention factor 1."""
    _check_dim(dim, "default_rope")
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim), 1.0


def linear_rope(dim: int, base: float, factor: float) -> tuple[torch.Tensor, float]:
    r"""Position interpolation (Chen et al. 2023): position ``m`` is read as ``m / s``, i.e.
    :math:`\theta_j / s`, so ``s`` times the training length spans the trained angles."""
    s = _check_factor(factor, "linear_rope")
    theta, _ = default_rope(dim, base)
    return theta / s, 1.0


def ntk_rope(dim: int, base: float, factor: float) -> tuple[torch.Tensor, float]:
    r"""NTK-aware scaling: the base becomes :math:`b\, s^{\text{dim}/(\text{dim}-2)}`, which keeps
    the highest frequency (``j = 0``) and divides the lowest (``j = dim/2 - 1``) by exactly ``s``.
    """
    s = _check_factor(factor, "ntk_rope")
    _check_dim(dim, "ntk_rope", least=4)
    return default_rope(dim, base * s ** (dim / (dim - 2)))


def yarn_rope(
    dim: int,
    base: float,
    factor: float,
    original_max_len: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, float]:
    r"""YaRN (Peng et al. 2023): NTK-by-parts interpolation and the attention temperature.

    A frequency that turns :math:`r` times over the training length :math:`L` sits at index
    :math:`d(r) = \text{dim}\, \ln(L / (2\pi r)) / (2 \ln b)`. With
    ``low = max(floor(d(beta_fast)), 0)`` and ``high = min(ceil(d(beta_slow)), dim - 1)``, the ramp
    :math:`\gamma_j = 1 - \mathrm{clamp}((j - \text{low}) / (\text{high} - \text{low}), 0, 1)`
    keeps the fast frequencies (:math:`\gamma_j = 1`, more than ``beta_fast`` turns), interpolates
    the slow ones (:math:`\gamma_j = 0`, fewer than ``beta_slow`` turns: :math:`\theta_j / s`) and
    blends linearly between: :math:`\theta'_j = \theta_j ((1 - \gamma_j)/s + \gamma_j)`.

    The attention factor :math:`\sqrt{1/t} = 0.1 \ln s + 1` (1 for ``s <= 1``) multiplies the
    queries and the keys, so the logits are multiplied by :math:`1/t` (the paper's Eq. and
    Hugging Face, which multiplies ``cos`` and ``sin`` by it).

    Hugging Face's options, with its semantics (``_compute_yarn_parameters``): ``truncate=False``
    keeps the ramp bounds ``d(beta_fast)``, ``d(beta_slow)`` unrounded (still clamped to
    ``[0, dim - 1]``); with ``mscale`` and ``mscale_all_dim`` both nonzero the factor is
    :math:`m(s, \text{mscale}) / m(s, \text{mscale\_all\_dim})` with
    :math:`m(s, a) = 0.1\, a \ln s + 1` (1 for ``s <= 1``; DeepSeek's form); an explicit
    ``attention_factor`` replaces the factor.
    """
    owner = "yarn_rope"
    s = _check_factor(factor, owner)
    _check_dim(dim, owner)
    if (
        isinstance(original_max_len, bool)
        or not isinstance(original_max_len, int)
        or (original_max_len < 1)
    ):
        raise ValueError(
            f"{owner}: original_max_len (the training length) must be a positive int, got "
            f"{original_max_len!r}"
        )
    if not (0 < beta_slow < beta_fast):
        raise ValueError(
            f"{owner}: need 0 < beta_slow < beta_fast (rotations over the training length), got "
            f"beta_fast={beta_fast!r}, beta_slow={beta_slow!r}"
        )

    def correction_dim(rotations: float) -> float:
        return dim * math.log(original_max_len / (rotations * 2 * math.pi)) / (2 * math.log(base))

    if not isinstance(truncate, bool):
        raise TypeError(f"{owner}: truncate must be True or False, got {truncate!r}")
    for what, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise ValueError(f"{owner}: {what} must be a finite number, got {value!r}")
    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as the reference: avoid dividing by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # gamma_j: 1 keeps the frequency, 0 interpolates it
    theta, _ = default_rope(dim, base)

    def mscale_of(a: float) -> float:
        return 0.1 * a * math.log(s) + 1.0 if s > 1 else 1.0

    if attention_factor is not None:
        if (
            isinstance(attention_factor, bool)
            or not isinstance(attention_factor, (int, float))
            or (not (math.isfinite(attention_factor) and attention_factor > 0))
        ):
            raise ValueError(
                f"{owner}: attention_factor must be a finite positive number, got "
                f"{attention_factor!r}"
            )
        attention = float(attention_factor)
    elif mscale and mscale_all_dim:
        attention = mscale_of(mscale) / mscale_of(mscale_all_dim)
    else:
        attention = mscale_of(1.0)
    return theta * ((1 - keep) / s + keep), attention


#: scaling name -> function ``(dim, base, factor, ...) -> (frequencies, attention_factor)``.
ROPE_SCALINGS: dict[str, Callable[..., tuple[torch.Tensor, float]]] = {
    "linear": linear_rope,
    "ntk": ntk_rope,
    "yarn": yarn_rope,
}


def rope_frequencies(
    scaling: str | None,
    dim: int,
    base: float,
    factor: float = 1.0,
    *,
    max_len: int | None = None,
    owner: str = "rope_frequencies",
    **options,
) -> tuple[torch.Tensor, float]:
    """``(frequencies, attention_factor)`` of ``scaling`` (``None``: unscaled RoFormer).

    ``options`` (e.g. ``beta_fast``) go strictly to the scaling's function: one it does not take
    is an error naming the scalings that take it. ``max_len`` is the model's length, the default
    ``original_max_len`` of the scalings that need a training length (yarn).
    """
    if scaling is None:
        if factor != 1.0 or options:
            given = ["factor"] * (factor != 1.0) + sorted(options)
            raise ValueError(
                f"{owner}: {', '.join(given)} apply only with scaling= one of "
                f"{', '.join(map(repr, ROPE_SCALINGS))}"
            )
        return default_rope(dim, base)
    if scaling not in ROPE_SCALINGS:
        raise ValueError(
            f"{owner}: unknown scaling {scaling!r}; valid scalings are None, "
            f"{', '.join(map(repr, ROPE_SCALINGS))}"
        )
    fn = ROPE_SCALINGS[scaling]
    accepted = inspect.signature(fn).parameters
    for name in options:
        if name not in accepted:
            users = [n for n, f in ROPE_SCALINGS.items() if name in inspect.signature(f).parameters]
            raise ValueError(
                f"{owner}: option {name} does not apply to scaling={scaling!r}"
                + (f"; it applies to {', '.join(map(repr, users))}" if users else "")
            )
    if "original_max_len" in accepted and options.get("original_max_len") is None:
        if max_len is None:
            raise ValueError(
                f"{owner}: scaling={scaling!r} needs original_max_len (the training length)"
            )
        options["original_max_len"] = max_len
    try:
        return fn(dim, base, factor, **options)
    except (TypeError, ValueError) as err:  # name the module the user built
        raise type(err)(f"{owner}: scaling={scaling!r}: {err}") from None
