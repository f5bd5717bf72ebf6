"""Helpers shared by the encodings: model widths, complex sinusoids, input checks, relative indices.

Private to :mod:`cplxnet.encodings`; everything here works for complex and real models alike.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import NamedTuple

import torch

from .._utils import (
    as_complex,
    assert_on_device,
    check_last_dim,
    is_tracing,
    real_dtype,
    runs_composed,
)

__all__: list[str] = []


def complex_features(width: int, complex_model: bool, owner: str, what: str = "d_model") -> int:
    """Number of complex features behind a model width: ``width`` (complex) or ``width / 2`` (real).

    A real model sees complex features through :func:`cplxnet._utils.pack` (interleaved re/im), so
    its width must be even.
    """
    if not isinstance(width, int) or width <= 0:
        raise ValueError(f"{owner}: {what} must be a positive int, got {width!r}")
    if complex_model:
        return width
    if width % 2:
        raise ValueError(
            f"{owner}: a real model sees this encoding as {what}/2 complex features (interleaved "
            f"re/im pairs), so {what} must be even, got {width}"
        )
    return width // 2


def head_width(d_model: int, num_heads: int, owner: str) -> int:
    """``d_model / num_heads`` with a clear error when it does not divide."""
    if not isinstance(num_heads, int) or num_heads <= 0:
        raise ValueError(f"{owner}: num_heads must be a positive int, got {num_heads!r}")
    if not isinstance(d_model, int) or d_model <= 0 or d_model % num_heads:
        raise ValueError(
            f"{owner}: d_model ({d_model}) must be a positive multiple of num_heads ({num_heads})"
        )
    return d_model // num_heads


def check_base(base: float, owner: str) -> float:
    """``base`` of a frequency ladder :math:`\text{base}^{-j/n}` as a float: a finite number
    > 0 (0, a negative or a NaN base would give infinite or NaN frequencies)."""
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"{owner}: base must be a number, got {base!r}")
    if not (math.isfinite(base) and base > 0):
        raise ValueError(f"{owner}: base must be a finite number > 0, got {base!r}")
    return float(base)


def sinusoid_frequencies(n: int, base: float = 10000.0) -> torch.Tensor:
    """``w_j = base^(-j/n)``, ``j < n``, float64: the frequencies of ``n`` complex features.

    With ``n = d/2`` these are Vaswani et al.'s ``10000^(-2j/d)`` for a real width ``d``.
    """
    return base ** (-torch.arange(n, dtype=torch.float64) / n)


def table_positions(n: int, device: torch.device | str | None) -> torch.Tensor:
    """Positions ``0 .. n-1`` of a fixed table built for ``device``: on the ``meta`` device when
    that is the target (the table is a shape and allocates nothing: a length check of any
    length), else on torch's default device (the CPU, whose float64 angles every device then
    receives, unless a ``with torch.device(...)`` block sets another)."""
    if device is not None and torch.device(device).type == "meta":
        return torch.arange(n, device="meta")
    return torch.arange(n)


def sinusoid_angles(positions: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """``positions[:, None] * freqs`` computed in float64 (exact angles for long sequences), on
    the device of ``positions``."""
    freqs = freqs.to(device=positions.device, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * freqs


def complex_sinusoid(
    positions: torch.Tensor, freqs: torch.Tensor, model_dtype: torch.dtype
) -> torch.Tensor:
    """``exp(i k w)`` for each position ``k``, in the model's dtype: complex ``(L, n)``, or packed
    real ``(L, 2n)`` = ``[cos k w_0, sin k w_0, cos k w_1, ...]`` for a real model."""
    ang = sinusoid_angles(positions, freqs)  # (L, n) float64
    rd = real_dtype(model_dtype)
    if model_dtype.is_complex:
        return torch.polar(torch.ones_like(ang), ang).to(model_dtype)
    return torch.stack((ang.cos(), ang.sin()), dim=-1).flatten(-2).to(rd)


def view_complex(x: torch.Tensor) -> torch.Tensor:
    """Complex view of the adjacent pairs of a real ``(..., 2n)`` tensor (copies only if strides
    forbid the view; :func:`cplxnet._utils.as_complex`). A bfloat16 ``x``, which has no complex
    type, is first copied to float32: the caller casts its result back."""
    if x.dtype == torch.bfloat16:
        x = x.float()
    return as_complex(x.unflatten(-1, (-1, 2)))


def check_sequence(
    x: torch.Tensor, width: int, complex_model: bool, owner: str, name: str = "input"
) -> None:
    """Check a ``(B, L, D)`` sequence of the model's kind (complex or real) and width."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.is_complex() != complex_model:
        kind = "complex" if complex_model else "real"
        raise TypeError(
            f"{owner}: this encoding was built for a {kind} model but {name} has dtype "
            f"{x.dtype}; build the encoding with dtype={x.dtype} (create_encoding(..., dtype=...))"
        )
    if x.dim() != 3:
        raise ValueError(f"{owner}: expected {name} of shape (B, L, {width}), got {tuple(x.shape)}")
    check_last_dim(x, width, owner, name)


