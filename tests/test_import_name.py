"""The zoo is installed and imported as ``cplxnet.models``: a user's own ``models`` module or
package, first on ``sys.path``, neither shadows it nor is shadowed by it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import cplxnet

pytestmark = pytest.mark.slow  # subprocesses that import cplxnet and train

# The folder holding the cplxnet package under test (a checkout or site-packages).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cplxnet.__file__)))


def _user_folder(tmp_path):
    """A folder with the user's own ``models.py`` and ``models/`` package, as in many projects."""
    (tmp_path / "models.py").write_text('raise SystemExit("the user\'s models.py was imported")\n')
    pkg = tmp_path / "models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('WHOSE = "user"\n')
    return tmp_path


def _env():
    path = os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")


def test_train_runs_from_a_folder_holding_a_users_models(tmp_path):
    folder = _user_folder(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "cplxnet", "train", "--data", "trec", "--epochs", "1",
         "--limit", "100", "--model", "fasttext", "--d-model", "8", "--threads", "1",
         "--quiet", "--run-dir", str(folder / "run")],
        cwd=folder, capture_output=True, text=True, env=_env(), timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "user's models" not in p.stdout + p.stderr
    assert (folder / "run" / "results.json").is_file()


def test_zoo_imports_beside_a_users_models_package(tmp_path):
    folder = _user_folder(tmp_path)
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(folder)!r})
        import models
        from cplxnet.models import build_model, make_config
        import cplxnet.models as zoo
        assert models.WHOSE == "user", models
        assert zoo.__name__ == "cplxnet.models" and not hasattr(zoo, "WHOSE")
        model = build_model(make_config("fasttext", vocab_size=10, num_classes=2, d_model=4))
        print(type(model).__name__)
        """
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, env=_env(),
        timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip()
