"""Using a finished classification run: :func:`load_run` (best dev weights, vocabulary, labels),
:func:`evaluate_run` (its test split or a labelled file) and :func:`predict` (labels of texts)."""

from __future__ import annotations

import dataclasses
import json
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
from ...engine.options import TrainOptions
from ...engine.runs import (
    RunError,
    check_data_unchanged,
    check_run_started,
    load_checkpoint,
    load_weights,
    read_run_config,
)
from ...engine.runtime import resolve_zoo

__all__ = [
    "LoadedRun",
    "load_run",
    "read_classify_config",
    "build_run_model",
    "load_vocab_and_labels",
    "evaluate_run",
    "predict",
]

_RESTORE = "restore the file or train the run again"
# the JSON values TrainOptions' fields take, by annotation (an int is a float; a bool no number)
_OPTION_TYPES = {"int": ((int,), "an integer"), "float": ((int, float), "a number"),
                 "bool": ((bool,), "true or false")}  # fmt: skip


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


def _damaged(where: str, err: Exception, section: str = "") -> RunError:
    detail = err.args[0] if isinstance(err, KeyError) or not str(err) else str(err)
    if section and not detail.startswith(f"{section}."):
        detail = f"{section}: {detail}"
    return RunError(f"{where} was edited or is damaged ({detail}); {_RESTORE}")


def _check_option_types(train: dict) -> None:
    """A ValueError naming the first ``train`` entry of a type its TrainOptions field cannot
    take (``"lr": "abc"`` would otherwise fail as a comparison of a str with an int)."""
    for f in dataclasses.fields(TrainOptions):
        value = train.get(f.name)
        kind = str(f.type).split(" | ")
        if (
            f.name not in train
            or kind[0] not in _OPTION_TYPES
            or (value is None and "None" in kind)
        ):
            continue
        types, what = _OPTION_TYPES[kind[0]]
        if isinstance(value, bool) != (kind[0] == "bool") or not isinstance(value, types):
            raise ValueError(f"train.{f.name} is {value!r}, not {what}")


def read_classify_config(run_dir: str, zoo: Any = None) -> tuple[dict, Any, TrainOptions, DataSpec]:
    """``(run_config, model config, training options, data spec)`` of a classifier run's
    config.json: the one place a run's config is turned into options. A file that is not a
    cplxnet run's, or whose sections are missing or hold values no model, options or data spec
    can be made of (an edited or damaged file), is a one-line :class:`RunError` naming it."""
    zoo = resolve_zoo(zoo)
    run_config = read_run_config(run_dir)
    where = os.path.join(run_dir, "config.json")
    for section in ("model", "train", "data"):
        if not isinstance(run_config.get(section), dict):
            raise _damaged(where, ValueError(f"it has no {section!r} section"))
    section = "model"
    try:
        family, families = run_config["model"].get("family"), getattr(zoo, "FAMILIES", None)
        if families is not None and family not in families:
            raise ValueError(
                f"model.family is {family!r}, not a classifier family ({', '.join(families)})"
            )
        config = zoo.config_from_dict(run_config["model"])
        section = "train"
        _check_option_types(run_config["train"])
        options = TrainOptions.from_dict(run_config["train"])
        section = "data"
        spec = DataSpec.from_dict(run_config["data"])
    except (ValueError, TypeError, KeyError, DataError) as err:
        raise _damaged(where, err, section) from None
    return run_config, config, options, spec


def build_run_model(config: Any, run_dir: str, zoo: Any = None) -> nn.Module:
    """The model of a run's config; a config no model can be built from (an unknown encoding,
    widths that do not fit) is a :class:`RunError` naming the run's config.json."""
    try:
        return resolve_zoo(zoo).build_model(config)
    except (ValueError, TypeError, KeyError) as err:
        raise _damaged(os.path.join(run_dir, "config.json"), err, "model") from None


def load_vocab_and_labels(run_dir: str, config: Any) -> tuple[Vocab, LabelMap]:
    """``vocab.json`` and ``labels.json`` of a run; a missing or damaged file, or one that does
    not fit the model (``vocab_size``, ``num_classes``), is a :class:`RunError` naming it."""
    loaded = []
    for name, make, what, size in (
        ("vocab.json", Vocab.from_dict, "vocabulary", getattr(config, "vocab_size", None)),
        ("labels.json", LabelMap, "label list", getattr(config, "num_classes", None)),
    ):
        path = os.path.join(run_dir, name)
        try:
            with open(path, encoding="utf-8") as fh:
                item = make(json.load(fh))
            entries = item.itos if isinstance(item, Vocab) else item.labels
            if not all(isinstance(entry, str) for entry in entries):
                raise ValueError("its entries are not all strings")
        except FileNotFoundError:
            raise RunError(f"{path} is missing; the run folder is incomplete: {_RESTORE}") from None
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            how = "not valid JSON" if isinstance(err, json.JSONDecodeError) else f"not a {what}"
            raise RunError(f"{path} is damaged ({how}: {reason}); {_RESTORE}") from None
        if size is not None and len(entries) != size:
            raise RunError(
                f"{path} has {len(entries)} entries but the run's model has {size}; the file was "
                f"edited or is damaged: {_RESTORE}"
            )
        loaded.append(item)
    return loaded[0], loaded[1]


def load_run(run_dir: str, zoo: Any = None) -> LoadedRun:
    """Load a run folder's ``best.pt`` with its config, vocabulary and labels."""
    zoo = resolve_zoo(zoo)
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found")
    run_config, config, _, spec = read_classify_config(run_dir, zoo)
    best_path = os.path.join(run_dir, "best.pt")
    check_run_started(run_dir, "epoch ended", to="use")
    if not os.path.exists(best_path):
        raise RunError(
            f"{run_dir} has no best.pt (the run never finished an epoch); resume it with "
            f"cplxnet train --resume {run_dir}"
        )
    vocab, labels = load_vocab_and_labels(run_dir, config)
    state = load_checkpoint(best_path, keys={"model": dict})
    model = build_run_model(config, run_dir, zoo)
    load_weights(model, state["model"], best_path)
    model.eval()
    return LoadedRun(run_dir, config, model, spec, spec.tokenizer, vocab, labels, run_config)


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
            gone="score a file with --data FILE",
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
