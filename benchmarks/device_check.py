"""One command to check cplxnet on an accelerator: the device-parametrised tests, then the
layer and model benchmarks on that device, written as one markdown report.

    python benchmarks/device_check.py                          # first CUDA device, < 8 min
    python benchmarks/device_check.py --out benchmarks/DEVICE_CHECK.md
    python benchmarks/device_check.py --device cpu --quick     # the CPU path on tiny sizes

What runs:

1. **Tests** (a pytest subprocess with ``--device``): the host-sync test
   (``tests/test_no_host_sync.py``: no host read in any zoo model or module of the table), the
   placement test (``tests/test_device_placement.py``, on meta), the module table's factory /
   output test and the zoo's every-encoding test on the device. Counts, failures and skip
   reasons go into the report.
2. **Layers** (``benchmarks/layers.py``'s rows timed by ``benchmarks/harness.py``, with the
   device as torch's default device): forward + backward of each complex layer against its
   equal-FLOP real twin (and complextorch where the row has it), median of per-round ratios over
   interleaved rounds, timed with CUDA events between synchronisations.
3. **Models** (``benchmarks/models.py``'s configurations): forward + backward of each paper
   classifier on one MR batch against its real twin x2 width, and the causal decoder's
   training step (``decoder_rows``: d 128 complex, 4 layers, 8 x 256 tokens) against its real
   twin and the complextorch-built decoder: ratio, tokens per second and peak memory
   (``torch.cuda.max_memory_allocated`` of one step of each variant).

The tests get ``--tests-timeout`` (default 210 s) and the rows run in a fixed order until
``--budget`` (default 210 s) is spent, so that the whole check stays under 8 minutes; every row
not run, and every measurement not available on the device, is listed under "Skipped" with the
reason. The compiled-kernel rows are skipped on an accelerator (their
inductor/triton warm-up alone can exceed the budget; run ``layers.py --only ... compiled``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

import torch  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
sys.path.insert(0, ROOT)

_spec = importlib.util.spec_from_file_location("bench_models", os.path.join(_HERE, "models.py"))
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_models"] = bench
_spec.loader.exec_module(bench)
import harness  # noqa: E402  (on the path models.py puts it on)
import layers  # noqa: E402

import cplxnet  # noqa: E402
import cplxnet.models as zoo  # noqa: E402
from cplxnet.data import collate  # noqa: E402

TESTS = [
    "tests/test_no_host_sync.py",
    "tests/test_device_placement.py",
    "tests/nn/test_module_common.py::test_factory_kwargs_and_output_dtype",
    "tests/models/test_zoo_encodings.py",
]
QUICK_TESTS = "allows_host_data or Linear_nobias or fasttext-none-complex"  # -k of --quick
QUICK_LAYERS = ("Linear", "LayerNorm split", "ModReLU", "SDPA kernel + key padding")


def run_tests(device: str, quick: bool, timeout: float) -> tuple[list[str], list[str]]:
    """Report lines and skip reasons of the device-parametrised tests."""
    cmd = [sys.executable, "-m", "pytest", *TESTS, "--device", device, "-rsf"]
    cmd += ["-p", "no:cacheprovider", *(["-k", QUICK_TESTS] if quick else [])]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as err:
        out, code = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else "", None
    took = time.perf_counter() - t0
    counts = dict(
        (kind, int(n))
        for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", out)
    )
    summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no summary"
    status = "timed out" if code is None else ("ok" if code == 0 else f"exit code {code}")
    lines = [
        "| tests | result | seconds |",
        "|---|---|---:|",
        f"| `{' '.join(TESTS)}` --device {device}{' -k ' + repr(QUICK_TESTS) if quick else ''} "
        f"| {summary} ({status}) | {took:.0f} |",
    ]
    failed = re.findall(r"^FAILED (\S+)", out, flags=re.M)
    if failed:
        lines += ["", "Failed:", *(f"- `{f}`" for f in failed)]
    skipped = [
        f"test {m.group(2)} ({m.group(1)} test(s)): {m.group(3)}"
        for m in re.finditer(r"^SKIPPED \[(\d+)\] (\S+?):\d+: (.*)$", out, flags=re.M)
    ]
    if code is None:
        skipped.append(f"the tests did not finish within {timeout:.0f} s")
    return lines, skipped


class Budget:
    """Seconds left for the benchmark rows; a row is run only if time is left."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds
        self.seconds = seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


