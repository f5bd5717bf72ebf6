"""Complex token embedding with a working backward and optional sparse gradients."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from .._utils import HasDtype, check_indices, factory_kwargs, real_dtype
from ..init import check_word_init, word_init_
from .dropin import TorchCounterpart

__all__ = ["Embedding"]


class Embedding(TorchCounterpart, HasDtype, nn.Module, torch_class=nn.Embedding):
    r"""A table of ``num_embeddings`` complex vectors of size ``embedding_dim``.

    The table is stored **real-packed**: the parameter ``packed_weight`` is the real
    ``(V, 2D)`` tensor ``[re0, im0, re1, im1, ...]`` (:func:`cplxnet._utils.pack`), and
    :attr:`weight` is its zero-copy complex ``(V, D)`` view (reads, in-place writes under
    ``torch.no_grad()`` and gradients all reach ``packed_weight``). Storing it real makes the lookup
    torch's real ``F.embedding`` -- whose backward exists, unlike the complex one in torch 2.13 --
    and allows ``sparse=True``: the gradient is then a sparse COO tensor usable with
    ``torch.optim.SparseAdam`` (which rejects complex parameters). Dense optimisers see the same
    numbers as for a complex parameter (torch's Adam/SGD treat complex parameters as their real
    view). Tying, pruning and parametrizations therefore act on ``packed_weight``; a head that
    shares the table reads ``emb.weight`` in its forward (``CF.linear(h, emb.weight)``, as the
    zoo's decoder does), and assigning ``weight`` is an ``AttributeError`` saying so. As a view,
    ``weight`` is made anew at each read: freezing (``packed_weight.requires_grad_(False)``), the
    gradient (``packed_weight.grad``) and replacing the data (``emb.weight.data.copy_(t)``, or
    :meth:`from_pretrained`) go through ``packed_weight``; ``emb.weight.data = t`` would set the
    data of a discarded view. A state dict holding a complex ``weight`` (torch's complex
    ``nn.Embedding``) loads into ``packed_weight``.

    Args:
        num_embeddings: vocabulary size ``V``.
        embedding_dim: complex features ``D``.
        padding_idx: this row is zero at init and never receives gradient (negative values count
            from the end, as in torch).
        max_norm: if given, rows looked up are renormalised in place to complex
            ``norm_type``-norm :math:`(\sum_j |w_j|^p)^{1/p} \le` ``max_norm`` (torch's rule).
        norm_type: the ``p`` of ``max_norm`` (default 2: the complex Euclidean norm).
        scale_grad_by_freq: scale gradients by inverse token frequency in the mini-batch.
        sparse: sparse gradient for ``packed_weight``.
        _weight, _freeze: as torch's (used by :meth:`from_pretrained`): a complex ``(V, D)``
            tensor whose storage becomes the table (``packed_weight`` is its real view, no copy),
            and whether it is frozen.
        init, init_scale: (keyword-only) initialisation of the table, ``"normal"`` (default,
            scale 1) or ``"uniform"`` (default scale 0.25, Kim's initialisation of random word
            vectors); see :func:`cplxnet.init.word_init_`.
        device, dtype: factory kwargs; ``dtype`` is the complex dtype of the output (the packed
            table has the matching real dtype).

    Initialisation (:func:`cplxnet.init.word_init_`, scale ``s``): ``"normal"``: complex normal
    with :math:`E|w|^2 = s^2` (real and imaginary parts :math:`\mathcal N(0, s^2/2)`), for
    ``s = 1`` the complex analogue of ``torch.nn.Embedding``'s :math:`\mathcal N(0, 1)`;
    ``"uniform"``: real and imaginary parts :math:`U(-s/\sqrt 2, s/\sqrt 2)` each (the second
    moment :math:`s^2/3` of Kim's real :math:`U(-s, s)`, and :math:`|w| \le s`); padding row
    zero.

    Shape: integer ``(*)`` -> complex ``(*, D)``.

    Examples::

        >>> emb = Embedding(10, 4, padding_idx=0)
        >>> emb(torch.tensor([[0, 3, 7]])).shape, emb.weight.dtype
        (torch.Size([1, 3, 4]), torch.complex64)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: torch.Tensor | None = None,
        _freeze: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        init: str = "normal",
        init_scale: float | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        super().__init__()
        self.init, self.init_scale = check_word_init(init, init_scale, owner)
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(
                f"{owner}: num_embeddings and embedding_dim must be positive, got "
                f"{num_embeddings} and {embedding_dim}"
            )
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"{owner}: padding_idx={padding_idx} must be within "
                    f"[-{num_embeddings}, {num_embeddings})"
                )
            padding_idx = padding_idx % num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self._dtype = fk["dtype"]
            packed = torch.empty(
                num_embeddings, 2 * embedding_dim, device=device, dtype=real_dtype(self.dtype)
            )
        else:
            if (
                not isinstance(_weight, torch.Tensor)
                or not _weight.is_complex()
                or tuple(_weight.shape) != (num_embeddings, embedding_dim)
            ):
                raise ValueError(
                    f"{owner}: _weight must be a complex tensor of shape "
                    f"({num_embeddings}, {embedding_dim}), got "
                    f"{getattr(_weight, 'dtype', type(_weight).__name__)} "
                    f"{tuple(getattr(_weight, 'shape', ()))}"
                )
            self._dtype = _weight.dtype
            packed = torch.view_as_real(_weight.detach().resolve_conj()).flatten(-2)
        self.packed_weight = nn.Parameter(packed, requires_grad=not _freeze)
        if _weight is None:
            self.reset_parameters()

    @property
    def weight(self) -> torch.Tensor:
        """The complex ``(V, D)`` table: a view of ``packed_weight``."""
        return torch.view_as_complex(self.packed_weight.unflatten(-1, (-1, 2)))

    def __setattr__(self, name: str, value) -> None:
        if name == "weight":
            raise AttributeError(
                f"{type(self).__name__}: weight is a complex view of the real parameter "
                "packed_weight and cannot be assigned; tie, prune or parametrize packed_weight, "
                "or read emb.weight in the other module's forward (CF.linear(h, emb.weight))"
            )
        super().__setattr__(name, value)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # a complex ``weight`` (torch's complex nn.Embedding) loads as its packed view
        weight = state_dict.get(prefix + "weight")
        complex_weight = isinstance(weight, torch.Tensor) and weight.is_complex()
        if complex_weight and prefix + "packed_weight" not in state_dict:
            del state_dict[prefix + "weight"]
            packed = torch.view_as_real(weight.resolve_conj()).flatten(-2)
            state_dict[prefix + "packed_weight"] = packed
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def reset_parameters(self) -> None:
        with torch.no_grad():
            word_init_(self.weight, self.init, self.init_scale)
            if self.padding_idx is not None:
                self.packed_weight[self.padding_idx].zero_()

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(*)`` integer indices in ``[0, num_embeddings)`` -> ``(*, embedding_dim)``
        complex rows of the table (the ``padding_idx`` row is zero and gets no gradient)."""
        check_indices(input, self.num_embeddings, type(self).__name__)
        return CF.embedding_packed(
            input,
            self.packed_weight,
            self.padding_idx,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.sparse,
        )

    @classmethod
    def from_pretrained(
        cls,
        embeddings: torch.Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> Embedding:
        """Build from a complex ``(V, D)`` tensor (copied); ``freeze`` disables its gradient.
        Arguments as ``torch.nn.Embedding.from_pretrained``."""
        if (
            not isinstance(embeddings, torch.Tensor)
            or not embeddings.is_complex()
            or embeddings.dim() != 2
        ):
            raise ValueError(
                f"{cls.__name__}.from_pretrained: expected a complex 2-D tensor (V, D)"
            )
        emb = cls(
            embeddings.shape[0],
            embeddings.shape[1],
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            device=embeddings.device,
            dtype=embeddings.dtype,
        )
        with torch.no_grad():
            emb.weight.copy_(embeddings)
        emb.packed_weight.requires_grad_(not freeze)
        return emb

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2.0:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        if self.init != "normal" or self.init_scale != 1.0:
            s += f", init={self.init!r}, init_scale={self.init_scale}"
        return s + f", dtype={self.dtype}"
