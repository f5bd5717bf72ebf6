"""Conventions shared by every cplxnet module: dtype resolution, factory kwargs and input checks.

Every error raised here names the module (or function) and the fix, so that a user never sees a
stack trace from deep inside torch for a mistake of theirs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.autograd.forward_ad as _forward_ad

__all__ = [
    "complex_dtype",
    "real_dtype",
    "resolve_dtype",
    "factory_kwargs",
    "check_complex",
    "check_last_dim",
    "check_choice",
    "check_mask",
    "pack",
    "unpack",
]

_COMPLEX_OF = {
    torch.float16: torch.complex32,
    torch.bfloat16: torch.complex64,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}
_REAL_OF = {
    torch.complex32: torch.float16,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}


def complex_dtype(dtype: torch.dtype | None = None) -> torch.dtype:
    """The complex dtype matching ``dtype`` (default: ``torch.get_default_dtype()``).

    ``complex_dtype(torch.float64) is torch.complex128``; a complex dtype is returned unchanged.
    """
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if dtype.is_complex:
        return dtype
    if dtype not in _COMPLEX_OF:
        raise TypeError(f"no complex dtype corresponds to {dtype}; use a floating-point dtype")
    return _COMPLEX_OF[dtype]


def real_dtype(dtype: torch.dtype | None = None) -> torch.dtype:
    """The real dtype of the parts of ``dtype`` (``complex128 -> float64``; real unchanged)."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    return _REAL_OF.get(dtype, dtype)


def resolve_dtype(dtype: torch.dtype | None, owner: str, allow_real: bool = False) -> torch.dtype:
    """Resolve a module's ``dtype=`` argument.

    ``None`` gives the complex dtype of ``torch.get_default_dtype()``. A real floating dtype is
    accepted only by modules that also run real-valued (``allow_real=True``: attention, the
    Transformer, normalisation used by real twins); elsewhere it is an error naming ``owner``.
    """
    if dtype is None:
        return complex_dtype()
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{owner}: dtype must be a torch.dtype, got {dtype!r}")
    if dtype.is_complex:
        return dtype
    if allow_real and dtype.is_floating_point:
        return dtype
    if allow_real:
        raise TypeError(f"{owner}: dtype must be a floating or complex dtype, got {dtype}")
    raise TypeError(
        f"{owner}: dtype must be complex (torch.complex64 or torch.complex128), got {dtype}. "
        f"Pass dtype=None to use {complex_dtype()} (the complex type of the default dtype)."
    )


def factory_kwargs(
    device: torch.device | str | None,
    dtype: torch.dtype | None,
    owner: str,
    allow_real: bool = False,
) -> dict:
    """``{"device": device, "dtype": resolved dtype}`` for creating parameters and buffers."""
    return {"device": device, "dtype": resolve_dtype(dtype, owner, allow_real)}


def check_complex(x: torch.Tensor, owner: str, name: str = "input") -> None:
    """Raise a TypeError naming ``owner`` unless ``x`` is a complex tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_complex():
        raise TypeError(
            f"{owner}: {name} must be a complex tensor (torch.complex64/complex128), "
            f"got {x.dtype}. "
            "Convert real data with torch.complex(x, torch.zeros_like(x)) or x.to(torch.cfloat)."
        )


def check_last_dim(x: torch.Tensor, size: int, owner: str, name: str = "input") -> None:
    """Raise a ValueError naming ``owner`` unless ``x.shape[-1] == size``."""
    if x.dim() == 0 or x.shape[-1] != size:
        raise ValueError(
            f"{owner}: expected {name} with last dimension {size}, got shape {tuple(x.shape)}"
        )


def check_choice(value: str, choices: Iterable[str], owner: str, what: str = "mode") -> str:
    """Return ``value`` if it is one of ``choices``; otherwise a ValueError listing them."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(
            f"{owner}: unknown {what} {value!r}; valid {_plural(what)} are "
            f"{', '.join(map(repr, choices))}"
        )
    return value


