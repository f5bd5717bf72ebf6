r"""Variance-correct initialisation of complex parameters.

A complex weight :math:`w = a + ib` contributes :math:`E|w|^2 = E a^2 + E b^2` to the variance of a
complex affine map. Glorot's and He's criteria (Trabelsi et al., "Deep Complex Networks", ICLR
2018, Sec. 3.6) fix this **total** variance:

* Glorot (``xavier_*``): :math:`E|w|^2 = 2\,\text{gain}^2 / (\text{fan\_in} + \text{fan\_out})`;
* He (``kaiming_*``): :math:`E|w|^2 = \text{gain}^2 / \text{fan}`;

so each part gets half of it. ``torch.nn.init``'s uniform initialisers applied to a complex
tensor give each part the full real variance (twice the target); its normal ones draw a complex
normal and meet it. Fans follow ``torch.nn.init`` (for a conv weight
``(C_out, C_in/groups, *k)``: ``fan_in = C_in/groups * prod(k)``, ``fan_out = C_out * prod(k)``) and
gains ``torch.nn.init.calculate_gain``. Every function works in place under ``no_grad``, returns the
tensor, accepts ``generator=``, leaves a tensor with no elements as it is (``xavier_*``,
``kaiming_*`` and ``rayleigh_`` with torch's warning), takes conjugate views (every law here is
unchanged by conjugation) and, but for :func:`word_init_` (real or complex tables), raises a
clear error on a real tensor. complex32 tensors are drawn in complex64 and rounded (by
:func:`word_init_` directly in float16 parts).

complextorch's ``xavier_*``/``kaiming_*`` draw the same distributions (the tests check both
against the targets), and its ``trabelsi_standard_`` the Rayleigh law; these versions add
``generator=``, torch's full ``calculate_gain`` table, validation of ``mode``, and the unitary
initialiser below.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch.nn.init import _calculate_fan_in_and_fan_out, calculate_gain

__all__ = [
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "rayleigh_",
    "unitary_",
    "WORD_INITS",
    "check_word_init",
    "word_init_",
]


def _check(tensor: torch.Tensor, fn: str) -> None:
    if not isinstance(tensor, torch.Tensor) or not tensor.is_complex():
        got = tensor.dtype if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise TypeError(
            f"cplxnet.init.{fn}: expects a complex tensor, got {got}; "
            "use torch.nn.init for real tensors"
        )


def _empty(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` has no elements (then torch's initialisers warn and leave it)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def _writable(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` with a conjugate view's bit cleared: the same storage, which every law here
    fills alike (each is unchanged by conjugation)."""
    return tensor.conj() if tensor.is_conj() else tensor


def _work_dtype(tensor: torch.Tensor) -> torch.dtype:
    """The complex dtype to draw in: complex32 has no normal, polar or QR kernels."""
    return torch.complex64 if tensor.dtype == torch.complex32 else tensor.dtype


def _fans(tensor: torch.Tensor, fn: str) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError(
            f"cplxnet.init.{fn}: fan in/out need a tensor with at least 2 dims, "
            f"got shape {tuple(tensor.shape)}"
        )
    return _calculate_fan_in_and_fan_out(tensor)


def _fill_parts(
    tensor: torch.Tensor, std: float, dist: str, generator: torch.Generator | None
) -> torch.Tensor:
    """Draw real and imaginary parts i.i.d. with standard deviation ``std`` each."""
    with torch.no_grad():
        target = _writable(tensor)
        work = (
            target
            if target.dtype == _work_dtype(target)
            else torch.empty_like(target, dtype=torch.complex64)
        )
        parts = torch.view_as_real(work)  # (..., 2) view of the storage
        if dist == "normal":
            parts.normal_(0.0, std, generator=generator)
        else:
            bound = math.sqrt(3.0) * std
            parts.uniform_(-bound, bound, generator=generator)
        if work is not target:
            target.copy_(work)
    return tensor


