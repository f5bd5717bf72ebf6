"""Public helpers for code built on cplxnet (the model zoo, your own layers).

* :func:`pack` / :func:`unpack`: the zero-copy interleaved real view ``[re0, im0, re1, ...]`` of a
  complex tensor and back (``pack(a) @ pack(b) = Re(a b^H)``).
* :func:`check_choice`, :func:`check_indices`, :func:`check_mask`: the input checks cplxnet's
  layers use, raising errors that name the owner and the fix.
* :func:`is_tracing`: True under ``torch.compile`` / ``torch.export``, where checks that read
  tensor data are skipped.
"""

from ._utils import check_choice, check_indices, check_mask, is_tracing, pack, unpack

__all__ = ["pack", "unpack", "check_choice", "check_indices", "check_mask", "is_tracing"]
