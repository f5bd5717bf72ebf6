"""``python -m cplxnet``: the ``cplxnet`` command (also under ``torchrun ... -m cplxnet``)."""

import sys

from .cli.main import main

sys.exit(main())
