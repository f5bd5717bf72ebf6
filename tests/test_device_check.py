"""The CPU path of ``benchmarks/device_check.py``: ``--device cpu --quick`` in a subprocess writes
a markdown report with the tests' result, layer and model rows and the list of skipped checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a subprocess running benchmarks/device_check.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_device_check_cpu_quick_writes_the_report(tmp_path):
    out = tmp_path / "DEVICE_CHECK.md"
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "device_check.py"), "--device", "cpu"]
    proc = subprocess.run(
        [*cmd, "--quick", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert text.startswith("# Device check: cpu")
    # the device-parametrised tests ran on the CPU and passed
    row = r"^\| `tests/test_no_host_sync.py .*--device cpu.*\| (.*) \| \d+ \|$"
    tests = re.search(row, text, re.M)
    assert tests, text
    assert re.match(r"\d+ passed", tests.group(1)) and "(ok)" in tests.group(1), tests.group(1)
    assert "failed" not in tests.group(1)
    # layer rows: complex layer against its equal-FLOP real twin, a ratio and two times
    num = r"[\d.]+"
    linear = rf"^\| Linear \| 16 \| real nn.Linear\(2d, 2d\) \| {num}x \| {num} \| {num} \|$"
    assert re.search(linear, text, re.M), text
    # model rows: every paper classifier against its real twin, the decoder's tokens per second
    for family in ("FastText", "CNN", "LSTM", "Transformer"):
        twin = rf"^\| {family} forward \+ backward \| real twin x2 width \| {num} \| {num}x \|"
        assert re.search(twin, text, re.M), family
    decoder = rf"^\| Decoder L=16, 4 layers, train step \| cplxnet \| {num} \| 1.00x \| (\d+) \|"
    decoder = re.search(decoder, text, re.M)
    assert decoder and int(decoder.group(1)) > 0, text
    # what could not be checked on the CPU is said plainly
    skipped = text.split("## Skipped", 1)[1]
    assert "peak memory and CUDA-event timing: no CUDA device" in skipped
    assert "use_compiled_kernels() variant" in skipped
