"""Helpers of the comparison tests (imported as ``compare_helpers``)."""

from __future__ import annotations

from cplxnet.compare import GridOptions


def tiny_options(**changes) -> GridOptions:
    """A budget that trains a cell in a fraction of a second (tiny widths, one epoch, the
    synthetic task with a few dozen texts)."""
    fields = dict(
        train={"epochs": 1, "batch_size": 16},
        sets={
            "*": {"d_model": 8},
            "cnn": {"num_filters": 4, "kernel_sizes": [2, 3]},
            "transformer": {"num_heads": 2, "dim_feedforward": 8},
        },
        extrapolate={
            "train_len": 6,
            "synthetic": {"n_train": 40, "n_dev": 10, "n_test": 10, "vocab": 5},
        },
    )
    fields.update(changes)
    return GridOptions(**fields)
