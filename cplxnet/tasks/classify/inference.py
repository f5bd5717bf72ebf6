"""Using a finished classification run: :func:`load_run` (best dev weights, vocabulary, labels),
:func:`evaluate_run` (its test split or a labelled file) and :func:`predict` (labels of texts)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ...data import (
    DataError,
    DataSpec,
    LabelMap,
    Tokenizer,
    Vocab,
    encode_split,
    encode_texts,
    prepare_data,
    read_examples,
)
from ...engine.metrics import batch_logits, evaluate
from ...engine.runs import (
    RunError,
    check_data_unchanged,
    load_checkpoint,
    load_weights,
    read_run_config,
)
from ...engine.runtime import resolve_zoo

__all__ = ["LoadedRun", "load_run", "evaluate_run", "predict"]


@dataclass
class LoadedRun:
    """A trained run ready for use: model (best dev weights, eval mode) and its text pipeline."""

    run_dir: str
    config: Any
    model: nn.Module
    spec: DataSpec
    tokenizer: Tokenizer
    vocab: Vocab
    labels: LabelMap
    run_config: dict

    @property
    def max_len(self) -> int | None:
        return (
            self.spec.max_len
            if self.spec.max_len is not None
            else getattr(self.config, "max_len", None)
        )


def load_run(run_dir: str, zoo: Any = None) -> LoadedRun:
    """Load a run folder's ``best.pt`` with its config, vocabulary and labels."""
    zoo = resolve_zoo(zoo)
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found")
    run_config = read_run_config(run_dir)
    config = zoo.config_from_dict(run_config["model"])
    spec = DataSpec.from_dict(run_config["data"])
    best_path = os.path.join(run_dir, "best.pt")
    if not os.path.exists(best_path):
        raise RunError(
            f"{run_dir} has no best.pt (the run never finished an epoch); resume it with "
            f"cplxnet train --resume {run_dir}"
        )
    state = load_checkpoint(best_path, keys={"model": dict})
    model = zoo.build_model(config)
    load_weights(model, state["model"], best_path)
    model.eval()
    return LoadedRun(
        run_dir,
        config,
        model,
        spec,
        spec.tokenizer,
        Vocab.load(os.path.join(run_dir, "vocab.json")),
        LabelMap.load(os.path.join(run_dir, "labels.json")),
        run_config,
    )


def _text_limit(run: LoadedRun, max_len: int | None) -> tuple[int | None, bool]:
    """The token limit for new texts and whether longer ones are cut: the run's own, or
    ``max_len`` (truncate; at most the model's limit)."""
    if max_len is None:
        return run.max_len, run.spec.max_len is not None
    if max_len < 1:
        raise DataError(f"--max-len must be a positive number of tokens, got {max_len}")
    if run.max_len is not None and max_len > run.max_len:
        raise DataError(
            f"--max-len {max_len} is more than the {run.max_len} positions the model of "
            f"{run.run_dir} has; give --max-len {run.max_len} or less"
        )
    return max_len, True


def evaluate_run(
    run: LoadedRun | str,
    data: str | None = None,
    *,
    label_field: str | None = None,
    text_field: str | None = None,
    fmt: str | None = None,
    batch_size: int = 256,
    zoo: Any = None,
    max_len: int | None = None,
) -> dict[str, float]:
    """Accuracy and macro-F1 of a run's best weights on its test split or on a labelled file.

    A label that the training data never had is a :class:`DataError` naming it, the file and
    the line. ``max_len`` truncates the texts to that many tokens (at most the model's limit).
    """
    if isinstance(run, str):
        run = load_run(run, zoo)
    spec = run.spec
    limit, truncate = _text_limit(run, max_len)
    if data is None:
        check_data_unchanged(
            spec,
            run.run_config.get("data_sha256") or {},
            run.run_dir,
            "its test split cannot be rebuilt; score a file with --data FILE",
        )
        if max_len is not None:
            spec = dataclasses.replace(spec, max_len=limit)
        data_obj = prepare_data(spec, vocab=run.vocab, labels=run.labels, model_max_len=run.max_len)
        split = data_obj.test
    else:
        examples = read_examples(
            data, label_field or spec.label_field, text_field or spec.text_field, fmt
        )
        split = encode_split(
            examples, run.tokenizer, run.vocab, run.labels, max_len=limit, truncate=truncate
        )
    return evaluate(run.model, split, batch_size)


def predict(
    run: LoadedRun | str,
    texts: Sequence[str],
    *,
    where: Sequence[str] | None = None,
    batch_size: int = 256,
    zoo: Any = None,
    max_len: int | None = None,
) -> list[tuple[str, float]]:
    """The predicted label and its probability for each text. Empty texts are an error; a text
    longer than the run's limit is an error unless ``max_len`` (at most the model's limit) asks
    to truncate."""
    if isinstance(run, str):
        run = load_run(run, zoo)
    if not texts:
        raise DataError("no texts to classify")
    for i, text in enumerate(texts):
        if not text.strip():
            place = where[i] if where is not None else f"text {i + 1}"
            raise DataError(f"{place}: the text is empty; give a non-empty text to classify")
    limit, truncate = _text_limit(run, max_len)
    ids = encode_texts(
        texts, run.tokenizer, run.vocab, max_len=limit, truncate=truncate, where=where
    )
    probs = torch.softmax(batch_logits(run.model, ids, batch_size), dim=1)
    p, index = probs.max(1)
    return [(run.labels.decode(int(i)), float(q)) for i, q in zip(index, p)]
