r"""Element-wise complex activations as opaque operators for ``torch.compile``.

Under ``torch.compile`` the activations of :mod:`cplxnet.functional` otherwise run as composed
torch ops that inductor lowers itself. For the ones that read the modulus or combine two
gradient paths (modReLU, cardioid, modTanh, zLeakyReLU), inductor's lowering of the complex
backward fails in torch 2.13 when the gradient arrives in a channels-last layout, as it does from
a convolution whose layout inductor optimised ("self.stride(-1) must be 1 to view ComplexFloat
as Float"), the same with torch's own complex ``conv2d``. Compiled, these activations therefore
call one custom operator ``cplxnet::activation`` (forward, the eager implementation) and
``cplxnet::activation_backward`` (its gradient, the vector-Jacobian product of the composed form
by :func:`torch.func.vjp`), which run eagerly at run time; the compiled graph treats them as
calls with contiguous outputs. ``torch.export`` and ``torch.func`` transforms keep the composed
ops (:func:`applies`), so an exported program holds only aten ops; torch refuses double backward
through a compiled graph.

Examples::

    >>> import torch
    >>> from cplxnet import functional as CF
    >>> z = torch.randn(2, 3, dtype=torch.cfloat, requires_grad=True)
    >>> out = torch.compile(CF.cardioid, backend="aot_eager", fullgraph=True)(z)
    >>> torch.allclose(out, CF.cardioid(z))
    True
"""

import contextlib
import threading
from collections.abc import Callable

import torch

from .._utils import is_transformed

__all__ = ["applies", "call", "register"]

#: kind -> eager implementation ``fn(z, param, scalar)`` (kept across a reload of this module)
_EAGER: dict[str, Callable] = globals().get("_EAGER", {})


class _Flag(threading.local):
    """A per-thread flag, ``False`` until set. The class default means the attribute always
    exists: a compiled graph guards on its value, which stays ``False`` between calls, so the
    first call that sets and restores it does not make the graph compile again."""

    on = False


#: set while an operator's implementation runs: the activation inside is never the operator
_INSIDE = _Flag()


def register(kind: str, fn: Callable) -> None:
    """Make ``fn(z, param, scalar)`` (``param`` a real tensor or ``None``, ``scalar`` a float)
    callable as the opaque activation ``kind``; ``fn`` must also run inside ``torch.func``
    transforms (its gradient is taken with :func:`torch.func.vjp`)."""
    _EAGER[kind] = fn


def applies(z: torch.Tensor) -> bool:
    """True while ``torch.compile`` traces a complex ``z`` (not ``torch.export``, not inside
    ``torch.func`` transforms, not inside the operators' own implementations)."""
    return (
        z.is_complex()
        and not _INSIDE.on
        and torch.compiler.is_compiling()
        and not torch.compiler.is_exporting()
        and not is_transformed()
    )


@contextlib.contextmanager
def _inside():
    previous, _INSIDE.on = _INSIDE.on, True
    try:
        yield
    finally:
        _INSIDE.on = previous


def _no_param(z: torch.Tensor) -> torch.Tensor:
    """The gradient slot of an activation without a parameter (an empty real tensor)."""
    return torch.empty(0, dtype=z.real.dtype, device=z.device)


def _out_shape(z: torch.Tensor, param: torch.Tensor | None) -> torch.Size:
    return z.shape if param is None else torch.broadcast_shapes(z.shape, param.shape)


@torch.library.custom_op("cplxnet::activation", mutates_args=())
def _forward(kind: str, z: torch.Tensor, param: torch.Tensor | None, scalar: float) -> torch.Tensor:
    with torch.no_grad(), _inside():
        return _EAGER[kind](z, param, scalar).contiguous()


@_forward.register_fake
def _(kind, z, param, scalar):  # noqa: ANN001, ANN202
    return z.new_empty(_out_shape(z, param))


@torch.library.custom_op("cplxnet::activation_backward", mutates_args=())
def _backward(
    kind: str, grad: torch.Tensor, z: torch.Tensor, param: torch.Tensor | None, scalar: float
) -> list[torch.Tensor]:
    # autograd does not record below a custom operator; torch.func's vjp does (the activations
    # then run their composed form, as inside any torch.func transform)
    with _inside():
        return _vjp(kind, grad, z, param, scalar)


def _vjp(kind, grad, z, param, scalar) -> list[torch.Tensor]:  # noqa: ANN001
    if param is None:
        _, vjp = torch.func.vjp(lambda t: _EAGER[kind](t, None, scalar), z)
        gz, gp = vjp(grad)[0], _no_param(z)
    else:
        _, vjp = torch.func.vjp(lambda t, p: _EAGER[kind](t, p, scalar), z, param)
        gz, gp = vjp(grad)
    return [gz.contiguous(), gp.contiguous()]


@_backward.register_fake
def _(kind, grad, z, param, scalar):  # noqa: ANN001, ANN202
    gp = param.new_empty(param.shape) if param is not None else _no_param(z)
    return [z.new_empty(z.shape), gp]


def _setup(ctx, inputs, output) -> None:  # noqa: ANN001
    kind, z, param, scalar = inputs
    ctx.kind, ctx.scalar, ctx.has_param = kind, scalar, param is not None
    ctx.save_for_backward(z, param)


def _gradient(ctx, grad):  # noqa: ANN001, ANN202
    z, param = ctx.saved_tensors
    gz, gp = _backward(ctx.kind, grad, z, param, ctx.scalar)
    return None, gz, gp if ctx.has_param else None, None


_forward.register_autograd(_gradient, setup_context=_setup)


def call(kind: str, z: torch.Tensor, param: torch.Tensor | None = None, scalar: float = 0.0):
    """The activation ``kind`` on ``z`` as the opaque operator (see the module docstring)."""
    return _forward(kind, z, param, float(scalar))
