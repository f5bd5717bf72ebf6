"""Files as users really have them: joined with their headers, saved by Notepad or classic Mac
tools, exported with unquoted commas, GloVe's 840B release. Each is read as meant or refused in
one line naming the file, the line and the fix; none is silently misread."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
import torch

from cplxnet.data import DataError, DataSpec, Vocab, load_dataset, prepare_data, read_examples
from cplxnet.data.io import read_text_lines
from cplxnet.data.vectors import read_word_vectors
from cplxnet.tasks.lm.data import read_corpus


def write(path: Path, content: str | bytes) -> str:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return str(path)


def texts(path: str) -> list[tuple[str, str]]:
    return [(ex.label, ex.text) for ex in read_examples(path)]


# -- records that are refused, not misread -----------------------------------------------------


@pytest.mark.parametrize(
    "name, content, pattern",
    [
        ("commas.csv", "label,text\nneg,was the actor, and is dull\n",
         r"commas\.csv line 2: expected 2 comma-separated fields .*found 3; quote texts"),
        ("mid.tsv", "id\ttext\tlabel\n5\tplot scene\tgreat film\tpos\n",
         r"mid\.tsv line 2: 4 tab-separated fields where the header .* has 3; a tab can be part "
         r"of the text only when the text is the last column"),
        ("label_last.tsv", "text\tlabel\nfine film\tpos\textra\n",
         r"label_last\.tsv line 2: 3 tab-separated fields"),
        ("cat.tsv", "label\ttext\npos\tgood\nlabel\ttext\nneg\tbad\n",
         r"cat\.tsv line 3: the header again .*remove the line"),
        ("cat.csv", "label,text\npos,good\nlabel,text\nneg,bad\n",
         r"cat\.csv line 3: the header again"),
        ("u16.tsv", "label\ttext\npos\tgood\n".encode("utf-16"),
         r"u16\.tsv: the file is UTF-16 text .*iconv -f utf-16 -t utf-8"),
        ("u32.tsv", "label\ttext\npos\tgood\n".encode("utf-32"), r"u32\.tsv: the file is UTF-32"),
        ("u16nobom.tsv", "label\ttext\npos\tgood\n".encode("utf-16-le"),
         r"u16nobom\.tsv line 1: a NUL byte, so the file is binary or UTF-16"),
        ("nul.tsv", b"label\ttext\npos\tgood\nneg\tb\x00d\n", r"nul\.tsv line 3: a NUL byte"),
        ("nulcr.tsv", b"label\ttext\rpos\tgood\rneg\tb\x00d\r", r"nulcr\.tsv line 3: a NUL byte"),
        ("catbom.csv", b"\xef\xbb\xbflabel,text\npos,good\n\xef\xbb\xbflabel,text\nneg,bad\n",
         r"catbom\.csv line 3: the header again"),
        ("catbom.tsv", b"\xef\xbb\xbflabel\ttext\npos\tgood\n\xef\xbb\xbflabel\ttext\n",
         r"catbom\.tsv line 3: the header again"),
        ("bom.tsv", b"\xef\xbb\xbf", r"bom\.tsv: the file is empty"),
        ("bomnl.tsv", b"\xef\xbb\xbf\n\n", r"bomnl\.tsv: the file is empty"),
        ("bigint.jsonl", '{"label": ' + "9" * 5000 + ', "text": "a"}\n',
         r"bigint\.jsonl line 1: a JSON value cplxnet cannot read .*as strings"),
        ("deep.jsonl", '{"label": "a", "text": ' + "[" * 100000 + "]" * 100000 + "}\n",
         r"deep\.jsonl line 1: a JSON value cplxnet cannot read \('nested too deeply'\)"),
        ("header_only.csv", "label,text\n", r"no examples after the header; add lines "
                                             r"'<label>,<text>'"),
        ("bom.jsonl", b"\xef\xbb\xbf\n \n", r"bom\.jsonl: the file is empty"),
    ],
)  # fmt: skip
def test_refused_in_one_line(tmp_path, name, content, pattern):
    with pytest.raises(DataError, match=pattern) as info:
        read_examples(write(tmp_path / name, content))
    assert "\n" not in str(info.value)


def test_legal_forms_still_read(tmp_path):
    # A tab inside a text in the last column is part of the text; so is a comma inside quotes.
    assert texts(write(tmp_path / "a.tsv", "label\ttext\npos\tgood\tfilm\n")) == [
        ("pos", "good\tfilm")
    ]
    assert texts(write(tmp_path / "b.csv", 'label,text\npos,"good, fine"\n')) == [
        ("pos", "good, fine")
    ]
    # A CSV row with fewer fields than the header but both wanted ones is read as before.
    assert texts(write(tmp_path / "c.csv", "label,text,notes\npos,good\n")) == [("pos", "good")]
    # Empty fields past the header's (an export that pads its rows) are padding.
    padded = "label,text\npos,good movie,\nneg,bad movie,,\n"
    assert texts(write(tmp_path / "pad.csv", padded)) == [
        ("pos", "good movie"),
        ("neg", "bad movie"),
    ]
    padded = "text\tlabel\ngood movie\tpos\t\nbad movie\tneg\t \t\n"
    assert texts(write(tmp_path / "pad.tsv", padded)) == [
        ("pos", "good movie"),
        ("neg", "bad movie"),
    ]
    # Classic Mac line ends (CR alone), with and without a BOM, in every reader.
    mac = "label\ttext\rpos\tgood\rneg\tbad\r"
    assert texts(write(tmp_path / "mac.tsv", mac)) == [("pos", "good"), ("neg", "bad")]
    assert texts(write(tmp_path / "mac.csv", mac.replace("\t", ","))) == [
        ("pos", "good"),
        ("neg", "bad"),
    ]
    jl = b'\xef\xbb\xbf{"label": "pos", "text": "a"}\r{"label": "neg", "text": "b"}\r'
    assert texts(write(tmp_path / "mac.jsonl", jl)) == [("pos", "a"), ("neg", "b")]
    assert read_text_lines(write(tmp_path / "mac.txt", "one\rtwo\r")) == [(1, "one"), (2, "two")]
    # A CSV field longer than the csv module's default limit (131,072 characters).
    long = "word " * 40_000
    assert texts(write(tmp_path / "long.csv", f'label,text\npos,"{long}"\n'))[0][1] == long.strip()
    # Paths as pathlib objects.
    path = Path(write(tmp_path / "p.tsv", "label\ttext\npos\tgood\nneg\tbad\n"))
    assert len(read_examples(path)) == len(load_dataset(path).examples) == 2
    assert DataSpec(data=path).data == str(path)


def test_the_csv_field_limit_is_restored(tmp_path):
    import csv

    before = csv.field_size_limit(131_072)  # the module's default, whatever ran before
    try:
        texts(write(tmp_path / "long.csv", f'label,text\npos,"{"w " * 100_000}"\n'))
        assert csv.field_size_limit() == 131_072
    finally:
        csv.field_size_limit(before)


def test_threads_reading_long_csv_fields_at_once(tmp_path):
    """The csv module's field limit is the process's; readers in threads take turns with it
    (without the turns, one thread restores the default limit while another parses)."""
    import csv
    from concurrent.futures import ThreadPoolExecutor

    def body(i: int) -> str:
        return "".join(f'pos,"{"w " * (150_000 + i)}"\n' for _ in range(8))

    paths = [write(tmp_path / f"{i}.csv", "label,text\n" + body(i)) for i in range(4)]
    before = csv.field_size_limit()
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda p: len(texts(p)), paths * 6))
    assert got == [8] * 24
    assert csv.field_size_limit() == before


def test_a_language_model_corpus_in_utf16_is_named(tmp_path):
    with pytest.raises(DataError, match=r"u16\.txt: the file is UTF-16 text"):
        read_corpus(write(tmp_path / "u16.txt", "some text\n".encode("utf-16")))


# -- the vocabulary, the folds ------------------------------------------------------------------


def _toy(tmp_path: Path, texts_: dict[str, list[str]]) -> str:
    lines = [f"{label}\t{t}" for label, ts in texts_.items() for t in ts]
    return write(tmp_path / "toy.tsv", "label\ttext\n" + "\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "options, pattern",
    [({"clean": True}, r"after --clean \(it keeps ASCII letters.*drop or lower the option"),
     ({"min_freq": 1000}, r"after --min-freq 1000, so every text would be <unk>")],
)  # fmt: skip
def test_an_empty_vocabulary_is_refused(tmp_path, options, pattern):
    data = _toy(tmp_path, {"pos": ["хороший фильм"] * 10, "neg": ["плохой фильм"] * 10})
    with pytest.raises(DataError, match=pattern):
        prepare_data(DataSpec(data=data, **options))
    assert len(prepare_data(DataSpec(data=data)).vocab) > 2  # the same file without the option


def test_cross_validation_refuses_a_label_with_one_example(tmp_path):
    data = _toy(tmp_path, {"pos": ["good film"] * 12, "neg": ["bad film"] * 12, "mid": ["ok"]})
    with pytest.raises(DataError, match=r"the label\(s\) 'mid' have a single example.*at least 2"):
        prepare_data(DataSpec(data=data, fold=0))
    data = _toy(tmp_path, {"pos": ["good film"] * 12, "neg": ["bad film"] * 12, "mid": ["ok"] * 2})
    assert len(prepare_data(DataSpec(data=data, fold=0)).labels) == 3


def test_a_limit_that_drops_a_training_label_says_so(tmp_path):
    """``--limit`` samples each split in its labels' proportions: a rare label can vanish from
    training (the classifier never predicts it); the data's summary, logged at the start of a
    run and kept in its config, names the label."""
    data = _toy(tmp_path, {"pos": [f"good film {i}" for i in range(80)],
                           "neg": [f"bad film {i}" for i in range(80)],
                           "mid": [f"ok film {i}" for i in range(4)]})  # fmt: skip
    prepared = prepare_data(DataSpec(data=data, limit=5))
    assert len(prepared.labels) == 2
    assert prepared.summary().endswith(", 2 labels") and (
        "at most 5 per split; no training example of 'mid' is left (the model will not predict "
        "it; a larger limit keeps it)); vocabulary " in prepared.summary()
    ), prepared.summary()
    prepared = prepare_data(DataSpec(data=data, limit=60))
    assert len(prepared.labels) == 3 and "no training example" not in prepared.summary()


@pytest.mark.parametrize("name", ["dev", "test"])
def test_a_dev_or_test_file_that_is_the_data_file_is_refused(tmp_path, monkeypatch, name):
    data = _toy(tmp_path, {"pos": ["good film"] * 10, "neg": ["bad film"] * 10})
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link.tsv"
    link.symlink_to(data)
    for same in (data, "./" + Path(data).name, str(link)):  # one file, three spellings
        with pytest.raises(
            DataError,
            match=rf"--{name} {os.path.abspath(same)} is the --data file, so its examples "
            rf"would also be trained on; give a held-out {name} file",
        ):
            prepare_data(DataSpec(data=data, **{name: same}))
    (tmp_path / "mr").write_bytes(Path(data).read_bytes())  # a file named as bundled MR
    with pytest.raises(DataError, match="cannot tell the format"):  # read, not "is the --data"
        prepare_data(DataSpec(data="mr", **{name: "mr"}))
    (tmp_path / "held").mkdir()
    other = _toy(tmp_path / "held", {"pos": ["good"] * 3, "neg": ["bad"] * 3})
    assert len(prepare_data(DataSpec(data=data, **{name: other})).train) > 0


@pytest.mark.parametrize(
    "field, value, pattern",
    [("max_len", 2.5, r"data\.max_len is 2\.5, not an integer or null"),
     ("min_freq", "2", r"data\.min_freq is '2', not an integer"),
     ("data", None, r"data\.data is None, not a string"),
     ("lowercase", 1, r"data\.lowercase is 1, not true or false"),
     ("split_seed", -1, r"split_seed must be 0 or more")],
)  # fmt: skip
def test_a_data_spec_of_wrong_types_is_refused(field, value, pattern):
    with pytest.raises(DataError, match=pattern):
        DataSpec(**{field: value})


def test_a_data_spec_takes_numpy_integers_as_ints():
    import numpy as np

    spec = DataSpec(data="mr", fold=np.int64(3), split_seed=np.int32(2))
    assert spec.fold == 3 and type(spec.fold) is int and type(spec.split_seed) is int


# -- word vectors -------------------------------------------------------------------------------

VOCAB = Vocab.build([["good", "film"]])


def rows(wv, vocab: Vocab, *words: str) -> list[list[float]]:
    return [wv.vectors[vocab.stoi[w]].tolist() for w in words]


def test_glove_840b_words_holding_spaces(tmp_path):
    glove = write(tmp_path / "g.txt", "good 1 2\n. . . 3 4\nfilm 5 6\n")
    vocab = Vocab.build([["good", "film"]])
    wv = read_word_vectors(glove, vocab)
    assert wv.num_found == 2 and rows(wv, vocab, "good", "film") == [[1, 2], [5, 6]]
    # A line with one number too many is still an error, not a word "film 5".
    bad = write(tmp_path / "bad.txt", "good 1 2\nfilm 5 6 7\n")
    with pytest.raises(DataError, match=r"bad\.txt line 2: 3 numbers where the file's vectors"):
        read_word_vectors(bad, VOCAB)


def test_vectors_with_a_bom_or_tabs(tmp_path):
    vocab = Vocab.build([["good", "film"]])
    bom = write(tmp_path / "b.txt", b"\xef\xbb\xbf2 2\ngood 1 2\nfilm 3 4\n")
    wv = read_word_vectors(bom, vocab)
    assert wv.dim == 2 and wv.num_found == 2
    wv = read_word_vectors(write(tmp_path / "t.txt", "good\t1\t2\nfilm\t3\t4\n"), vocab)
    assert wv.dim == 2 and rows(wv, vocab, "good", "film") == [[1, 2], [3, 4]]


def test_vector_values_beyond_the_dtype(tmp_path):
    path = write(tmp_path / "big.txt", "good 1e300 2\n")
    with pytest.raises(DataError, match=r"big\.txt line 1: .*beyond 3\.403e\+38, the largest "
                                        r"torch\.float32 number"):  # fmt: skip
        read_word_vectors(path, VOCAB)
    wv = read_word_vectors(path, VOCAB, dtype=torch.float64)
    assert wv.vectors[VOCAB.stoi["good"]].tolist() == [1e300, 2]


def _damaged_gzip(content: bytes) -> bytes:
    """``content`` gzipped with the first block's code lengths flipped (a ``zlib.error``)."""
    whole = gzip.compress(content)
    return whole[:12] + bytes(b ^ 0xFF for b in whole[12:76]) + whole[76:]


