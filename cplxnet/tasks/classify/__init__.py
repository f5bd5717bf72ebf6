"""Text classification: :func:`train` / :func:`resume` a classifier of the zoo in a run folder
(:mod:`~cplxnet.tasks.classify.task`, :class:`ClassifyTask` for the engine's loop) and load,
score or query a finished run (:mod:`~cplxnet.tasks.classify.inference`)."""

from __future__ import annotations

from .task import (
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
