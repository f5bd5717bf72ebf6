"""``cplxnet inspect RUN``: the plots (valid PNG files) and inspect.md of a tiny classifier run
and a tiny language-model run, the measurements behind them, and an output folder that is never
one inspect did not write."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil

import pytest
import test_train_zoo as toy
import torch

from cplxnet.cli import main
from cplxnet.encodings import create_encoding
from cplxnet.inspect import MARKER, _mean_by_distance, attention_by_distance, bias_by_distance
from cplxnet.models import build_model, make_config

PNG = b"\x89PNG\r\n\x1a\n"


def check_png(path):
    from PIL import Image

    with open(path, "rb") as fh:
        assert fh.read(8) == PNG
    with Image.open(path) as im:
        im.verify()
        assert im.size[0] > 100 and im.size[1] > 100


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    text = tmp_path_factory.mktemp("insp") / "text.txt"
    text.write_text("a rose is a rose is a rose\n" * 80, encoding="utf-8")
    run = str(tmp_path_factory.mktemp("insp-lm") / "run")
    assert main(["train", "--task", "lm", "--data", str(text), "--context", "8", "--encoding",
                 "complex-order+alibi", "--d-model", "8", "--steps", "3", "--eval-every", "3",
                 "--batch-size", "4", "--quiet", "--run-dir", run]) == 0  # fmt: skip
    return run


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    data = toy.write_toy_tsv(tmp_path_factory.mktemp("insp-c") / "toy.tsv", n=60)
    run = str(tmp_path_factory.mktemp("insp-cls") / "run")
    assert main(["train", "--data", data, "--model", "transformer", "--encoding",
                 "complex-order+t5", "--d-model", "8", "--set", "num_heads=2", "--set",
                 "dim_feedforward=16", "--max-len", "12", "--epochs", "1", "--quiet",
                 "--run-dir", run]) == 0  # fmt: skip
    return run


@pytest.mark.slow
def test_language_model_run(lm_run, capsys):
    assert main(["inspect", lm_run]) == 0
    out = os.path.join(lm_run, "inspect")
    assert f"wrote {os.path.join(out, 'inspect.md')}" in capsys.readouterr().out
    names = {"complex_order.png", "attention_L.png", "attention_4L.png", "bias_L.png",
             "bias_4L.png"}  # fmt: skip
    assert names | {"inspect.md", MARKER} == set(os.listdir(out))
    for name in names:
        check_png(os.path.join(out, name))
    with open(os.path.join(out, "inspect.md"), encoding="utf-8") as fh:
        md = fh.read()
    assert all(f"({name})" in md for name in names)
    assert "2π/L = 0.7854" in md and "L = 8" in md and "4L = 32" in md
    assert main(["inspect", lm_run]) == 0  # its own folder is rewritten


def test_classifier_run(classifier_run, tmp_path):
    out = str(tmp_path / "figures")
    assert main(["inspect", classifier_run, "--out", out, "--samples", "3"]) == 0
    names = {"complex_order.png", "attention_L.png", "bias_L.png"}
    assert names | {"inspect.md", MARKER} == set(os.listdir(out))
    for name in names:
        check_png(os.path.join(out, name))
    with open(os.path.join(out, "inspect.md"), encoding="utf-8") as fh:
        md = fh.read()
    assert "classifier" in md and all(f"({name})" in md for name in names)
    assert "on 3 random token sequences" in md


def test_a_folder_inspect_did_not_write_is_refused(lm_run, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    assert main(["inspect", lm_run, "--out", str(mine)]) == 1
    err = capsys.readouterr().err
    assert "notes.txt" in err and err.count("\n") == 1
    assert os.listdir(mine) == ["notes.txt"]
    assert main(["inspect", lm_run, "--out", lm_run]) == 1  # the run folder itself
    assert "config.json" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "nothing")]) == 1
    assert "not found" in capsys.readouterr().err


def test_mean_by_distance_is_the_mean_over_each_diagonal():
    v = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    got = _mean_by_distance(v)
    for d in range(-4, 5):
        ref = torch.stack([v[:, :, i, i - d] for i in range(5) if 0 <= i - d < 5], -1)
        assert torch.allclose(got[:, d + 4], ref.mean((0, -1)))


def test_attention_and_bias_measurements():
    config = make_config("decoder", encoding="alibi", d_model=8, num_heads=2, dim_feedforward=16,
                         num_layers=2, vocab_size=9, max_len=8)  # fmt: skip
    model = build_model(config, dtype=torch.float64).eval()
    ids = torch.randint(2, 9, (3, 6))
    curves = attention_by_distance(model, ids)
    assert len(curves) == 2 and curves[0].shape == (2, 11)
    # causal: no weight on keys after the query; each query's weights sum to 1
    assert torch.all(curves[0][:, :5] == 0)
    counts = torch.tensor([6 - d for d in range(6)], dtype=torch.float64)
    total = (curves[1][:, 5:] * counts).sum(1)  # summed over the 6 queries
    assert torch.allclose(total, torch.full((2,), 6.0, dtype=torch.float64))
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    bias = bias_by_distance(model, 6)
    slopes = create_encoding("alibi", d_model=8, num_heads=2, causal=True).slopes.double()
    assert torch.allclose(bias[:, 5:], -slopes[:, None] * torch.arange(6.0))
    assert bias[:, :5].isnan().all()  # keys after the query: removed by the causal mask
    both = bias_by_distance(model, 6, causal=False)  # the bias as computed, on both sides
    assert torch.equal(both[:, 5:], bias[:, 5:]) and not both.isnan().any()
    rotary = build_model(make_config("decoder", encoding="rotary", d_model=8, num_heads=2,
                                     dim_feedforward=16, vocab_size=9, max_len=8))  # fmt: skip
    assert bias_by_distance(rotary, 6) is None


def fsyncs_fail_from(monkeypatch, call: int) -> None:
    """``os.fsync`` fails as on a full disk from its ``call``-th call on (the bytes written so far
    are in the file)."""
    real, count = os.fsync, [0]

    def fsync(fd):
        count[0] += 1
        if count[0] >= call:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def listed(folder) -> set:
    with open(os.path.join(folder, MARKER), encoding="utf-8") as fh:
        return set(json.load(fh))


def full_disk_error(capsys, argv, folder) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("cplxnet: error: no space left on device: writing ") and err.count("\n") == 1
    ), err
    assert f" in {os.path.abspath(folder)} failed" in err and "run cplxnet inspect again" in err
    assert "checkpoint" not in err and "resume" not in err
    return err


# the writes of a classifier's inspect into a new folder: the lock file beside it, the list,
# complex_order.png, the list, attention_L.png, the list, bias_L.png, the list, inspect.md, the
# final list
@pytest.mark.parametrize("call", [3, pytest.param(2, marks=pytest.mark.slow),
                                  pytest.param(10, marks=pytest.mark.slow)])  # fmt: skip
def test_a_full_disk_leaves_no_folder_it_made(classifier_run, tmp_path, capsys, monkeypatch,
                                              call):  # fmt: skip
    out = tmp_path / "figures"
    fsyncs_fail_from(monkeypatch, call)
    full_disk_error(capsys, ["inspect", classifier_run, "--out", str(out)], out)
    assert not out.exists()  # made by the failed inspect: removed, nothing half-written kept
    monkeypatch.undo()
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 0


# into a folder a previous inspect wrote, the names are listed already: the lock file,
# complex_order.png, attention_L.png, bias_L.png, inspect.md, the final list
@pytest.mark.parametrize("call", [3, pytest.param(2, marks=pytest.mark.slow),
                                  pytest.param(6, marks=pytest.mark.slow)])  # fmt: skip
def test_a_full_disk_in_a_folder_inspect_wrote(classifier_run, tmp_path, capsys, monkeypatch,
                                               call):  # fmt: skip
    out = tmp_path / "figures"
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 0
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    fsyncs_fail_from(monkeypatch, call)
    err = full_disk_error(capsys, ["inspect", classifier_run, "--out", str(out)], out)
    monkeypatch.undo()
    names = set(os.listdir(out))
    assert names <= listed(out) | {MARKER}  # every file is one inspect listed: no temporary
    for name in names - {MARKER, "inspect.md"}:
        check_png(os.path.join(out, name))  # whole files only (old or new)
    failed = err.split("writing ")[1].split(" in ")[0]
    if failed != MARKER:
        assert (out / failed).read_bytes() == before[failed]  # the failed file as it was
    assert main(["inspect", classifier_run, "--out", str(out)]) == 0  # space again: it goes on
    assert "on 8 random token sequences" in (out / "inspect.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("exists", [False, True])
def test_a_full_disk_at_the_lock_leaves_no_file_or_folder(classifier_run, tmp_path, capsys,
                                                          monkeypatch, exists):  # fmt: skip
    """The lock file's write failing (the first write of an inspect) is one line; the lock file
    and the folders inspect made (here two levels) are gone, and a folder that was there stays."""
    out = tmp_path / "figures" / "trec"
    if exists:
        assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 0
    before = sorted(os.listdir(out)) if exists else None
    fsyncs_fail_from(monkeypatch, 1)
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 1
    err = capsys.readouterr().err
    what = "taking the lock of" if exists else "creating"
    assert f"no space left on device: {what} {out} failed" in err and err.count("\n") == 1
    if exists:
        assert sorted(os.listdir(out)) == before and os.listdir(out.parent) == ["trec"]
    else:
        assert os.listdir(tmp_path) == []


def test_a_half_written_plot_is_never_left(classifier_run, tmp_path, capsys, monkeypatch):
    """A plot whose write fails part-way (matplotlib's own write) leaves no file behind, in the
    run's own inspect folder (the default) as in --out."""
    import matplotlib.figure

    real, count = matplotlib.figure.Figure.savefig, [0]

    def savefig(fig, fh, *args, **kwargs):
        count[0] += 1
        if count[0] == 2:  # complex_order.png, then attention_L.png
            with contextlib.ExitStack() as stack:
                if isinstance(fh, (str, os.PathLike)):  # a path: matplotlib opens the file
                    fh = stack.enter_context(open(fh, "wb"))
                fh.write(b"\x89PNG half a plot")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fig, fh, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    err = full_disk_error(capsys, ["inspect", str(run)], run / "inspect")
    assert "writing attention_L.png in" in err
    assert not (run / "inspect").exists()
    monkeypatch.undo()
    assert main(["inspect", str(run)]) == 0  # no "files inspect did not write"
    check_png(str(run / "inspect" / "attention_L.png"))


@pytest.mark.parametrize(
    "name", ["../victim/keep.txt", "/tmp/x.png", "sub/a.png", ".hidden.png", "keep.txt", ".."]
)
def test_a_marker_that_names_other_files_is_refused_and_nothing_is_removed(
    classifier_run, tmp_path, capsys, name
):
    """A marker inspect did not write (damaged or hostile) never makes it remove a file: the
    folder is refused in one line, and the files it names stay."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep me", encoding="utf-8")
    out = tmp_path / "o"
    out.mkdir()
    (out / MARKER).write_text(json.dumps([name]), encoding="utf-8")
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 1
    err = capsys.readouterr().err
    assert f"lists {name!r}, a file inspect does not write" in err and err.count("\n") == 1
    assert (victim / "keep.txt").read_text(encoding="utf-8") == "keep me"
    assert sorted(os.listdir(out)) == [MARKER]


def test_attention_in_chunks_equals_one_batch(classifier_run, monkeypatch):
    import cplxnet.inspect as insp

    run = insp._load(classifier_run, 5)
    whole = attention_by_distance(run.model, run.inputs(run.length, 5))
    monkeypatch.setattr(insp, "CHUNK_VALUES", 1)  # one sequence per chunk
    chunked = insp._attention_in_chunks(run, run.length, 5)
    assert len(chunked) == len(whole)
    for a, b in zip(chunked, whole):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)  # float32 weights, other batches


def test_a_chunk_holds_as_many_sequences_as_fit(classifier_run, monkeypatch):
    """CHUNK_VALUES counts the weights of a layer: sequences x heads x n x n."""
    import cplxnet.inspect as insp

    run = insp._load(classifier_run, 5)
    heads = insp._attention_layers(run.model)[0].num_heads
    sizes = []
    real = insp.attention_by_distance

    def record(model, ids):
        sizes.append(ids.shape[0])
        return real(model, ids)

    monkeypatch.setattr(insp, "attention_by_distance", record)
    monkeypatch.setattr(insp, "CHUNK_VALUES", 2 * heads * run.length**2)
    insp._attention_in_chunks(run, run.length, 5)
    assert sizes == [2, 2, 1]


def test_the_most_samples_are_taken(classifier_run, tmp_path, monkeypatch):
    import cplxnet.inspect as insp

    def stop(path, samples):
        raise RuntimeError(f"loading with {samples} samples")

    monkeypatch.setattr(insp, "_load", stop)  # past the check: nothing is run
    with pytest.raises(RuntimeError, match="loading with 1024 samples"):
        insp.inspect_run(classifier_run, str(tmp_path / "o"), samples=insp.MAX_SAMPLES)


def test_too_many_samples_is_one_line(classifier_run, tmp_path, capsys):
    out = tmp_path / "figures"
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "100000"]) == 1
    err = capsys.readouterr().err
    assert "--samples must be 1 to 1,024, got 100,000" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_classifier_is_inspected_at_its_longest_training_text(classifier_run, tmp_path):
    from cplxnet.data.pipeline import load_splits
    from cplxnet.tasks.classify.inference import load_run

    loaded = load_run(classifier_run)
    longest = max(len(loaded.tokenizer(ex.text)) for ex in load_splits(loaded.spec).train)
    assert longest < loaded.max_len  # the model's limit (12) is not the training length
    out = tmp_path / "figures"
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 0
    md = (out / "inspect.md").read_text(encoding="utf-8")
    assert f"training length L = {longest}." in md


def test_a_synthetic_run_is_inspected_on_its_symbols_at_its_longest_input(tmp_path):
    import cplxnet.inspect as insp
    from cplxnet.tasks.lm.synthetic import SyntheticTask

    run = str(tmp_path / "copy")
    assert main(["train", "--task", "lm", "--data", "synthetic:copy", "--context", "4",
                 "--d-model", "8", "--steps", "2", "--eval-every", "2", "--batch-size", "4",
                 "--quiet", "--run-dir", run]) == 0  # fmt: skip
    task = SyntheticTask("copy", 4)
    loaded = insp._load(run, 4)
    assert loaded.length == task.longest_input > 4  # prompt, separator and answer
    ids = loaded.inputs(40, 6)
    assert ids.shape == (6, 40)
    assert ids.min() >= task.first_symbol and ids.max() < task.first_symbol + task.alphabet


def test_a_temporary_file_of_a_killed_inspect_is_cleared(classifier_run, tmp_path):
    out = tmp_path / "figures"
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 0
    (out / ".tmp-k1ll3d00-attention_L.png").write_bytes(b"\x89PNG half")  # killed mid-write
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 0
    assert set(os.listdir(out)) == listed(out) | {MARKER}


def test_bias_by_distance_of_a_model_without_is_causal_keeps_both_sides():
    config = make_config("transformer", encoding="alibi", d_model=8, num_heads=2,
                         dim_feedforward=16, num_layers=1, vocab_size=9, max_len=8)  # fmt: skip
    model = build_model(config)
    bias = bias_by_distance(model, 4)
    assert bias.shape == (2, 7) and not bias.isnan().any()


def test_inspect_owns_its_folder_while_it_writes(classifier_run, tmp_path, capsys):
    """The default RUN/inspect takes the run's own lock: refused while another command holds the
    run (as a training does), with nothing made; --out elsewhere still reads the run. A --out
    folder held by another inspect is refused too. No lock file is left after a run."""
    from cplxnet.engine import runs
    from cplxnet.engine.folder_lock import FolderLock
    from cplxnet.engine.runs import RunError

    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    out = tmp_path / "figures" / "trec"
    out.parent.mkdir()  # where the other inspect's lock file is
    before = sorted(os.listdir(tmp_path))
    with runs.run_lock(str(run)):
        assert main(["inspect", str(run), "--samples", "2"]) == 1
        err = capsys.readouterr().err
        assert f"{run} is in use by another cplxnet process (pid {os.getpid()}" in err
        assert err.rstrip().endswith("write the plots elsewhere with --out")
        assert err.count("\n") == 1 and not (run / "inspect").exists()
        with FolderLock(runs._lock_path(str(out)), str(out), "cplxnet process", "-", RunError):
            assert main(["inspect", str(run), "--out", str(out), "--samples", "2"]) == 1
            err = capsys.readouterr().err
            assert f"{out} is in use by another cplxnet process" in err and err.count("\n") == 1
            assert err.rstrip().endswith("choose another --out") and not out.exists()
        assert sorted(os.listdir(tmp_path)) == sorted([*before, ".run.lock"])
        assert main(["inspect", str(run), "--out", str(out), "--samples", "2"]) == 0
    assert main(["inspect", str(run), "--samples", "2"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["figures", "run"]  # no lock file left
    assert os.listdir(tmp_path / "figures") == ["trec"]


def test_a_training_of_the_run_is_refused_while_inspect_writes_into_it(
    classifier_run, tmp_path, capsys, monkeypatch
):
    """While inspect writes RUN/inspect, `train --resume` of that run is refused; after it, the
    training resumes."""
    import cplxnet.inspect as insp

    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    os.remove(run / "results.json")  # an unfinished run, so --resume has work
    real, codes = insp._inspect, []

    def train_then_inspect(*args):
        codes.append(main(["train", "--resume", str(run), "--quiet"]))
        return real(*args)

    monkeypatch.setattr(insp, "_inspect", train_then_inspect)
    assert main(["inspect", str(run), "--samples", "2"]) == 0
    err = capsys.readouterr().err
    assert codes == [1] and f"{run} is in use by another cplxnet process" in err
    monkeypatch.undo()
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    assert (run / "results.json").exists() and (run / "inspect" / "inspect.md").exists()


def test_a_run_reached_through_a_link_has_the_run_s_lock(classifier_run, tmp_path, capsys):
    """Every spelling of one run folder (a symbolic link, a trailing slash) takes one lock."""
    from cplxnet.engine import runs

    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    link = tmp_path / "link"
    link.symlink_to(run)
    with runs.run_lock(str(run)):
        for spelling in (str(link), str(run) + "/"):
            assert main(["inspect", spelling, "--samples", "2"]) == 1
            assert "is in use by another cplxnet process" in capsys.readouterr().err
    assert not (run / "inspect").exists()


def test_an_inspect_refused_leaves_the_folder_another_made(classifier_run, tmp_path, capsys,
                                                           monkeypatch):  # fmt: skip
    """The output folder is made only under the lock: an inspect refused because another holds
    the folder never removes it, even when the other made it after this one looked."""
    import cplxnet.inspect as insp
    from cplxnet.engine.runs import RunError

    out = tmp_path / "figures" / "trec"

    class Held:
        def __enter__(self):
            out.mkdir()  # the other inspect, which holds the lock, has just made it
            raise RunError(f"{out} is in use by another cplxnet process")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(insp, "_output_lock", lambda run_dir, path: Held())
    assert main(["inspect", classifier_run, "--out", str(out), "--samples", "2"]) == 1
    assert out.is_dir()
