"""Helpers of the tests of damaged run folders: a command's one error line, an edit of a run's
JSON file, the bytes of a folder's files."""

from __future__ import annotations

import json
import os

from cplxnet.cli import main


def error_of(capsys, argv, status: int = 1) -> str:
    capsys.readouterr()
    try:
        got = main(argv)
    except SystemExit as exit_:  # a usage error of argparse
        got = exit_.code
    err = capsys.readouterr().err
    assert got == status, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("cplxnet: error: "), err
    return err


def edit_json(path: str, change) -> None:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    change(data)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def snapshot(folder: str) -> dict[str, bytes]:
    """The bytes of each file of ``folder`` (not its subfolders), by name."""
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                out[name] = fh.read()
    return out
