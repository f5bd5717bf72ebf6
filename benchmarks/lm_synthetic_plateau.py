"""How long a copy / reverse decoder must train before its in-distribution exact match plateaus,
and what a training step costs (CPU seconds of one thread).

Trains the ``lm-char`` decoder (or its equal-FLOP real twin) on ``synthetic:copy`` or
``synthetic:reverse`` with the study's recipe (warm-up then cosine, AdamW) and scores the exact
match of the greedy answers on the in-distribution test bin (prompts of 1..L symbols, the
test prompts of ``cplxnet compare``) every ``--every`` steps; prints one line per evaluation:
step, CPU seconds of training so far, dev loss, exact match. The exact match here is the cell's
test bin, scored during training only to find the plateau (the compare cells choose their
checkpoint by dev loss and score the test bins once).

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/lm_synthetic_plateau.py --task copy \
        --encoding rotary --steps 3000 --every 250
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch
import torch.nn.functional as F

import cplxnet.models as zoo
from cplxnet.lm import LMOptions, make_task
from cplxnet.tasks.lm.synthetic import IGNORE


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", choices=("copy", "reverse"), default="copy")
    p.add_argument("--encoding", default="rotary")
    p.add_argument("--number", choices=("natural", "real", "complex"), default="natural")
    p.add_argument("--context", type=int, default=16)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--every", type=int, default=250)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the curve here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    task = make_task(f"synthetic:{args.task}", "char", args.context)
    config = zoo.preset_config("lm-char", encoding=args.encoding)
    config = dataclasses.replace(config, vocab_size=len(task.vocab), padding_idx=0,
                                 max_len=task.longest_input)  # fmt: skip
    real = args.number == "real" or (args.number == "natural" and not _is_complex(args.encoding))
    if real:
        config = zoo.real_twin(config, match="flops")
    torch.manual_seed(args.seed)
    model = zoo.build_model(config)
    opts = LMOptions(steps=args.steps, lr=args.lr, schedule="cosine",
                     warmup_steps=args.warmup_steps, min_lr_ratio=0.1, seed=args.seed)  # fmt: skip
    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=opts.lr, weight_decay=opts.weight_decay)
    s = task.synthetic
    name, lo, hi = s.bins()[0]
    prompts = s.test_prompts(lo, hi)
    curve = []
    cpu = 0.0
    for step in range(args.steps):
        t0 = time.process_time()
        for group in optimizer.param_groups:
            group["lr"] = opts.lr_at(step)
        ids, targets, mask = task.batch(step, opts.seed, opts.batch_size)
        logits = model(ids, mask)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, opts.clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        cpu += time.process_time() - t0
        if (step + 1) % args.every == 0 or step + 1 == args.steps:
            dev = task.dev(model, opts.batch_tokens)["loss"]
            acc = s.accuracy(model, prompts)
            model.train()
            curve.append({"step": step + 1, "cpu_seconds": round(cpu, 1), "dev_loss": dev,
                          f"exact_{name}": acc})  # fmt: skip
            print(f"{args.task} {args.encoding} ({'real' if real else 'complex'}) step "
                  f"{step + 1}: {cpu:.0f} CPU s ({cpu / (step + 1) * 1e3:.0f} ms/step), dev loss "
                  f"{dev:.4f}, exact match {name} {acc:.3f}", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "curve": curve}, fh, indent=1)


def _is_complex(name: str) -> bool:
    from cplxnet.compare.specs import is_complex_name

    return is_complex_name(name)


if __name__ == "__main__":
    main()
