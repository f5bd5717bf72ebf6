"""``cplxnet.train``: the import path of the classification task's public names
(:mod:`cplxnet.tasks.classify`), e.g. ``from cplxnet.train import train, load_checkpoint``."""

from __future__ import annotations

from .tasks.classify.task import (
    RUN_FILES,
    ClassifyTask,
    LoadedRun,
    RunError,
    TrainOptions,
    evaluate,
    evaluate_run,
    load_checkpoint,
    load_run,
    macro_f1,
    predict,
    progress,
    resume,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
    train,
    train_step,
    versions,
)

__all__ = [
    "TrainOptions",
    "RunError",
    "train",
    "resume",
    "evaluate",
    "macro_f1",
    "load_run",
    "LoadedRun",
    "evaluate_run",
    "predict",
    "save_checkpoint",
    "load_checkpoint",
    "seed_everything",
    "RUN_FILES",
    "train_step",
    "ClassifyTask",
    "rng_state",
    "set_rng_state",
    "progress",
    "versions",
]