def xavier_uniform_(
    tensor: torch.Tensor, gain: float = 1.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    r"""Complex Glorot uniform: parts i.i.d. :math:`U(-a, a)` with
    :math:`a = \text{gain}\sqrt{3/(\text{fan\_in}+\text{fan\_out})}`, so
    :math:`E|w|^2 = 2\,\text{gain}^2/(\text{fan\_in}+\text{fan\_out})`."""
    _check(tensor, "xavier_uniform_")
    if _empty(tensor):
        return tensor
    fan_in, fan_out = _fans(tensor, "xavier_uniform_")
    return _fill_parts(tensor, gain / math.sqrt(fan_in + fan_out), "uniform", generator)


def xavier_normal_(
    tensor: torch.Tensor, gain: float = 1.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    r"""Complex Glorot normal: parts i.i.d.
    :math:`\mathcal N(0, \text{gain}^2/(\text{fan\_in}+\text{fan\_out}))`, so
    :math:`E|w|^2 = 2\,\text{gain}^2/(\text{fan\_in}+\text{fan\_out})`."""
    _check(tensor, "xavier_normal_")
    if _empty(tensor):
        return tensor
    fan_in, fan_out = _fans(tensor, "xavier_normal_")
    return _fill_parts(tensor, gain / math.sqrt(fan_in + fan_out), "normal", generator)


def _he_std(tensor: torch.Tensor, a: float, mode: str, nonlinearity: str, fn: str) -> float:
    mode = mode.lower() if isinstance(mode, str) else mode  # as torch
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(
            f"cplxnet.init.{fn}: unknown mode {mode!r}; valid modes are 'fan_in', 'fan_out'"
        )
    fan_in, fan_out = _fans(tensor, fn)
    fan = fan_in if mode == "fan_in" else fan_out
    try:
        gain = calculate_gain(nonlinearity, a)
    except ValueError as err:  # torch: "Unsupported nonlinearity foo" / "negative_slope ..."
        raise ValueError(f"cplxnet.init.{fn}: {err} (see torch.nn.init.calculate_gain)") from None
    return gain / math.sqrt(2.0 * fan)  # per part: total variance gain^2 / fan


def kaiming_uniform_(
    tensor: torch.Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    r"""Complex He uniform: :math:`E|w|^2 = \text{gain}^2/\text{fan}` (as torch.nn.init)."""
    _check(tensor, "kaiming_uniform_")
    if _empty(tensor):
        return tensor
    return _fill_parts(
        tensor, _he_std(tensor, a, mode, nonlinearity, "kaiming_uniform_"), "uniform", generator
    )


def kaiming_normal_(
    tensor: torch.Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    r"""Complex He normal: :math:`E|w|^2 = \text{gain}^2/\text{fan}` (args as ``torch.nn.init``)."""
    _check(tensor, "kaiming_normal_")
    if _empty(tensor):
        return tensor
    return _fill_parts(
        tensor, _he_std(tensor, a, mode, nonlinearity, "kaiming_normal_"), "normal", generator
    )


def rayleigh_(
    tensor: torch.Tensor, criterion: str = "glorot", generator: torch.Generator | None = None
) -> torch.Tensor:
    r"""Trabelsi et al.'s polar initialisation (ICLR 2018, Sec. 3.6): modulus
    :math:`|w| \sim \mathrm{Rayleigh}(\sigma)`, phase uniform on :math:`[-\pi, \pi)`.

    :math:`E|w|^2 = 2\sigma^2`; ``criterion="glorot"`` uses
    :math:`\sigma = 1/\sqrt{\text{fan\_in}+\text{fan\_out}}`
    (:math:`E|w|^2 = 2/(\text{fan\_in}+\text{fan\_out})`), ``"he"``
    :math:`\sigma = 1/\sqrt{\text{fan\_in}}` (:math:`E|w|^2 = 2/\text{fan\_in}`, He's ReLU target).
    A Rayleigh modulus with uniform phase is
    exactly a circular complex Gaussian, so this equals :func:`xavier_normal_` / ``kaiming_normal_``
    (ReLU gain) in distribution; it is provided under the paper's name and parameterisation.
    """
    _check(tensor, "rayleigh_")
    if criterion not in ("glorot", "he"):
        raise ValueError(
            f"cplxnet.init.rayleigh_: unknown criterion {criterion!r}; "
            "valid criteria are 'glorot', 'he'"
        )
    if _empty(tensor):
        return tensor
    fan_in, fan_out = _fans(tensor, "rayleigh_")
    sigma = 1.0 / math.sqrt(fan_in + fan_out if criterion == "glorot" else fan_in)
    with torch.no_grad():
        real = torch.float64 if _work_dtype(tensor) == torch.complex128 else torch.float32
        u = torch.empty(tensor.shape, dtype=real, device=tensor.device)
        u.uniform_(0.0, 1.0, generator=generator)
        modulus = sigma * torch.sqrt(-2.0 * torch.log1p(-u))  # inverse CDF, u in [0, 1)
        phase = torch.empty_like(u).uniform_(-math.pi, math.pi, generator=generator)
        _writable(tensor).copy_(torch.polar(modulus, phase))
    return tensor


def unitary_(
    tensor: torch.Tensor, gain: float = 1.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    r"""(Semi-)unitary initialisation, the complex ``torch.nn.init.orthogonal_``.

    The tensor is viewed as ``(rows, cols) = (size(0), numel/size(0))``. A complex Gaussian
    matrix of the taller shape is QR-factorised and :math:`Q` multiplied by the phases of
    :math:`\mathrm{diag}(R)` (Mezzadri, "How to generate random matrices from the classical compact
    groups", 2007), which makes it Haar-distributed. Result times ``gain``:
    :math:`W^H W = \text{gain}^2 I` when rows >= cols (square: unitary),
    :math:`W W^H = \text{gain}^2 I` otherwise.
    (``torch.nn.init.orthogonal_`` fails on complex tensors in torch 2.13.)
    """
    _check(tensor, "unitary_")
    if tensor.dim() < 2:
        raise ValueError(
            f"cplxnet.init.unitary_: needs at least 2 dims, got shape {tuple(tensor.shape)}"
        )
    if tensor.numel() == 0:  # as torch.nn.init.orthogonal_
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with torch.no_grad():
        shape = (max(rows, cols), min(rows, cols))
        g = torch.empty(shape, dtype=_work_dtype(tensor), device=tensor.device)
        torch.view_as_real(g).normal_(0.0, 1.0, generator=generator)
        q, r = torch.linalg.qr(g)  # q: (max, min) with orthonormal columns
        d = torch.diagonal(r)
        q = q * torch.sgn(d)  # phase correction (column j times d_j/|d_j|)
        if rows < cols:
            q = q.mT
        _writable(tensor).copy_((q * gain).reshape(tensor.shape))
    return tensor


#: initialisations of a table of word vectors (:func:`word_init_`)
WORD_INITS: tuple[str, ...] = ("normal", "uniform")
#: default scale ``s`` of each initialisation of :func:`word_init_`
WORD_INIT_SCALES: dict[str, float] = {"normal": 1.0, "uniform": 0.25}


def check_word_init(
    init: str, scale: float | None, owner: str, names: tuple[str, str] = ("init", "init_scale")
) -> tuple[str, float]:
    """``(init, scale)`` validated, ``scale`` defaulted (:data:`WORD_INIT_SCALES`); otherwise a
    one-line ValueError naming ``owner`` and the option ``names``."""
    if init not in WORD_INITS:
        raise ValueError(
            f"{owner}: unknown {names[0]} {init!r}; valid values are "
            + ", ".join(map(repr, WORD_INITS))
        )
    if scale is None:
        return init, WORD_INIT_SCALES[init]
    number = isinstance(scale, (int, float)) and not isinstance(scale, bool)
    if not number or not 0 < scale < math.inf:
        raise ValueError(
            f"{owner}: {names[1]} must be a positive finite number (or None for the default), "
            f"got {scale!r}"
        )
    return init, float(scale)


def word_init_(
    tensor: torch.Tensor,
    init: str = "normal",
    scale: float | None = None,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    r"""Initialise a table of word vectors in place: ``init="normal"`` or ``"uniform"`` with
    scale ``s`` (``None``: 1 for normal, 0.25 for uniform).

    Real tensor: :math:`\mathcal N(0, s^2)` (``torch.nn.Embedding``'s :math:`\mathcal N(0, 1)`
    for ``s = 1``) or :math:`U(-s, s)`, Kim's initialisation of random word vectors
    (Kim, "Convolutional Neural Networks for Sentence Classification", EMNLP 2014:
    :math:`U(-a, a)` with :math:`a = 0.25`, chosen so that random vectors have about the variance
    of pre-trained ones). With 300-dimensional vectors the uniform table starts with norms about
    :math:`0.25 \sqrt{300/3} = 2.5` instead of :math:`\sqrt{300} \approx 17`; on small data
    sets (TREC, MR) the starting size of random word vectors is a hyper-parameter that matters.

    Complex tensor: the real and imaginary parts are drawn independently,
    :math:`\mathcal N(0, s^2/2)` each, or :math:`U(-s/\sqrt 2, s/\sqrt 2)` each. Both keep the
    second moment of the real rule entry by entry (:math:`E|w|^2 = s^2`, resp. :math:`s^2/3`,
    as a real :math:`\mathcal N(0, s^2)` resp. :math:`U(-s, s)` entry), so a complex table and
    its real twin start with vectors of the same norm, and the phase of every entry is spread
    over the whole circle (symmetric parts); the uniform rule also keeps the bound of the real
    one, :math:`|w| \le s`. (A modulus drawn from :math:`U(0, s)` with a uniform phase would
    bound :math:`|w|` alike but give each part a peaked law that no longer reduces to the real
    rule.)

    Returns ``tensor``.
    """
    init, scale = check_word_init(init, scale, "word_init_")
    with torch.no_grad():
        parts = torch.view_as_real(_writable(tensor)) if tensor.is_complex() else tensor
        s = scale / math.sqrt(2.0) if tensor.is_complex() else scale
        if init == "normal":
            parts.normal_(0.0, s, generator=generator)
        else:
            parts.uniform_(-s, s, generator=generator)
    return tensor
