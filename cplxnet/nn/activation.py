"""Complex activation modules (see :mod:`cplxnet.functional.activation` for the math).

All accept complex input and, but for :class:`MVN`, reducing to the real activation, real input
too (so real twins of complex models can share code). Parameter-free activations take no
``device``/``dtype`` (as ``torch.nn.ReLU``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .. import functional as CF
from .._utils import (
    HasDtype,
    as_shape,
    check_choice,
    check_dtype,
    factory_kwargs,
    real_dtype,
)

__all__ = [
    "CReLU",
    "ModReLU",
    "ZReLU",
    "Cardioid",
    "SplitTanh",
    "SplitSigmoid",
    "SplitGELU",
    "PReLU",
    "ELU",
    "CELU",
    "LeakyReLU",
    "ZLeakyReLU",
    "ModTanh",
    "GeorgiouKoutsougeras",
    "MVN",
    "ACTIVATIONS",
    "activation_module",
]


def _check_tensor(x: object, owner: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: input must be a torch.Tensor, got {type(x).__name__}")
    if not (x.is_complex() or x.is_floating_point()):
        raise TypeError(f"{owner}: input must be a complex or floating tensor, got {x.dtype}")


class CReLU(nn.Module):
    r"""Split ReLU :math:`\max(x, 0) + i \max(y, 0)` (Trabelsi et al., ICLR 2018), with
    ``torch.nn.ReLU``'s argument ``inplace=False``.

    Shape: any; complex -> complex (real -> ReLU).

    Examples::

        >>> act = CReLU()
        >>> act(torch.tensor([1 - 2j, -1 + 3j]))
        tensor([1.+0.j, 0.+3.j])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise:
        ReLU on the real and imaginary parts separately (``inplace``: into ``input``)."""
        _check_tensor(input, type(self).__name__)
        return CF.crelu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ZReLU(nn.Module):
    r"""zReLU: keeps :math:`z` when :math:`0 \le \arg z \le \pi/2`, else 0 (Guberman 2016).

    Examples::

        >>> act = ZReLU()
        >>> act(torch.tensor([1 + 1j, -1 + 1j, 1 - 1j]))
        tensor([1.+1.j, 0.+0.j, 0.+0.j])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise:
        ``input`` where its phase is in ``[0, pi/2]``, else 0."""
        _check_tensor(input, type(self).__name__)
        return CF.zrelu(input)


class Cardioid(nn.Module):
    r"""Complex cardioid :math:`\tfrac12(1 + \cos\arg z) z` (Virtue et al., ICIP 2017).

    Examples::

        >>> act = Cardioid()
        >>> act(torch.tensor([2 + 0j, 1j, -2 + 0j]))
        tensor([2.+0.0000j, 0.+0.5000j, -0.+0.0000j])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise:
        ``(1 + cos(arg z)) z / 2``."""
        _check_tensor(input, type(self).__name__)
        return CF.cardioid(input)


class SplitTanh(nn.Module):
    r"""Split tanh :math:`\tanh x + i \tanh y` (bounded; the analytic ``torch.tanh`` has poles).

    Examples::

        >>> act = SplitTanh()
        >>> act(torch.tensor([0 + 0j, 100 - 100j]))
        tensor([0.+0.j, 1.-1.j])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise:
        tanh on the real and imaginary parts."""
        _check_tensor(input, type(self).__name__)
        return CF.split_tanh(input)


class SplitSigmoid(nn.Module):
    r"""Split sigmoid :math:`\sigma(x) + i \sigma(y)`.

    Examples::

        >>> act = SplitSigmoid()
        >>> act(torch.tensor([0 + 0j]))
        tensor([0.5000+0.5000j])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise:
        sigmoid on the real and imaginary parts."""
        _check_tensor(input, type(self).__name__)
        return CF.split_sigmoid(input)


class SplitGELU(nn.Module):
    r"""Split GELU :math:`\mathrm{GELU}(x) + i\,\mathrm{GELU}(y)`.

    Args:
        approximate: 'none' or 'tanh', as ``torch.nn.GELU``.

    Examples::

        >>> act = SplitGELU()
        >>> act(torch.tensor([1 - 1j]))
        tensor([0.8413-0.1587j])
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = check_choice(
            approximate, ("none", "tanh"), type(self).__name__, "approximate"
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise:
        GELU on the real and imaginary parts."""
        _check_tensor(input, type(self).__name__)
        return CF.split_gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ModReLU(HasDtype, nn.Module):
    r"""modReLU :math:`\mathrm{ReLU}(|z| + b)\, z/|z|` with a learnable real bias per feature
    (Arjovsky et al., ICML 2016).

    Keeps the phase, shrinks the modulus by :math:`-b` and zeroes entries with :math:`|z| < -b`.
    Output and gradient are finite at :math:`z = 0` (see :func:`cplxnet.functional.modrelu`).

    Args:
        num_features: shape of the bias, matched against the trailing dim(s) of the input, a
            size of 1 broadcasting: ``1`` for one shared threshold, ``D`` per last-dim feature,
            ``(C, 1, 1)`` per channel of ``(N, C, H, W)`` feature maps.
        bias_init: initial value of every bias entry. The default 0 makes the layer start as the
            identity with the threshold learned from there (a negative start such as
            complextorch's -0.1 can leave units with small inputs dead, receiving no gradient).
        device, dtype: factory kwargs; ``dtype`` is the complex (or, for a real twin, real) dtype of
            the inputs; the bias is stored in the matching real dtype.

    Shape: ``(*, *S)`` -> same, each size of ``num_features`` 1 or the one of ``S``.

    Examples::

        >>> act = ModReLU(4, bias_init=-1.0)
        >>> act(torch.tensor([2 + 0j, 0.5j, -3 + 0j, 0.1 + 0j])).detach()
        tensor([ 1.+0.j,  0.+0.j, -2.+0.j,  0.+0.j])
        >>> ModReLU((8, 1, 1))(torch.randn(2, 8, 5, 5, dtype=torch.cfloat)).shape  # per channel
        torch.Size([2, 8, 5, 5])
    """

    def __init__(
        self,
        num_features: int | Sequence[int],
        bias_init: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.num_features = as_shape(num_features, owner, "num_features")
        self.bias_init = float(bias_init)
        self._dtype = fk["dtype"]
        self.bias = nn.Parameter(
            torch.empty(self.num_features, device=device, dtype=real_dtype(fk["dtype"]))
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.bias, self.bias_init)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*, *num_features)`` complex -> the same shape,
        ``ReLU(|z| + b) z / |z|`` with the learned real bias ``b`` ``(*num_features)``."""
        owner = type(self).__name__
        check_dtype(input, self.dtype, owner)
        k = len(self.num_features)
        trailing = tuple(input.shape[-k:]) if input.dim() >= k else None
        if trailing is None or any(n not in (1, d) for n, d in zip(self.num_features, trailing)):
            raise ValueError(
                f"{owner}: expected input ending in dims {self.num_features} (a 1 matches any "
                f"size), got shape {tuple(input.shape)}"
            )
        return CF.modrelu(input, self.bias)

    def extra_repr(self) -> str:
        nf = self.num_features[0] if len(self.num_features) == 1 else self.num_features
        return f"num_features={nf}, bias_init={self.bias_init}, dtype={self.dtype}"


class PReLU(HasDtype, nn.Module):
    r"""Split PReLU :math:`\mathrm{PReLU}_a(x) + i\,\mathrm{PReLU}_a(y)` with a learned real slope
    per channel (He et al., ICCV 2015; the split form as complextorch's ``CPReLU``).

    ``torch.nn.PReLU``'s arguments: ``num_parameters`` slopes (1, or the number of channels on
    dim 1 of the input), each initialised to ``init``. The slopes are real (stored in the real
    dtype of the parts) and shared by the real and imaginary part of a channel.

    Shape: ``(*)`` with the channels on dim 1 -> same.

    Examples::

        >>> m = cplxnet.nn.PReLU(16)
        >>> m(torch.randn(8, 16, 32, 32, dtype=torch.cfloat)).shape
        torch.Size([8, 16, 32, 32])
    """

    def __init__(
        self,
        num_parameters: int = 1,
        init: float = 0.25,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int):
            raise TypeError(f"{owner}: num_parameters must be an int, got {num_parameters!r}")
        if num_parameters < 1:
            raise ValueError(f"{owner}: num_parameters must be >= 1, got {num_parameters}")
        self.num_parameters = num_parameters
        self.init = float(init)
        self._dtype = fk["dtype"]
        self.weight = nn.Parameter(
            torch.empty(num_parameters, device=device, dtype=real_dtype(fk["dtype"]))
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.weight, self.init)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*)`` complex, channels on dim 1 -> ``(*)``: PReLU on each part."""
        owner = type(self).__name__
        check_dtype(input, self.dtype, owner)
        if self.num_parameters != 1 and (input.dim() < 2 or input.shape[1] != self.num_parameters):
            raise ValueError(
                f"{owner}: expected {self.num_parameters} channels on dim 1, got shape "
                f"{tuple(input.shape)}"
            )
        return CF.split_prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}, init={self.init}, dtype={self.dtype}"


class _AlphaSplit(nn.Module):
    """Shared ``(alpha, inplace)`` arguments of the split exponential units."""

    _fn = staticmethod(CF.split_elu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = float(alpha)
        self.inplace = inplace

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``, element-wise on each part."""
        _check_tensor(input, type(self).__name__)
        return self._fn(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class ELU(_AlphaSplit):
    r"""Split ELU :math:`\mathrm{ELU}(x) + i\,\mathrm{ELU}(y)` (Clevert et al., ICLR 2016), with
    ``torch.nn.ELU``'s arguments ``(alpha=1.0, inplace=False)``; real input gives torch's ELU.

    Examples::

        >>> cplxnet.nn.ELU()(torch.tensor([-1.0 + 2.0j]))
        tensor([-0.6321+2.j])
    """

    _fn = staticmethod(CF.split_elu)


class CELU(_AlphaSplit):
    r"""Split CELU :math:`\mathrm{CELU}(x) + i\,\mathrm{CELU}(y)` (Barron 2017), with
    ``torch.nn.CELU``'s arguments ``(alpha=1.0, inplace=False)``; real input gives torch's CELU.

    Examples::

        >>> cplxnet.nn.CELU(alpha=2.0)(torch.tensor([-1.0 + 2.0j]))
        tensor([-0.7869+2.j])
    """

    _fn = staticmethod(CF.split_celu)


class _SlopeActivation(nn.Module):
    """Shared ``(negative_slope, inplace)`` arguments of the leaky rectifiers (torch's
    ``nn.LeakyReLU``'s)."""

    _fn = staticmethod(CF.split_leaky_relu)

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.inplace = inplace

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real: leaky ReLU) -> ``(*)`` (``inplace``:
        into ``input``)."""
        _check_tensor(input, type(self).__name__)
        return self._fn(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class LeakyReLU(_SlopeActivation):
    r"""Split leaky ReLU :math:`\mathrm{LReLU}(x) + i\,\mathrm{LReLU}(y)` with
    ``torch.nn.LeakyReLU``'s arguments ``(negative_slope=0.01, inplace=False)``; real input gives
    torch's LeakyReLU (Maas et al., ICML 2013; see :func:`cplxnet.functional.split_leaky_relu`).

    Examples::

        >>> cplxnet.nn.LeakyReLU(0.2)(torch.tensor([-1.0 + 2.0j]))
        tensor([-0.2000+2.j])
    """

    _fn = staticmethod(CF.split_leaky_relu)


class ZLeakyReLU(_SlopeActivation):
    r"""zLeakyReLU: :math:`z` if :math:`0 \le \arg z \le \pi/2`, else ``negative_slope`` times
    :math:`z` (Guberman's zReLU with a leak, as torchcvnn's ``zLeakyReLU``).

    Examples::

        >>> cplxnet.nn.ZLeakyReLU(0.1)(torch.tensor([1.0 + 1.0j, -1.0 + 1.0j]))
        tensor([ 1.0000+1.0000j, -0.1000+0.1000j])
    """

    _fn = staticmethod(CF.zleaky_relu)


class ModTanh(nn.Module):
    r"""Amplitude-phase tanh :math:`\tanh(|z|)\, e^{i\arg z}` (Hirose, Electronics Letters 1992):
    phase kept, modulus squashed into [0, 1) (see :func:`cplxnet.functional.modtanh`).

    Examples::

        >>> cplxnet.nn.ModTanh()(torch.tensor([3.0 + 4.0j])).abs()
        tensor([0.9999])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real: tanh) -> ``(*)``."""
        _check_tensor(input, type(self).__name__)
        return CF.modtanh(input)


class GeorgiouKoutsougeras(nn.Module):
    r"""Georgiou-Koutsougeras activation :math:`z / (c + |z|/r)` (IEEE TCAS-II 1992): phase kept,
    modulus saturating at ``r`` (complextorch's ``CVSigLog``).

    Examples::

        >>> cplxnet.nn.GeorgiouKoutsougeras(c=1.0, r=2.0)(torch.tensor([3.0 + 4.0j])).abs()
        tensor([1.4286])
    """

    def __init__(self, c: float = 1.0, r: float = 1.0) -> None:
        super().__init__()
        if c <= 0 or r <= 0:
            raise ValueError(f"{type(self).__name__}: c and r must be positive, got c={c}, r={r}")
        self.c = float(c)
        self.r = float(r)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex (or real) -> ``(*)``."""
        _check_tensor(input, type(self).__name__)
        return CF.georgiou_koutsougeras(input, self.c, self.r)

    def extra_repr(self) -> str:
        return f"c={self.c}, r={self.r}"


class MVN(nn.Module):
    r"""Multi-valued neuron activation (Aizenberg): ``sectors=None`` maps :math:`z` to
    :math:`z/|z|`; ``sectors=k`` to the k-th root of unity opening the sector of :math:`\arg z`,
    with the continuous map's gradient (straight-through; see :func:`cplxnet.functional.mvn`).

    Examples::

        >>> cplxnet.nn.MVN(sectors=4)(torch.tensor([-1.0 + 2.0j])).angle()
        tensor([1.5708])
    """

    def __init__(self, sectors: int | None = None) -> None:
        super().__init__()
        owner = type(self).__name__
        if sectors is not None and (
            isinstance(sectors, bool) or not isinstance(sectors, int) or sectors < 2
        ):
            raise ValueError(f"{owner}: sectors must be an integer >= 2 (or None), got {sectors!r}")
        self.sectors = sectors

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` any shape ``(*)``, complex -> ``(*)`` on the unit circle."""
        owner = type(self).__name__
        _check_tensor(input, owner)
        if not input.is_complex():
            raise TypeError(f"{owner}: input must be complex, got {input.dtype}")
        return CF.mvn(input, self.sectors)

    def extra_repr(self) -> str:
        return f"sectors={self.sectors}"


# name -> (complex module, real module); each takes (num_features, factory kwargs). On the real
# line crelu, zrelu and cardioid all reduce to ReLU, split_gelu to GELU, split_tanh to tanh,
# split_sigmoid to the sigmoid, and modrelu to relu(|x| + b) sign(x).
_FACTORIES: dict[str, tuple[Callable[..., nn.Module], Callable[..., nn.Module]]] = {
    "crelu": (lambda n, fk: CReLU(), lambda n, fk: nn.ReLU()),
    "zrelu": (lambda n, fk: ZReLU(), lambda n, fk: nn.ReLU()),
    "cardioid": (lambda n, fk: Cardioid(), lambda n, fk: nn.ReLU()),
    "split_gelu": (lambda n, fk: SplitGELU(), lambda n, fk: nn.GELU()),
    "split_tanh": (lambda n, fk: SplitTanh(), lambda n, fk: nn.Tanh()),
    "split_sigmoid": (lambda n, fk: SplitSigmoid(), lambda n, fk: nn.Sigmoid()),
    "modrelu": (lambda n, fk: ModReLU(n, **fk), lambda n, fk: ModReLU(n, **fk)),
    "split_elu": (lambda n, fk: ELU(), lambda n, fk: nn.ELU()),
    "split_celu": (lambda n, fk: CELU(), lambda n, fk: nn.CELU()),
    "zleaky_relu": (lambda n, fk: ZLeakyReLU(), lambda n, fk: nn.LeakyReLU()),
    "modtanh": (lambda n, fk: ModTanh(), lambda n, fk: nn.Tanh()),
}
_ALIASES = {
    "relu": "crelu",
    "gelu": "split_gelu",
    "tanh": "split_tanh",
    "sigmoid": "split_sigmoid",
    "elu": "split_elu",
    "celu": "split_celu",
}

#: Names accepted by :func:`activation_module` (the canonical names, then the torch-style aliases
#: ``relu`` -> ``crelu``, ``gelu`` -> ``split_gelu``, ``tanh`` -> ``split_tanh``, ``sigmoid`` ->
#: ``split_sigmoid``, ``elu`` -> ``split_elu``, ``celu`` -> ``split_celu``).
ACTIVATIONS: tuple[str, ...] = tuple(_FACTORIES) + tuple(_ALIASES)


def activation_module(
    name: str,
    num_features: int | Sequence[int] = 1,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> nn.Module:
    """The activation ``name`` (one of :data:`ACTIVATIONS`) for a layer of ``dtype``.

    A complex ``dtype`` (the default: the complex type of ``torch.get_default_dtype()``) gives the
    complex activation (:class:`CReLU`, :class:`ZReLU`, :class:`Cardioid`, :class:`SplitGELU`,
    :class:`SplitTanh`, :class:`SplitSigmoid`, :class:`ModReLU`, :class:`ELU`, :class:`CELU`,
    :class:`ZLeakyReLU`, :class:`ModTanh`); a real floating ``dtype`` its restriction to the
    reals, as torch's module where there is one (``crelu``, ``zrelu`` and ``cardioid`` ->
    ``nn.ReLU``, ``split_gelu`` -> ``nn.GELU``, ``split_tanh`` and ``modtanh`` -> ``nn.Tanh``,
    ``split_sigmoid`` -> ``nn.Sigmoid``, ``split_elu`` -> ``nn.ELU``, ``split_celu`` ->
    ``nn.CELU``, ``zleaky_relu`` -> ``nn.LeakyReLU``; ``modrelu`` -> a real :class:`ModReLU`, i.e.
    ``relu(|x| + b) sign(x)``). This is the one table behind the Transformer's ``activation=``
    and the model zoo's, so a complex model and its real twin agree on every name.

    Args:
        name: an activation name (aliases ``relu``, ``gelu``, ``tanh``, ``sigmoid``, ``elu``,
            ``celu`` accepted).
        num_features: width covered by modReLU's learnable bias (ignored by the others).
        device, dtype: factory kwargs of modReLU's bias; ``dtype`` also picks complex or real.
    """
    fk = factory_kwargs(device, dtype, "activation_module", allow_real=True)
    check_choice(name, ACTIVATIONS, "activation_module", "activation")
    complex_make, real_make = _FACTORIES[_ALIASES.get(name, name)]
    return (complex_make if fk["dtype"].is_complex else real_make)(num_features, fk)
