"""Tokens per second of sampling from a decoder with the key/value cache against recomputing the
window at every step (:func:`cplxnet.tasks.lm.generate`, ``cache=True`` / ``cache=False``).

    python benchmarks/generate.py                       # prints the markdown table
    python benchmarks/generate.py --out benchmarks/GENERATE.md
    python benchmarks/generate.py --quick               # 64 tokens, 2 rounds: every row runs

Method: one thread, glibc malloc thresholds raised (the script re-executes itself with them),
randomly initialised decoders (the cost does not depend on the weights) with a 16-token prompt
and 512 generated tokens (sampling at temperature 1, seed 0: both variants produce the same
tokens), ``context`` = prompt + new tokens so the whole text stays in the window (past the
window the cache is not used). Each variant is warmed up on 64 tokens (the same tokens with and
without the cache), then rounds in which both run once, in alternating order; reported: the
median over rounds of the per-round ratio of times and the median tokens per second.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

import torch  # noqa: E402

from cplxnet.lm import generate  # noqa: E402
from cplxnet.models import build_model, make_config, real_twin  # noqa: E402

PROMPT = 16
LM_CHAR = {"d_model": 64, "num_layers": 2, "num_heads": 4, "dim_feedforward": 256}
STUDY = {"d_model": 128, "num_layers": 4, "num_heads": 4, "dim_feedforward": 512}
#: (size label, decoder fields, encoding, complex): lm-char (d 64 complex, 2 layers) and the
#: study's decoder size of benchmarks/models.py (d 128 complex, 4 layers)
ROWS = [
    ("lm-char", LM_CHAR, "rotary", True),
    ("lm-char", LM_CHAR, "rotary", False),
    ("d 128, 4 layers", STUDY, "rotary", True),
    ("d 128, 4 layers", STUDY, "rotary", False),
]


def model(encoding: str, fields: dict, complex_: bool, max_len: int) -> torch.nn.Module:
    cfg = make_config("decoder", encoding=encoding, vocab_size=96, max_len=max_len, **fields)
    torch.manual_seed(0)
    return build_model(cfg if complex_ else real_twin(cfg)).eval()


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(m: torch.nn.Module, new: int, rounds: int) -> tuple[float, float, float]:
    """(median cached tokens/s, median recomputed tokens/s, median per-round ratio)."""
    prompt = torch.randint(2, 96, (PROMPT,), generator=torch.Generator().manual_seed(0))
    ctx = PROMPT + new
    run = {c: (lambda c=c: generate(m, prompt, new, context=ctx, cache=c)) for c in (True, False)}
    warm = [generate(m, prompt, 64, context=ctx, cache=c) for c in (True, False)]
    assert torch.equal(*warm)  # warm-up, and the same tokens
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for c in (True, False) if r % 2 == 0 else (False, True):
            times[c].append(timed(run[c]))
    ratio = statistics.median(u / c for c, u in zip(times[True], times[False]))
    return new / statistics.median(times[True]), new / statistics.median(times[False]), ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the markdown here")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    new, rounds = (64, 2) if args.quick else (512, 3)
    rows = []
    for label, fields, encoding, complex_ in ROWS:
        m = model(encoding, fields, complex_, PROMPT + new)
        cached, recomputed, ratio = measure(m, new, rounds)
        kind = "complex" if complex_ else "real twin"
        rows.append(f"| {label} | {encoding} | {kind} | {cached:,.0f} | {recomputed:,.0f} "
                    f"| {ratio:.1f}x |")  # fmt: skip
        print(rows[-1], flush=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = "\n".join([
        "# Generation: key/value cache against recomputing the window",
        "",
        f"`python benchmarks/generate.py` on {datetime.date.today()}, torch {torch.__version__}, "
        f"1 thread; `uptime`: {load}.",
        "",
        f"{new} tokens sampled after a {PROMPT}-token prompt (context {PROMPT + new}: the text "
        f"stays in the window), {rounds} interleaved rounds; tokens per second are medians, the "
        "ratio is the median of the per-round ratios (recomputed time / cached time).",
        "",
        "lm-char: d 64 complex, 2 layers, 4 heads, feed-forward 256 (real twin: widths doubled); "
        "d 128, 4 layers: feed-forward 512.",
        "",
        "| model | encoding | field | cached tokens/s | recomputed tokens/s | speed-up |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
    ])  # fmt: skip
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
