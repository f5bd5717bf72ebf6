"""From a data specification to encoded train/dev/test splits (what the trainer consumes).

A :class:`DataSpec` is plain data (it goes into a run's ``config.json``), so evaluating a finished
run rebuilds exactly its splits from the same files and seed.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import asdict, dataclass, fields

from .batching import EncodedSplit, encode_split
from .io import BUNDLED, DataError, load_dataset, read_examples, short_repr
from .splits import Splits, split_dataset, stratified_holdout
from .text import LabelMap, Tokenizer, Vocab

__all__ = ["DataSpec", "PreparedData", "prepare_data"]


@dataclass
class DataSpec:
    """Where the data comes from and how it is split, tokenized and cut.

    Attributes:
        data: a bundled name (``"mr"``, ``"trec"``) or a labelled file (TSV/CSV/JSONL).
        dev, test: optional separate files for the dev and test splits.
        format: ``"tsv"``, ``"csv"`` or ``"jsonl"`` (default: from the extension).
        label_field, text_field: the column (or JSON key) names.
        split: ``"quick"`` (one seeded split) or ``"cv"`` (cross-validation; needs ``fold``).
        fold, num_folds: the cross-validation test fold ``0..num_folds-1``.
        split_seed: the split seed (independent of the training seed).
        lowercase, clean: tokenizer options (:class:`~cplxnet.data.text.Tokenizer`).
        min_freq, max_size: vocabulary options (training split only).
        max_len: truncate texts to this many tokens (``None``: no truncation; a model with a
            bounded number of positions then rejects longer texts).
        limit: keep at most this many examples per split (a seeded stratified sample), for quick
            smoke runs.
    """

    data: str = "mr"
    dev: str | None = None
    test: str | None = None
    format: str | None = None
    label_field: str = "label"
    text_field: str = "text"
    split: str = "quick"
    fold: int | None = None
    num_folds: int = 10
    split_seed: int = 0
    lowercase: bool = True
    clean: bool = False
    min_freq: int = 1
    max_size: int | None = None
    max_len: int | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        for name in ("data", "dev", "test"):
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        _check_types(self)
        # Store user files as absolute paths so a run can be evaluated from another directory.
        if self.data not in BUNDLED and os.path.exists(self.data):
            self.data = os.path.abspath(self.data)
        for name in ("dev", "test"):
            path = getattr(self, name)
            if path is not None and os.path.exists(path):
                setattr(self, name, os.path.abspath(path))
        if self.max_len is not None and self.max_len < 1:
            raise DataError(f"max_len must be a positive number of tokens, got {self.max_len}")
        if self.limit is not None and self.limit < 2:
            raise DataError(f"limit must be at least 2 examples, got {self.limit}")
        if self.max_size is not None and self.max_size < 3:
            raise DataError(
                f"a vocabulary of {self.max_size} entries has no room for a word (<pad> and <unk> "
                "take two); pass --max-vocab 3 or more"
            )
        if self.min_freq < 1:
            raise DataError(f"min_freq must be at least 1, got {self.min_freq}")
        if self.split_seed < 0:
            raise DataError(f"split_seed must be 0 or more, got {self.split_seed}")
        if self.label_field == self.text_field:
            raise DataError(
                f"the label and the text are both the field {self.label_field!r}; give "
                "--label-field and --text-field two different columns"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DataSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def tokenizer(self) -> Tokenizer:
        return Tokenizer(lowercase=self.lowercase, clean=self.clean)


_KINDS = {"str": "a string", "int": "an integer", "bool": "true or false"}


def _check_types(spec: DataSpec) -> None:
    """A :class:`DataError` naming the first field whose value is not of the field's type (a
    hand-edited ``config.json``, a number given as a string); an integer of another type (NumPy)
    is stored as an ``int``."""
    for f in fields(spec):
        value, kinds = getattr(spec, f.name), str(f.type).split(" | ")
        if value is None and "None" in kinds:
            continue
        kind = kinds[0]
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            if ok:
                setattr(spec, f.name, int(value))  # a NumPy integer is stored as an int
        else:
            ok = isinstance(value, str)
        if not ok:
            none = " or null" if "None" in kinds else ""
            raise DataError(f"data.{f.name} is {short_repr(value)}, not {_KINDS[kind]}{none}")


@dataclass
class PreparedData:
    """Everything the trainer needs: the spec, tokenizer, vocabulary, labels and encoded splits."""

    spec: DataSpec
    tokenizer: Tokenizer
    vocab: Vocab
    labels: LabelMap
    splits: Splits
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit

    def max_length(self) -> int:
        return max(max(map(len, s.ids), default=0) for s in (self.train, self.dev, self.test))

    def summary(self) -> str:
        s = self.splits.sizes()
        return (
            f"{self.spec.data}: train {s['train']}, dev {s['dev']}, test {s['test']} "
            f"({self.splits.description}); vocabulary {len(self.vocab)}, "
            f"{len(self.labels)} labels"
        )


def _same_file(a: str, b: str) -> bool:
    """Whether the paths ``a`` and ``b`` name one existing file."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def load_splits(spec: DataSpec) -> Splits:
    """Read the files of ``spec`` and split them (no tokenization)."""
    file_options = {
        "--format": spec.format is not None,
        "--label-field": spec.label_field != "label",
        "--text-field": spec.text_field != "text",
    }
    given = [name for name, set_ in file_options.items() if set_]
    if spec.data in BUNDLED and spec.dev is None and spec.test is None and given:
        raise DataError(
            f"{', '.join(given)} describe(s) data files, but {spec.data!r} is bundled data with "
            "its own format; drop the option(s) or give --data FILE"
        )
    for name, path in (("dev", spec.dev), ("test", spec.test)):
        if path is not None and spec.data not in BUNDLED and _same_file(spec.data, path):
            raise DataError(
                f"--{name} {path} is the --data file, so its examples would also be trained on; "
                f"give a held-out {name} file, or drop --{name} (a part of --data is then held out)"
            )
    ds = load_dataset(spec.data, spec.label_field, spec.text_field, spec.format)
    extra = {
        name: read_examples(path, spec.label_field, spec.text_field, spec.format)
        for name, path in (("dev", spec.dev), ("test", spec.test))
        if path is not None
    }
    splits = split_dataset(
        ds,
        split=spec.split,
        fold=spec.fold,
        num_folds=spec.num_folds,
        seed=spec.split_seed,
        dev=extra.get("dev"),
        test=extra.get("test"),
    )
    if spec.limit is not None:
        labels = {ex.label for ex in splits.train}
        for i, name in enumerate(("train", "dev", "test")):
            part = getattr(splits, name)
            if len(part) > spec.limit:
                seed = [spec.split_seed, 9, i]
                sample = stratified_holdout(part, spec.limit, seed, keep_each_label=False)[1]
                setattr(splits, name, sample)
        splits.description += f", at most {spec.limit} per split"
        gone = sorted(labels - {ex.label for ex in splits.train})
        if gone:  # the limit samples in the labels' proportions: a rare label can vanish
            splits.description += (
                f"; no training example of {', '.join(map(repr, gone))} is left (the model will "
                "not predict it; a larger limit keeps it)"
            )
    empty = [name for name, n in splits.sizes().items() if n == 0]
    if empty:
        sizes = ", ".join(f"{n} {name}" for name, n in splits.sizes().items())
        given = {"dev": spec.dev, "test": spec.test}
        fix = " / ".join(f"--{name} FILE" for name in empty if name != "train")
        raise DataError(
            f"{spec.data}: the {' and '.join(empty)} split{'s are' if len(empty) > 1 else ' is'} "
            f"empty ({sizes}; each label needs at least 3 examples to be split 80/10/10); add "
            f"examples{', or give ' + fix if fix and not any(given.values()) else ''}"
        )
    return splits


