"""Complex fully connected layer (complex weight, or one real weight shared by both parts)."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from .. import init as cinit
from .._utils import (
    HasDtype,
    check_choice,
    check_dtype,
    check_last_dim,
    check_sizes,
    factory_kwargs,
    real_dtype,
)
from .dropin import TorchCounterpart

__all__ = ["Linear", "WEIGHT_FIELDS"]

#: Number fields of a complex layer's weight: ``"complex"`` (a full complex matrix) or ``"real"``
#: (one real matrix applied to the real and imaginary parts alike).
WEIGHT_FIELDS: tuple[str, ...] = ("complex", "real")


class Linear(TorchCounterpart, HasDtype, nn.Module, torch_class=nn.Linear):
    r"""Complex affine map :math:`y = x W^T + b` (see :func:`cplxnet.functional.linear`).

    Args:
        in_features: complex input features.
        out_features: complex output features.
        bias: learn a complex additive bias.
        device, dtype: factory kwargs; ``dtype`` (the complex dtype of inputs and outputs)
            defaults to the complex type of ``torch.get_default_dtype()``; a real weight is
            stored in the matching real dtype.
        weight_field: (keyword-only) ``"complex"`` (default): a complex weight :math:`W = A + iB`.
            ``"real"``: a real weight :math:`W` applied to both parts, :math:`y = W x_r + i\,W x_i
            + b` -- the complex layer with weight :math:`W + 0i`, the "shared real and imaginary
            projections" ablation of Wang et al. ("Encoding Word Order in Complex Embeddings", ICLR
            2020, Table 4); half the parameters and half the multiplications (one real GEMM on the
            stacked parts). The bias stays complex.

    Shape: ``(*, in_features)`` complex -> ``(*, out_features)`` complex.

    Initialisation: Glorot-uniform with total variance
    :math:`E|w|^2 = 2/(\text{fan\_in}+\text{fan\_out})` (complex weight:
    :func:`cplxnet.init.xavier_uniform_`, since torch's default complex init would double it;
    real weight: ``torch.nn.init.xavier_uniform_``, the same variance, so both give outputs of the
    same scale); bias zero.

    Examples::

        >>> fc = Linear(8, 4)
        >>> fc(torch.randn(3, 8, dtype=torch.cfloat)).shape, fc.weight.dtype
        (torch.Size([3, 4]), torch.complex64)
        >>> Linear(8, 4, dtype=torch.float32)  # a real dtype is torch's layer
        Linear(in_features=8, out_features=4, bias=True)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        weight_field: str = "complex",
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        check_sizes(owner, in_features=in_features, out_features=out_features)
        check_choice(weight_field, WEIGHT_FIELDS, owner, "weight_field")
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight_field = weight_field
        self._dtype = fk["dtype"]
        rk = {"device": device, "dtype": real_dtype(self.dtype)}
        wk = fk if weight_field == "complex" else rk
        self.weight = nn.Parameter(torch.empty(out_features, in_features, **wk))
        self.bias = nn.Parameter(torch.empty(out_features, **fk)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight.is_complex():
            cinit.xavier_uniform_(self.weight)
        else:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*, in_features)`` -> ``(*, out_features)``: ``x W^T + b`` (complex, or
        real for a real dtype)."""
        check_dtype(input, self.dtype, type(self).__name__)
        check_last_dim(input, self.in_features, type(self).__name__)
        return CF.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        s = (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
        if self.weight_field != "complex":
            s += f", weight_field={self.weight_field!r}"
        return s + f", dtype={self.dtype}"