def test_a_damaged_gzip_data_file(tmp_path):
    lines = b"label\ttext\n" + b"".join(b"pos\tgood film %d\n" % i for i in range(3000))
    path = write(tmp_path / "bad.tsv.gz", _damaged_gzip(lines))
    with pytest.raises(DataError, match=r"bad\.tsv\.gz: cannot read the file \(Error -3"):
        read_examples(path)


def test_a_damaged_gzip_vector_file(tmp_path):
    content = b"".join(b"w%d %d 2\n" % (i, i) for i in range(5000))
    whole = gzip.compress(content)
    cut = write(tmp_path / "cut.txt.gz", whole[: len(whole) // 2])
    plain = write(tmp_path / "plain.txt.gz", "good 1 2\n")
    bad = write(tmp_path / "bad.txt.gz", _damaged_gzip(content))
    stored = bytearray(gzip.compress(content, compresslevel=0))  # inflates to garbage: CRC last
    stored[stored.index(b"w2500 2500") + 5] = ord("x")  # "w2500x2500 2": one number, not 2
    garbled = write(tmp_path / "garbled.txt.gz", bytes(stored))
    sound = write(tmp_path / "sound.txt.gz", gzip.compress(b"good 1 2\nfilm 1\n"))
    with pytest.raises(DataError, match=r"sound\.txt\.gz line 2: 1 numbers where"):  # not damage
        read_word_vectors(sound, VOCAB)
    for path in (cut, plain, bad, garbled):
        with pytest.raises(DataError, match=r"\.txt\.gz: cannot read the word-vector file after "
                                            r"line \d+ \(.*\); give a complete file"):  # fmt: skip
            read_word_vectors(path, VOCAB)


def test_a_vectors_path_that_is_no_file_is_named(tmp_path, monkeypatch):
    """A broken or looping symbolic link and a pipe are each named as what they are."""
    broken, loop, fifo = tmp_path / "broken.txt", tmp_path / "loop.txt", tmp_path / "fifo.txt"
    broken.symlink_to(tmp_path / "gone.txt")
    loop.symlink_to(loop)
    os.mkfifo(fifo)
    for link in (broken, loop):
        with pytest.raises(DataError, match=rf"{link}: a symbolic link to nothing \(broken, or a "
                           r"loop\); check the --vectors path"):  # fmt: skip
            read_word_vectors(str(link), VOCAB)
        with pytest.raises(DataError, match=rf"{link}: a symbolic link to nothing"):
            read_examples(str(link))
    monkeypatch.chdir(tmp_path)  # a bare name that is a link to nothing: not "unknown dataset"
    (tmp_path / "bare").symlink_to(tmp_path / "gone")
    with pytest.raises(DataError, match=r"^bare: a symbolic link to nothing"):
        load_dataset("bare")
    with pytest.raises(DataError, match=rf"{fifo}: not a regular file \(a pipe, socket or device\)"
                       r"; give --vectors a word-vector text file"):  # fmt: skip
        read_word_vectors(str(fifo), VOCAB)
    with pytest.raises(DataError, match=rf"{tmp_path / 'none.txt'}: file not found; check the "):
        read_word_vectors(str(tmp_path / "none.txt"), VOCAB)