def prepare_data(
    spec: DataSpec,
    *,
    vocab: Vocab | None = None,
    labels: LabelMap | None = None,
    model_max_len: int | None = None,
) -> PreparedData:
    """Load, split, build the vocabulary and label map from train (unless given), and encode.

    ``model_max_len`` is the number of positions a model supports (``None``: unbounded); a longer
    text is an error naming it unless ``spec.max_len`` asks for truncation.
    """
    splits = load_splits(spec)
    tokenizer = spec.tokenizer
    if vocab is None:
        vocab = Vocab.build(
            (tokenizer(ex.text) for ex in splits.train),
            min_freq=spec.min_freq,
            max_size=spec.max_size,
        )
        if len(vocab) <= 2:  # <pad> and <unk> alone: every text would be <unk>
            causes = []
            if spec.min_freq > 1:
                causes.append(f"--min-freq {spec.min_freq}")
            if spec.clean:
                causes.append("--clean (it keeps ASCII letters, digits and a few punctuation)")
            raise DataError(
                f"{spec.data}: no word of the training split is left for the vocabulary"
                f"{' after ' + ' and '.join(causes) if causes else ''}, so every text would be "
                f"<unk>; {'drop or lower the option(s)' if causes else 'give texts with words'}"
            )
    if labels is None:
        labels = LabelMap.build(splits.train)
    max_len = spec.max_len if spec.max_len is not None else model_max_len
    encoded = {
        name: encode_split(
            getattr(splits, name),
            tokenizer,
            vocab,
            labels,
            max_len=max_len,
            truncate=spec.max_len is not None,
        )
        for name in ("train", "dev", "test")
    }
    return PreparedData(spec, tokenizer, vocab, labels, splits, **encoded)