def _plural(noun: str) -> str:
    """English plural of a lower-case noun of an error message (``frequency`` -> ``frequencies``,
    ``bias`` -> ``biases``, ``mode`` -> ``modes``)."""
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "sh", "ch")):
        return noun + "es"
    return noun + "s"


def check_mask(
    mask: torch.Tensor | None, shape: Sequence[int], owner: str, name: str = "mask"
) -> None:
    """Check a boolean padding mask ``(B, L)`` (**True = padding**, masked out, as the
    ``key_padding_mask`` of :class:`torch.nn.MultiheadAttention`) against the expected ``shape``.
    """
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{owner}: {name} must be a torch.bool tensor, got {got}")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{owner}: {name} must have shape {tuple(shape)}, got {tuple(mask.shape)}")


def pack(x: torch.Tensor) -> torch.Tensor:
    """Zero-copy real view of a complex tensor: ``(..., D)`` complex -> ``(..., 2D)`` real.

    The features are interleaved ``[re0, im0, re1, im1, ...]``, so for complex ``a, b`` the plain
    real dot product ``pack(a) @ pack(b)`` equals ``Re(a . conj(b))`` = ``Re(a b^H)``. Real
    tensors are returned unchanged, which lets one code path serve complex and real models.
    """
    if not x.is_complex():
        return x
    return torch.view_as_real(x.resolve_conj()).flatten(-2)


