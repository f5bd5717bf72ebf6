"""The ``cplxnet`` command line: the parser and :func:`main` (:mod:`~cplxnet.cli.main`), the one
option table (:mod:`~cplxnet.cli.options`, with the argparse types of :mod:`~cplxnet.cli.argtypes`)
and a module per subcommand: :mod:`~cplxnet.cli.train`, :mod:`~cplxnet.cli.evaluate` (``evaluate``
and ``predict``), :mod:`~cplxnet.cli.lm` (``train --task lm``, a language model's ``evaluate``,
``generate``), :mod:`~cplxnet.cli.compare` (``compare``, ``report``; ``compare --task lm`` in
:mod:`~cplxnet.cli.compare_lm`) and :mod:`~cplxnet.cli.inspect`.
"""

from __future__ import annotations

from .main import *  # noqa: F403
from .main import __all__  # noqa: F401
