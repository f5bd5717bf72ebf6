"""Import ``torch.distributed.nn`` before any process group exists.

``torch.distributed.nn.functional`` binds ``group.WORLD`` as a default argument when it is
imported (``def broadcast(tensor, src, group=group.WORLD)``). Imported after
``init_process_group``, those defaults hold the default process group for the rest of the
process: ``destroy_process_group`` cannot free it, its gloo threads keep running, and at
interpreter exit the process aborts now and then ("terminate called without an active
exception", SIGABRT) although the run ended normally. The module is imported by
``torch._dynamo``, which the first meta-device initialiser (``normal_`` on ``meta``) or
``torch.compile`` loads, so a data-parallel run could reach it after joining its group.
Imported before the group exists, the defaults are ``None`` (the default group at call time)
and the group is freed when it is destroyed.
"""

from __future__ import annotations

import importlib

import torch.distributed as dist


def import_distributed_nn_early() -> None:
    """Import ``torch.distributed.nn`` unless a process group is already initialised (then its
    import would bind that group; nothing is done)."""
    if dist.is_available() and not dist.is_initialized():
        importlib.import_module("torch.distributed.nn")