def unpack(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack`: back to complex if ``like`` is complex, else unchanged (a view
    when the strides allow it, see :func:`as_complex`)."""
    if not like.is_complex():
        return x
    if torch.compiler.is_compiling():
        # a copy whose base is the (..., 2) tensor: torch 2.13 cannot rebuild a complex view of an
        # unflatten view as a fake tensor when it crosses a graph break ("Tensor must have a last
        # dimension of size 2"; seen in masked_mean and the LSTM with lengths)
        return torch.view_as_complex(x.unflatten(-1, (-1, 2)).clone())
    return as_complex(x.unflatten(-1, (-1, 2)))


# --- dtype and index checks ---
__all__ += ["check_dtype", "check_indices", "as_shape"]


def check_dtype(x: torch.Tensor, dtype: torch.dtype, owner: str, name: str = "input") -> None:
    """Raise a TypeError naming ``owner`` unless ``x.dtype == dtype``.

    A complex module given a real tensor gets the :func:`check_complex` message; any other
    mismatch (e.g. a complex64 input to a complex128 module) names both dtypes and the fix.
    Rebuild the module with ``dtype=`` rather than calling ``module.to(dtype)``: modules that keep
    real parameters (normalisation gains, packed embedding tables) are not converted correctly by
    ``nn.Module.to`` between real and complex dtypes.
    """
    if dtype.is_complex:
        check_complex(x, owner, name)
    elif not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(
            f"{owner}: {name} has dtype {x.dtype} but the module's parameters are {dtype}; "
            f"convert the input with x.to({dtype}) or build the module with dtype={x.dtype}"
        )


def check_indices(ids: torch.Tensor, num: int, owner: str, name: str = "input") -> None:
    """Raise unless ``ids`` is an integer tensor with every entry in ``[0, num)``.

    Non-integer tensors give a TypeError. The range check is one ``aminmax`` reduction and
    :func:`assert_on_device`, so it never copies data to the host: on CPU an out-of-range entry is
    an IndexError quoting the offending value; on an accelerator it is a device-side assertion
    (as torch's own embedding kernel raises for such an index).
    """
    if not isinstance(ids, torch.Tensor):
        got = type(ids).__name__
        raise TypeError(f"{owner}: {name} must be a torch.Tensor of indices, got {got}")
    if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise TypeError(
            f"{owner}: {name} must be an integer tensor (torch.long) of indices, got {ids.dtype}"
        )
    if ids.numel() == 0 or runs_composed():  # the range check reads data: eager mode only
        return
    lo, hi = torch.aminmax(ids)

    def error() -> IndexError:
        bad = int(lo) if int(lo) < 0 else int(hi)  # read on the failing path only
        return IndexError(
            f"{owner}: index {bad} in {name} is out of range for a table of {num} rows "
            f"(valid indices are 0..{num - 1})"
        )

    assert_on_device((lo >= 0) & (hi < num), error)


def as_shape(shape: int | Sequence[int], owner: str, name: str = "normalized_shape") -> tuple:
    """Normalise an ``int`` or sequence of positive ints to a tuple (error naming ``owner``)."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        msg = f"{owner}: {name} must be an int or a sequence of ints, got {shape!r}"
        raise TypeError(msg) from None
    if len(shape) == 0 or any(s <= 0 for s in shape):
        raise ValueError(f"{owner}: {name} must be non-empty with positive sizes, got {shape}")
    return shape


__all__ += ["as_complex", "check_sizes", "HasDtype", "function_output"]


class HasDtype:
    """Mixin giving a module the public read-only ``dtype`` it was built for.

    Every cplxnet module that is built for one dtype (complex, or real for a real twin) stores the
    resolved factory dtype once in ``__init__`` as ``self._dtype`` and reads it back through this
    property: inputs are checked against ``module.dtype`` and ``extra_repr`` shows it. Rebuild a
    module with ``dtype=`` rather than converting it with ``module.to(dtype)`` (see
    :func:`check_dtype`).

    A complex module refuses precision changes: ``module.to(dtype)``, ``.double()``,
    ``.float()``, ``.half()``, ``.bfloat16()`` and ``.type(dtype)`` raise a ``TypeError`` before
    any of its tensors is converted if they would change the dtype of a parameter or buffer (torch
    would convert the complex and the real parameters of a layer inconsistently, e.g. real norm
    gains to complex). ``.to(module.dtype)`` (and ``.to(device, module.dtype)``, as generic
    training code calls it) changes no dtype: the real parameters of a complex module stay real.
    A module built with a real dtype converts to another real floating dtype as torch's layers do
    (``dtype`` follows); its complex tables (rotary's ``e^{i m theta}``) follow at the matching
    complex precision and are rebuilt, as a fresh build in that dtype has them; to a complex dtype
    it is refused. Moving between devices is unaffected. So ``dtype`` always matches the
    parameters.
    """

    _dtype: torch.dtype

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the module was built for (complex, or real for a real twin)."""
        return self._dtype

    def _apply(self, fn, recurse=True):  # noqa: ANN001 - torch's signature
        real = not self._dtype.is_complex
        target = _probe_dtype(fn, self._dtype) if real else None
        if target is not None and target.is_complex:
            raise TypeError(self._refusal(f"it would become {target}", target))
        converted = target if target is not None and target.is_floating_point else self._dtype
        changed = converted != self._dtype
        moves: dict[tuple, tuple[torch.device, torch.dtype]] = {}  # instead of fn: (device, dtype)
        seen = set()
        for name, t in [*self.named_parameters(), *self.named_buffers()]:
            key = (t.dtype, t.device)
            if key in seen:
                continue
            seen.add(key)
            probe = fn(torch.empty(0, dtype=t.dtype, device=t.device))
            new = probe.dtype
            if real and t.is_complex() and (changed or new != t.dtype):
                # a real module's table: its precision follows the module's, and only that
                moves[key] = (probe.device, complex_dtype(converted) if changed else t.dtype)
            elif new == t.dtype or (real and t.is_floating_point() and new.is_floating_point):
                continue  # unchanged, or a real module converting as torch's layers do
            elif new == self._dtype:  # a complex module's own dtype: keep, move only
                moves[key] = (probe.device, t.dtype)
            else:
                raise TypeError(self._refusal(f"{name} would become {new} from {t.dtype}", new))
        if moves:
            convert = fn

            def fn(t):  # noqa: ANN001, ANN202
                move = moves.get((t.dtype, t.device))
                return convert(t) if move is None else t.to(device=move[0], dtype=move[1])

        out = super()._apply(fn, recurse)  # type: ignore[misc]
        if changed:
            self._dtype = converted
            reset_tables = getattr(self, "reset_tables", None)
            if callable(reset_tables):  # fixed tables, rebuilt at the new precision
                reset_tables()
        return out

    def _refusal(self, what: str, new: torch.dtype) -> str:
        """The message of a refused precision change to ``new``."""
        owner = type(self).__name__
        wanted = self._dtype.is_complex and (new.is_floating_point or new.is_complex)
        target = complex_dtype(new) if wanted else new
        fix = (
            f"it already is {target}: drop the dtype conversion (.to(device) moves it)"
            if target == self._dtype
            else f"build it with {owner}(..., dtype={target}) instead and copy the weights with "
            "load_state_dict"
        )
        return (
            f"{owner}: cannot change the precision of a cplxnet module ({what}; the module is "
            f"{self._dtype}); {fix}"
        )


def _probe_dtype(
    fn: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype
) -> torch.dtype | None:
    """The dtype ``fn`` (a ``Module._apply`` function) makes of ``dtype``, or ``None`` if it
    cannot run here (``.cuda()`` on a machine without one: a module without tensors then changes
    nothing, as torch's)."""
    try:
        return fn(torch.empty(0, dtype=dtype)).dtype
    except Exception:  # noqa: BLE001 - a probe only: the tensors' own conversion raises as torch's
        return None


def check_sizes(owner: str, **sizes: int) -> None:
    """Raise a ValueError naming ``owner`` unless every keyword value is a positive int, e.g.
    ``check_sizes("Linear", in_features=5, out_features=3)``."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")


def as_complex(x: torch.Tensor) -> torch.Tensor:
    """``torch.view_as_complex`` of a real ``(..., 2)`` tensor, copying only if its strides forbid
    the view (last-dim stride 1 and even strides elsewhere), e.g. results of ops on strided views.
    The copy has the canonical row-major strides (``x.contiguous()`` may keep odd strides on an
    empty tensor or on size-1 dims, which ``view_as_complex`` rejects).
    """
    if is_tracing():  # strides and offsets are symbolic there: the copy is always valid
        return torch.view_as_complex(x.clone(memory_format=torch.contiguous_format))
    if x.stride(-1) != 1 or any(s % 2 for s in x.stride()[:-1]) or x.storage_offset() % 2:
        x = x.clone(memory_format=torch.contiguous_format)
    return torch.view_as_complex(x)


def function_output(out: torch.Tensor, *inputs: object) -> torch.Tensor:
    """``out``, returned by an ``autograd.Function``'s forward, as a tensor of its own memory
    that autograd does not take for a view. Autograd refuses in-place ops on a Function's outputs
    that are views ("Output 0 of ... is a view and is being modified inplace"), so ``y +=
    identity`` after a layer (a residual block) would fail where torch's layers allow it. An
    output in the memory of a tensor input (a view of it, or under ``torch.inference_mode``,
    which records no views, the input reshaped) is copied, so that an in-place op on it cannot
    change the input; a view of a tensor made in the forward is detached from its base (no
    copy)."""
    memory = out.untyped_storage().data_ptr()
    if any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == memory
           for t in inputs):  # fmt: skip
        return out.clone()
    return out.detach() if out._is_view() else out


class _RealView(torch.autograd.Function):
    """``torch.view_as_real`` whose backward views the gradient as complex (:func:`as_complex`)
    instead of first making it contiguous, as torch's own backward does: a channels-last
    gradient stays a view. Written with ``setup_context``, so ``torch.func`` transforms take
    it."""

    @staticmethod
    def forward(z):  # noqa: D102 (autograd.Function)
        return torch.view_as_real(z)

    @staticmethod
    def setup_context(ctx, inputs, output):  # noqa: D102
        pass

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        return as_complex(grad)


def real_view(z: torch.Tensor) -> torch.Tensor:
    """``torch.view_as_real(z)`` (a view, the parts on a last axis of 2) with a backward that
    copies the gradient only when its strides forbid the complex view (:class:`_RealView`); a
    contiguous ``z`` takes torch's own (its gradient is contiguous either way)."""
    z = z.resolve_conj()
    if runs_composed() or z.is_contiguous() or not (torch.is_grad_enabled() and z.requires_grad):
        return torch.view_as_real(z)
    return _RealView.apply(z)


def dense_order(x: torch.Tensor) -> list[int] | None:
    """A permutation of ``x``'s dims under which the non-contiguous ``x`` is contiguous (e.g.
    ``(0, 2, 3, 1)`` for a channels-last ``(N, C, H, W)`` tensor), or None (``x`` contiguous,
    not dense, or traced). Element-wise ops on ``x.permute(order)`` see plain contiguous memory,
    which torch's CPU kernels run much faster than the same memory through permuted strides."""
    if is_tracing() or x.is_contiguous():
        return None
    order = sorted(range(x.dim()), key=lambda d: -x.stride(d))
    return order if x.permute(order).is_contiguous() else None


def inverse_order(order: list[int]) -> list[int]:
    """The permutation undoing ``x.permute(order)``."""
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv


__all__ += ["real_view", "dense_order", "inverse_order"]


# --- tracing: data-dependent checks run in eager mode only ----------------------------------------
__all__ += ["is_tracing", "is_transformed", "runs_composed", "without_autocast", "assert_on_device"]


def is_tracing() -> bool:
    """True while ``torch.compile`` or ``torch.export`` traces the code.

    Checks that read tensor *data* (index ranges, sequence lengths, whether any row is fully
    masked) run in eager mode only: under tracing they would break the graph (``torch.compile``)
    or fail on a data-dependent guard (``torch.export``). Shape and dtype checks stay on.
    """
    return torch.compiler.is_compiling() or torch.compiler.is_exporting()


def is_transformed() -> bool:
    """True inside a ``torch.func`` transform (``vmap``, ``grad``, ``jvp``, ``jacrev``, ...) or
    a forward-mode AD level (``torch.autograd.forward_ad.dual_level``). The hand-written autograd
    Functions and NumPy paths of :mod:`cplxnet.functional` have no batching or forward-mode rule,
    so the composed torch ops run there instead (:func:`eager_complex`)."""
    return torch._C._are_functorch_transforms_active() or _forward_ad._current_level >= 0


def runs_composed() -> bool:
    """True where :mod:`cplxnet.functional` runs composed torch ops instead of its hand-written
    autograd Functions, NumPy host math and channels-last conversions: while ``torch.compile``,
    ``torch.export`` or ``torch.jit`` traces (:func:`is_tracing`), and inside ``torch.func``
    transforms and forward-mode AD (:func:`is_transformed`)."""
    return is_tracing() or torch.jit.is_tracing() or is_transformed()


def without_autocast(fn: Callable) -> Callable:
    """``fn(...)`` run with autocast disabled on the device of its first complex tensor argument
    (positional or keyword, in any order): torch's complex ops ignore autocast, and so do
    cplxnet's layers, including those computed on real kernels (convolutions, attention,
    split-gate RNNs) and the whitening norms (whose hand-written backward would otherwise mix the
    autocast dtype of saved statistics with the input's). A call with no complex tensor argument
    (a real twin) follows autocast as torch's layers do."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tensors = (a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
        x = next((a for a in tensors if a.is_complex()), None)
        if x is not None:
            device = x.device.type
            if torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device):
                with torch.autocast(device, enabled=False):
                    return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return wrapper


def assert_on_device(ok: torch.Tensor, error: Callable[[], Exception]) -> None:
    """Raise ``error()`` unless the one-element bool tensor ``ok`` is True, without reading
    ``ok`` on the host (``torch._assert_async``).

    On CPU the check is immediate and raises ``error()`` (a clear message naming the owner). On
    an accelerator it is a device-side assertion: the stream is never stalled for it, and a
    False value makes a later synchronising call fail with torch's "device-side assert
    triggered" error (the behaviour of torch's own indexing kernels for an out-of-range index).
    Skipped while tracing (:func:`is_tracing`), like every check that reads tensor data.
    """
    if is_tracing():
        return
    try:
        torch._assert_async(ok)
    except RuntimeError:  # CPU: the assertion ran synchronously
        raise error() from None


class _Parts(torch.autograd.Function):
    """Complex ``x`` -> its real and imaginary parts as two contiguous real tensors."""

    @staticmethod
    def forward(ctx, x):  # noqa: D102 (autograd.Function)
        x = x.resolve_conj()
        return x.real.contiguous(), x.imag.contiguous()

    @staticmethod
    def backward(ctx, g_re, g_im):  # noqa: D102
        if g_re is None:
            g_re = torch.zeros_like(g_im)
        if g_im is None:
            g_im = torch.zeros_like(g_re)
        return torch.complex(g_re, g_im)


class _Join(torch.autograd.Function):
    """Real parts ``a, b`` -> complex ``a + ib``; the backward returns contiguous parts."""

    @staticmethod
    def forward(ctx, a, b):  # noqa: D102
        return torch.complex(a, b)

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        g = g.resolve_conj()
        return g.real.contiguous(), g.imag.contiguous()


def parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The real and imaginary parts of complex ``x`` as two contiguous real tensors.

    Element-wise ops and reductions on ``x.real`` / ``x.imag`` (stride 2) or on
    ``view_as_real(x)`` broadcast against per-element scalars (an inner dimension of size 2)
    do not vectorise on CPU and measured 3-7x slower than the same op on contiguous halves; one
    copy here, then contiguous real kernels, is faster from about three ops on. The backward is
    the inverse copy (``torch.complex`` of the two part gradients). Under
    :func:`runs_composed`: ``x.real``, ``x.imag`` (contiguous copies).
    """
    if runs_composed():
        x = x.resolve_conj()
        return x.real.contiguous(), x.imag.contiguous()
    return _Parts.apply(x)


def join(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """``torch.complex(re, im)`` whose backward returns contiguous part gradients (one copy)
    instead of the stride-2 views ``g.real``, ``g.imag`` (under :func:`runs_composed`: torch's
    own)."""
    if runs_composed():
        return torch.complex(re, im)
    return _Join.apply(re, im)


def eager_complex(x: torch.Tensor) -> bool:
    """True for a complex ``x`` outside tracing, compilation and ``torch.func`` transforms
    (:func:`is_transformed`): where the hand-written autograd Functions of
    :mod:`cplxnet.functional` run (tracers and compilers get the composed torch ops, which they
    can fuse; transforms get them because the Functions have no batching or forward rule)."""
    return x.is_complex() and not runs_composed()


def grad_via_composed(fn, inputs: tuple, ctx, grad) -> tuple:
    """Backward of a hand-written autograd Function when a graph is requested
    (``create_graph=True``): the gradients of ``fn(*inputs)``, the same map composed of
    differentiable torch ops, so double backward is exact. ``grad`` is one tensor or a tuple
    (one per output of ``fn``)."""
    with torch.enable_grad():
        out = fn(*inputs)
    wanted = [t for t, need in zip(inputs, ctx.needs_input_grad) if need]
    grads = iter(torch.autograd.grad(out, wanted, grad, create_graph=True, allow_unused=True))
    return tuple(next(grads) if need else None for need in ctx.needs_input_grad)
