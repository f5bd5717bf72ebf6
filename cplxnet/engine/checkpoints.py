"""``checkpoint.pt`` of every task: format :data:`CHECKPOINT_FORMAT` (:data:`CHECKPOINT_KEYS`,
one layout for a classifier and a language model), read back by :func:`read_checkpoint` with its
entries checked; a file of format 1 (each task's own layout) is upgraded on reading. Files are
written and loaded by :mod:`cplxnet.engine.runs` (atomic writes, ``weights_only`` loads)."""

from __future__ import annotations

from .runs import RunError, check_entries, load_checkpoint

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMATS",
    "CHECKPOINT_KEYS",
    "check_checkpoint_format",
    "upgrade_checkpoint",
    "read_checkpoint",
]

#: The version of ``checkpoint.pt`` and ``best.pt`` written by :func:`cplxnet.engine.fit`.
CHECKPOINT_FORMAT = 2
#: The versions :func:`read_checkpoint` loads (1: each task's own layout).
CHECKPOINT_FORMATS = (1, 2)
_NUMBER = (int, float)
#: The entries of a ``checkpoint.pt`` of format 2 and their types.
CHECKPOINT_KEYS: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "task": str,
    "step": int,
    "evaluations": int,
    "model": dict,
    "optimizers": list,
    "rng": list,
    "history": list,
    "best": (dict, type(None)),
    "since_best": int,
    "stopped": bool,
    "seconds": _NUMBER,
    "cpu_seconds": _NUMBER,
}
# the entries of format 1, by task
_FORMAT1_KEYS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "classify": {
        "epoch": int, "step": int, "model": dict, "optimizers": list, "rng": list,
        "history": list, "best": (dict, type(None)), "since_best": int,
    },
    "lm": {
        "step": int, "model": dict, "optimizer": dict, "rng": dict, "history": list,
        "best": (dict, type(None)), "seconds": _NUMBER, "cpu_seconds": _NUMBER,
    },
}  # fmt: skip


def check_checkpoint_format(state: dict, path: str) -> None:
    """A checkpoint of a format this code does not read is a one-line :class:`RunError`."""
    if state.get("format") not in CHECKPOINT_FORMATS:
        raise RunError(
            f"{path} has the unknown format {state.get('format')}; resume it with the cplxnet "
            "version that wrote it"
        )


def upgrade_checkpoint(state: dict, kind: str) -> dict:
    """A ``checkpoint.pt`` of format 1 (a classifier's or a language model's layout) as format 2
    (the number of evaluations and rounds since the best one are read off its history)."""
    history = list(state["history"])
    if kind == "classify":
        return {**state, "format": CHECKPOINT_FORMAT, "task": kind,
                "evaluations": state["epoch"], "stopped": bool(state.get("stopped", False)),
                "seconds": 0.0, "cpu_seconds": 0.0}  # fmt: skip
    since_best = 0
    for line in reversed(history):
        if line.get("best"):
            break
        since_best += 1
    rest = {k: v for k, v in state.items() if k not in ("optimizer", "rng")}
    return {**rest, "format": CHECKPOINT_FORMAT, "task": kind, "evaluations": len(history),
            "optimizers": [state["optimizer"]], "rng": [state["rng"]], "since_best": since_best,
            "stopped": False}  # fmt: skip


def read_checkpoint(path: str, kind: str) -> dict:
    """``checkpoint.pt`` of a ``kind`` run as format 2, its entries checked (a damaged file or
    one of another format is a one-line :class:`RunError` naming it)."""
    state = load_checkpoint(path, keys={"format": int})
    check_checkpoint_format(state, path)
    if state["format"] == 1:
        check_entries(state, _FORMAT1_KEYS[kind], path)
        state = upgrade_checkpoint(state, kind)
    check_entries(state, CHECKPOINT_KEYS, path)
    if state["task"] != kind:
        raise RunError(f"{path} is the checkpoint of a {state['task']} run, not of a {kind} run; "
                       "restore the run's own file")  # fmt: skip
    return state