def check_heads(q: torch.Tensor, k: torch.Tensor, num_heads: int, width: int, owner: str) -> None:
    """Check packed real ``q (B, H, Lq, P)`` and ``k (B, H, Lk, P)`` given to ``logits_bias``."""
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(
                f"{owner}: logits_bias expects packed real {name} (cplxnet._utils.pack), got {got}"
            )
        if t.dim() != 4 or t.shape[1] != num_heads or t.shape[-1] != width:
            raise ValueError(
                f"{owner}: expected packed {name} of shape (B, {num_heads}, L, {width}), got "
                f"{tuple(t.shape)}"
            )


def check_ids(ids: torch.Tensor, num: int, owner: str) -> None:
    """Integer token ids in ``[0, num)`` (the range checked without a host read: an IndexError
    on CPU, a device-side assertion on an accelerator)."""
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.is_complex():
        got = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise TypeError(f"{owner}: ids must be an integer tensor (torch.long), got {got}")
    if ids.dim() != 2:
        raise ValueError(f"{owner}: expected ids of shape (B, L), got {tuple(ids.shape)}")
    if ids.numel() == 0 or runs_composed():  # the range check reads data: eager mode only
        return
    lo, hi = torch.aminmax(ids)

    def error() -> IndexError:
        bad = int(lo) if int(lo) < 0 else int(hi)  # read on the failing path only
        return IndexError(f"{owner}: token id {bad} out of range for vocab_size={num}")

    assert_on_device((lo >= 0) & (hi < num), error)  # no host read off the CPU


def query_positions(
    lq: int, lk: int, device: torch.device | str | None = None, *, at_end: bool = True
) -> torch.Tensor:
    """``(Lq,)`` long positions of the queries among keys at ``0 .. Lk-1``.

    ``at_end=True``: the queries are the last ``Lq`` positions, ``Lk - Lq .. Lk - 1`` (a decoder
    whose ``Lq`` new tokens follow ``Lk - Lq`` cached keys; x-transformers' convention);
    ``at_end=False``: ``0 .. Lq - 1``. Both agree when ``Lq == Lk``.
    """
    start = lk - lq if at_end else 0
    return torch.arange(start, start + lq, device=device)


def relative_index(
    lq: int, lk: int, device: torch.device | str | None = None, *, at_end: bool = True
) -> torch.Tensor:
    """``(Lq, Lk)`` long tensor of ``i - j`` (query position minus key position), with the query
    positions of :func:`query_positions`: by default the queries are the last ``Lq`` positions
    of the keys (a decoder's new tokens after its cached keys)."""
    i = query_positions(lq, lk, device, at_end=at_end)
    j = torch.arange(lk, device=device)
    return i[:, None] - j[None, :]


def normal_(t: torch.Tensor, std: float) -> torch.Tensor:
    """Normal init with total variance ``std**2`` for complex and real tensors alike."""
    with torch.no_grad():
        return t.copy_(torch.randn(t.shape, dtype=t.dtype, device=t.device) * std)


def glorot_(t: torch.Tensor) -> torch.Tensor:
    """Glorot-uniform init of a real ``(out, in)`` matrix."""
    fan_out, fan_in = t.shape[0], t.shape[-1]
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        return t.uniform_(-bound, bound)