def _run_row(name, build, cfg, budget, skipped, dims=None, column="d") -> list[str]:
    if budget.left() <= 0:
        skipped.append(f"{name}: time budget of {budget.seconds:.0f} s spent")
        return []
    try:
        return harness.run_rows({name: build}, cfg, dims=dims, column=column, log=lambda s: None)[
            2:
        ]
    except Exception as err:  # noqa: BLE001 - a row that cannot run on the device is reported
        skipped.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0][:160]}")
        return []


def layer_rows(device, quick, budget, skipped) -> list[str]:
    cfg = harness.Config(rounds=10, warmup=3, min_time=0.02, rnn_complextorch=False)
    if quick:
        cfg = harness.Config(
            batch=2, seq=8, dims=(16,), rounds=3, warmup=1, min_time=0.0, rnn_seq=8,
            rnn_complextorch=False,
        )  # fmt: skip
    out = [
        f"Forward + backward, batch {cfg.batch}, sequence {cfg.seq}, {cfg.dtype}, median of "
        f"{cfg.rounds} interleaved rounds (`benchmarks/layers.py` rows).",
        "",
        "| layer | d | baseline | ours / baseline | ours ms | baseline ms |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, build in layers.ROWS.items():
        if quick and name not in QUICK_LAYERS:
            continue
        if "compiled" in name and device.type != "cpu":
            skipped.append(f"{name}: compiled kernels (inductor warm-up) not in the budget")
            continue
        with device:
            out += _run_row(name, build, cfg, budget, skipped)
    if not quick:
        skipped.append("layers: complextorch's Python-loop LSTM baseline (rnn_complextorch=False)")
    return out


def _peak_mb(device: torch.device, step) -> str:
    if device.type != "cuda":
        return "n/a"
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return f"{torch.cuda.max_memory_allocated() / 2**20:.0f}"


def _on(device: torch.device, step):
    """``step`` (a models.py DecoderStep or a harness.fwd_bwd step of a model) moved to
    ``device``; modules keep their parameters' identity, so the optimisers stay valid."""
    if isinstance(step, bench.DecoderStep):
        step.model.to(device)
        step.ids = step.ids.to(device)
    return step


def model_rows(device, quick, budget, skipped) -> list[str]:
    cfg = harness.Config(rounds=3 if quick else 10, warmup=1 if quick else 3, min_time=0.0)
    peak = "torch.cuda.max_memory_allocated" if device.type == "cuda" else "n/a on this device"
    out = [
        f"Forward + backward of the paper classifiers on one batch of {cfg.batch} MR sentences, "
        "and the causal decoder's training step; median of "
        f"{cfg.rounds} interleaved rounds; peak memory of one step in MiB ({peak}).",
        "",
        "| model | variant | ms | ours / variant | tokens/s | peak MiB |",
        "|---|---|---:|---:|---:|---:|",
    ]
    data = bench.load_bench(cfg, 1, quick)
    ids, mask = collate([data.data.train.ids[i] for i in data.batches[0]])
    ids, mask = ids.to(device), mask.to(device)
    cases = {}
    for family in bench.FAMILY_PRESETS:
        c = bench.model_config(data, family)

        def build(_, __, c=c):
            torch.manual_seed(0)
            ours = zoo.build_model(c, device=device).train()
            twin = zoo.build_model(zoo.real_twin(c), device=device).train()
            steps = {"real twin x2 width": harness.fwd_bwd(twin, ids, mask)}
            return harness.Case(harness.fwd_bwd(ours, ids, mask), steps)

        cases[f"{family} forward + backward"] = (build, ids.numel())
    for name, build in bench.decoder_rows(quick).items():

        def build_decoder(d, cfg, build=build):
            case = build(d, cfg)
            del case.baselines["ours with use_compiled_kernels()"]  # inductor warm-up
            case.ours = _on(device, case.ours)
            case.baselines = {k: _on(device, v) for k, v in case.baselines.items()}
            return case

        tokens = (2 * 16) if quick else (8 * 256)
        cases[name] = (build_decoder, tokens)
        skipped.append(f"{name}: the use_compiled_kernels() variant (inductor warm-up)")
    for name, (build, tokens) in cases.items():
        if budget.left() <= 0:
            skipped.append(f"{name}: time budget of {budget.seconds:.0f} s spent")
            continue
        try:
            case = build(8 if quick else 128, cfg)  # built on the CPU, then moved (decoder)
            with device:  # the device as torch's default: CUDA-event timing in harness._time
                rows = harness.measure(case, cfg)
                peaks = {"cplxnet": _peak_mb(device, case.ours)}
                peaks.update({k: _peak_mb(device, s) for k, s in case.baselines.items()})
        except Exception as err:  # noqa: BLE001 - reported, the other rows still run
            skipped.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0][:160]}")
            continue
        t_ours = rows[0][2] if rows else float("nan")
        out.append(
            f"| {name} | cplxnet | {t_ours:.2f} | 1.00x | {tokens / t_ours * 1e3:.0f} | "
            f"{peaks['cplxnet']} |"
        )
        for base, ratio, _, t_base in rows:
            out.append(
                f"| {name} | {base} | {t_base:.2f} | {ratio:.2f}x | "
                f"{tokens / t_base * 1e3:.0f} | {peaks[base]} |"
            )
    out += ["", "tokens/s: ids per forward (+ backward) divided by its time."]
    return out


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = "cuda" if torch.cuda.is_available() else "cpu"
    p.add_argument("--device", default=default, help=f"device to check (default: {default})")
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few tests and rows")
    p.add_argument("--budget", type=float, default=210.0, help="seconds for the benchmark rows")
    p.add_argument("--tests-timeout", type=float, default=210.0, help="seconds for the tests")
    p.add_argument("--no-tests", action="store_true", help="benchmarks only")
    p.add_argument("--out", help="write the report to this markdown file")
    p.add_argument("--no-reexec", action="store_true", help="do not re-exec with malloc settings")
    a = p.parse_args(argv)
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: CUDA is not available on this machine; use --device cpu")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, 1 thread"
    skipped: list[str] = []
    if device.type != "cuda":
        skipped.append(
            "peak memory and CUDA-event timing: no CUDA device (CPU times with perf_counter)"
        )
    lines = [
        f"# Device check: {device} ({name})",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch {torch.__version__}, "
        f"cplxnet {cplxnet.__version__}{', quick (tiny sizes)' if a.quick else ''}; "
        f"load average before: {harness.loadavg()}.",
        "",
        "## Device-parametrised tests",
        "",
    ]
    if a.no_tests:
        skipped.append("tests: --no-tests")
    else:
        test_lines, test_skips = run_tests(a.device, a.quick, a.tests_timeout)
        lines += test_lines
        skipped += test_skips
    budget = Budget(a.budget)
    lines += ["", "## Layers: complex vs equal-FLOP real", ""]
    lines += layer_rows(device, a.quick, budget, skipped)
    lines += ["", "## Models: complex vs real twin, decoder tokens per second", ""]
    lines += model_rows(device, a.quick, budget, skipped)
    lines += ["", "## Skipped", "", *(f"- {s}" for s in skipped or ["nothing"]), ""]
    lines.append(
        f"Total {time.perf_counter() - t0:.0f} s; load average after: {harness.loadavg()}."
    )
    report = "\n".join(lines) + "\n"
    print(report)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(report)
    return report


if __name__ == "__main__":
    main()
