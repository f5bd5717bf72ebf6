"""Causal language modelling: train a ``decoder`` of the zoo on a text stream or a synthetic
copy/reverse task, score it at longer lengths, and sample from it.

>>> from cplxnet.models import preset_config
>>> from cplxnet.tasks.lm import LMOptions, train_lm
>>> results = train_lm(preset_config("lm-char", encoding="rotary"), "mr", "runs/lm-rotary",
...                    LMOptions(steps=2000), tokens="char", context=64)
>>> results["test"]["128"]["bpc"]

Modules: :mod:`~cplxnet.tasks.lm.data` (reading, tokenizing, splitting, windows),
:mod:`~cplxnet.tasks.lm.task` (:class:`LMTask`, the run folder, training, resume),
:mod:`~cplxnet.tasks.lm.options` (training options, the learning-rate schedule, early stopping),
:mod:`~cplxnet.tasks.lm.evaluate` (bpc / perplexity per evaluation length),
:mod:`~cplxnet.tasks.lm.generate` (sampling with a key/value cache, streamed) and
:mod:`~cplxnet.tasks.lm.synthetic` (copy / reverse). ``cplxnet.lm`` is the same names' public
import path.
"""

from .data import (
    TOKENIZATIONS,
    LMData,
    TokenVocab,
    detokenize,
    prepare_lm_data,
    read_corpus,
    tokenize,
    windows,
)
from .evaluate import NA, evaluate_lengths, metric_name, score_stream
from .generate import (
    LoadedLM,
    evaluate_lm_run,
    generate,
    generate_text,
    load_lm_run,
    rebuilt_model,
    scaled_models,
    stream,
    stream_text,
    unknown_prompt_tokens,
)
from .options import LMOptions
from .synthetic import TASKS, SyntheticTask
from .task import LMTask, is_lm_run, make_task, resume_lm, train_lm

__all__ = [
    "TOKENIZATIONS",
    "TASKS",
    "NA",
    "LMData",
    "TokenVocab",
    "LMOptions",
    "LMTask",
    "SyntheticTask",
    "LoadedLM",
    "read_corpus",
    "tokenize",
    "detokenize",
    "prepare_lm_data",
    "windows",
    "score_stream",
    "evaluate_lengths",
    "metric_name",
    "make_task",
    "train_lm",
    "resume_lm",
    "is_lm_run",
    "load_lm_run",
    "evaluate_lm_run",
    "generate",
    "generate_text",
    "rebuilt_model",
    "scaled_models",
    "stream",
    "stream_text",
    "unknown_prompt_tokens",
]