class Positions(NamedTuple):
    """Positions other than ``0 .. L-1`` for the rows of a position table: ``index`` is an
    ``(L,)`` long tensor of positions, all below ``count`` (a Python int, so that the table can
    be sized without reading the tensor). :class:`~cplxnet.encodings.RandomizedEncoding` passes
    them to the hooks of the encoding it wraps (``positions=``)."""

    index: torch.Tensor
    count: int


def check_offset(offset: int, owner: str) -> None:
    """``offset`` (the tokens already in a decoder's cache, the position of the first row) is an
    integer >= 0: an int, or anything Python indexes with (a NumPy integer, a 0-d integer
    tensor); a symbolic int of a compiled graph is not read."""
    if isinstance(offset, torch.SymInt):
        return
    try:
        value = None if isinstance(offset, bool) else operator.index(offset)
    except TypeError:
        value = None
    if value is None or value < 0:
        raise ValueError(
            f"{owner}: offset is the number of tokens already in the cache, an int >= 0; got "
            f"{offset!r}"
        )


def rows_at(
    table: Callable[[int], torch.Tensor],
    length: int,
    positions: Positions | None,
    offset: int = 0,
) -> torch.Tensor:
    """The rows of ``table(n)`` (the first ``n`` positions) at ``offset .. offset+length-1``
    (``offset``: the positions already in a decoder's cache), or at ``positions.index`` when
    given."""
    if positions is None:
        return table(offset + length)[offset:]
    if positions.index.shape != (length,):
        raise ValueError(
            f"positions: expected {length} positions (one per token), got "
            f"{tuple(positions.index.shape)}"
        )
    return table(positions.count)[positions.index]


def cached_rows(module: torch.nn.Module, attr: str, length: int, build) -> torch.Tensor:
    """First ``length`` rows of the non-persistent buffer ``attr`` of ``module``, rebuilt (at
    least doubled) with ``build(n, device)`` when it is too short. The buffer follows
    ``module.to(device)`` and never enters the state_dict; one rebuilt in inference mode is a
    normal tensor, which a later training step can use.

    While ``torch.compile`` or ``torch.export`` traces (:func:`cplxnet.utils.is_tracing`), rows
    past the buffer are ``build(length, device)`` in the graph and the buffer is left as it is:
    a length within the buffer reads a slice of it (the training hot path), and a length past it
    (an evaluation at 8L) compiles a graph that builds its rows (``torch.compile`` recompiles at
    the boundary; a program exported with a dynamic length serves the side of the boundary its
    example input was on)."""
    buf = getattr(module, attr)
    if buf.shape[0] < length:
        if is_tracing():
            return build(length, buf.device)
        n = max(length, 2 * buf.shape[0])
        if torch.is_inference_mode_enabled():  # a normal tensor, which later training can use
            with torch.inference_mode(False):
                buf = build(n, buf.device)
        else:
            buf = build(n, buf.device)
        setattr(module, attr, buf)
    return buf[:length]


def check_bias_heads(q: torch.Tensor, k: torch.Tensor, num_heads: int, owner: str) -> None:
    """``q (B, H, Lq, P)`` and ``k (B, H, Lk, P)`` of ``num_heads`` heads, for a bias that reads
    only their shapes."""
    if q.dim() != 4 or k.dim() != 4 or q.shape[1] != num_heads or k.shape[1] != num_heads:
        raise ValueError(
            f"{owner}: expected q, k of shape (B, {num_heads}, L, P), got {tuple(q.shape)}, "
            f"{tuple(k.shape)}"
        )


def distance(lq: int, lk: int, causal: bool, device=None) -> torch.Tensor:
    """``(Lq, Lk)`` long distance between query ``i`` (queries at the end of the keys,
    :func:`query_positions`) and key ``j``: ``max(i - j, 0)`` when ``causal`` (keys after the
    query are masked; 0 keeps every formula finite there), else ``|i - j|``."""
    rel = relative_index(lq, lk, device, at_end=True)
    return rel.clamp(min=0) if causal else rel.abs()
