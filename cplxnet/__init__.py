"""cplxnet: complex-valued neural networks for PyTorch.

``cplxnet.nn`` (layers), ``cplxnet.functional`` (their functional forms), ``cplxnet.init``
(variance-correct complex initialisers), ``cplxnet.utils`` (packing, input checks, tracing),
``cplxnet.encodings`` (every positional-encoding family,
swappable by name) and ``cplxnet.data`` (bundled MR/TREC data, tokenizer, splits).
"""

from ._distributed import import_distributed_nn_early

import_distributed_nn_early()  # before any process group: see cplxnet._distributed

from . import encodings, functional, init, nn, utils  # noqa: E402
from ._utils import complex_dtype, real_dtype  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "encodings",
    "functional",
    "init",
    "nn",
    "utils",
    "complex_dtype",
    "real_dtype",
    "__version__",
]
