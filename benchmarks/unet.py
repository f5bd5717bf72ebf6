"""The complex U-Net against its equal-FLOP real twin on undersampled-Fourier reconstruction.

    python benchmarks/unet.py                        # 600 steps each, writes benchmarks/UNET.md
    python benchmarks/unet.py --steps 20 --out /tmp/unet.md   # a quick check that it runs
    python benchmarks/unet.py --data-consistency     # each net's output through k-space DC

Task (:func:`cplxnet.models.undersampled_fourier_pairs`): random complex 32 x 32 images (Gaussian
blobs with linear phase ramps, unit RMS), 4x undersampled in k-space (8% central columns kept),
zero-filled inverse FFT as input; the target is the full image. Both networks are trained on the
same batches in the same order from the same data seed, with Adam (lr 1e-3) and the complex MSE
(:class:`cplxnet.nn.MSELoss`; the twin's MSE on the real channels, times 2, is the same number).
With ``--data-consistency`` each net's output goes through :class:`cplxnet.nn.DataConsistency`
(the measured k-space samples replace the predicted ones, as in an unrolled reconstruction
network's last step); the same step serves both nets. The steps of the two models alternate
(complex, real, real, complex, ...), one thread, and the step-time ratio is the median over
steps of complex / real. Test error is the normalised MSE
:math:`\\sum |\\hat y - y|^2 / \\sum |y|^2` on 256 held-out images, next to the zero-filled input's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

import torch  # noqa: E402

import cplxnet  # noqa: E402
from cplxnet.models import UNet, as_channels, from_channels, undersampled_fourier_pairs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def nmse(pred: torch.Tensor, target: torch.Tensor) -> float:
    return float((pred - target).abs().pow(2).sum() / target.abs().pow(2).sum())


def _nets(args: argparse.Namespace, norm: bool = True) -> dict:
    """The complex U-Net and its real twin; ``norm=False`` replaces every batch norm of both by
    ``nn.Identity`` (the timing-only variant that shows the norms' share of the step)."""
    nets = {
        "complex": UNet(1, 1, args.base, args.depth, upsample=args.upsample),
        "real twin": UNet(
            2, 2, 2 * args.base, args.depth, upsample=args.upsample, dtype=torch.float32
        ),
    }
    if args.memory_format == "channels_last":
        nets = {k: m.to(memory_format=torch.channels_last) for k, m in nets.items()}
    if not norm:
        for net in nets.values():
            for block in net.modules():
                for name, child in block.named_children():
                    if isinstance(child, (torch.nn.BatchNorm2d, cplxnet.nn.BatchNorm2d)):
                        setattr(block, name, torch.nn.Identity())
    return nets


def _pairs(n: int, g: torch.Generator, args: argparse.Namespace) -> tuple:
    """``(zero_filled, image, measured)``: ``measured`` is ``(kspace, mask)`` with
    ``--data-consistency``, else ``None``."""
    x, y, *measured = undersampled_fourier_pairs(
        n, args.size, generator=g, return_kspace=args.data_consistency
    )
    return x, y, measured or None


def _train(nets: dict, steps: int, g: torch.Generator, args: argparse.Namespace):
    """``steps`` interleaved Adam steps of both nets on the same batches: per-step times and
    losses."""
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    dc = cplxnet.nn.DataConsistency()

    def consistent(out: torch.Tensor, measured: list | None) -> torch.Tensor:
        return out if measured is None else dc(out.contiguous(), *measured)

    feed = {
        "complex": lambda z, m: consistent(nets["complex"](z.contiguous(memory_format=fmt)), m),
        "real twin": lambda z, m: consistent(
            from_channels(nets["real twin"](as_channels(z).contiguous(memory_format=fmt))), m
        ),
    }
    opts = {k: torch.optim.Adam(m.parameters(), lr=args.lr) for k, m in nets.items()}
    loss_fn = cplxnet.nn.MSELoss()
    times: dict[str, list[float]] = {k: [] for k in nets}
    curve: dict[str, list[float]] = {k: [] for k in nets}
    order = list(nets)
    for step in range(steps):
        x, y, measured = _pairs(args.batch, g, args)
        for k in order if step % 2 == 0 else order[::-1]:
            nets[k].train()
            t0 = time.perf_counter()
            loss = loss_fn(feed[k](x, measured), y)
            opts[k].zero_grad(set_to_none=True)
            loss.backward()
            opts[k].step()
            times[k].append(time.perf_counter() - t0)
            curve[k].append(float(loss.detach()))
    return feed, times, curve


def _median_ratio(times: dict) -> float:
    return statistics.median(a / b for a, b in zip(times["complex"][5:], times["real twin"][5:]))


def run(args: argparse.Namespace) -> str:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(args.data_seed)
    test_x, test_y, test_measured = _pairs(256, g, args)
    torch.manual_seed(args.seed)
    nets = _nets(args)
    feed, times, curve = _train(nets, args.steps, g, args)
    results = {}
    with torch.no_grad():
        for k, m in nets.items():
            m.eval()
            results[k] = nmse(feed[k](test_x, test_measured), test_y)
    ratio = _median_ratio(times)
    plain = _train(_nets(args, norm=False), args.norm_steps, g, args)[1]
    plain_ratio = _median_ratio(plain)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    plain_ms = {k: statistics.median(v) * 1e3 for k, v in plain.items()}
    gap, plain_gap = (m["complex"] - m["real twin"] for m in (ms, plain_ms))
    norm_share = 1 - plain_gap / gap
    params = {
        k: sum(p.numel() * (2 if p.is_complex() else 1) for p in m.parameters())
        for k, m in nets.items()
    }
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    tail = max(1, args.steps // 5)
    lines = [
        "# Complex U-Net against its equal-FLOP real twin",
        "",
        f"`python benchmarks/unet.py --steps {args.steps} --memory-format "
        f"{args.memory_format}{' --data-consistency' if args.data_consistency else ''}` on "
        f"{time.strftime('%Y-%m-%d')}, "
        f"torch {torch.__version__}, 1 thread, load {load}. Undersampled-Fourier reconstruction "
        f"of {args.size} x {args.size} complex images (4x, zero-filled input), batch {args.batch}, "
        f"Adam lr {args.lr}, U-Net depth {args.depth}, base {args.base} complex channels "
        f"(twin: {2 * args.base} real), upsampling by `{args.upsample}`, seed {args.seed}, "
        f"memory format `{args.memory_format}` (both nets' weights and inputs)"
        + ("; each net's output through `DataConsistency()`." if args.data_consistency else "."),
        "",
        "| model | real parameters | train loss (mean of last fifth) | test NMSE | "
        "ms per training step |",
        "|---|---:|---:|---:|---:|",
    ]
    for k in nets:
        lines.append(
            f"| {k} | {params[k]:,} | {statistics.mean(curve[k][-tail:]):.4f} | "
            f"{results[k]:.4f} | {ms[k]:.1f} |"
        )
    lines += [
        f"| zero-filled input | - | - | {nmse(test_x, test_y):.4f} | - |",
        "",
        f"Training step, complex / real twin (median over {args.steps - 5} interleaved steps): "
        f"**{ratio:.2f}x**.",
        "",
        f"The same two nets with every batch norm replaced by `nn.Identity` (timing only, "
        f"{args.norm_steps} interleaved steps; the whitening `cplxnet.nn.BatchNorm2d` against "
        f"torch's `BatchNorm2d`): {plain_ratio:.2f}x ({plain_ms['complex']:.1f} ms against "
        f"{plain_ms['real twin']:.1f} ms), so the norms make about {norm_share:.0%} of the "
        f"{gap:.1f} ms by which the complex step is longer.",
        "",
        "The twin has twice the channels on every layer (same real multiply-adds per step) and "
        "so twice the real parameters of the complex net's 2 x complex ones.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--base", type=int, default=8)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--upsample", choices=("transpose", "bilinear"), default="transpose")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--norm-steps", type=int, default=100, help="steps of the timing run without batch norms"
    )
    p.add_argument("--data-seed", type=int, default=1)
    p.add_argument(
        "--memory-format",
        choices=("contiguous", "channels_last"),
        default="contiguous",
        help="memory format of both nets and their inputs",
    )
    p.add_argument(
        "--data-consistency",
        action="store_true",
        help="put each net's output through cplxnet.nn.DataConsistency",
    )
    p.add_argument(
        "--out",
        help="default: benchmarks/UNET.md (contiguous), UNET_CHANNELS_LAST.md or "
        "UNET_DATA_CONSISTENCY.md (with --data-consistency)",
    )
    p.add_argument("--no-reexec", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 10 or args.norm_steps < 10:
        p.error("--steps and --norm-steps must be at least 10")
    if args.out is None:
        name = "UNET.md" if args.memory_format == "contiguous" else "UNET_CHANNELS_LAST.md"
        name = "UNET_DATA_CONSISTENCY.md" if args.data_consistency else name
        args.out = os.path.join(HERE, name)
    text = run(args)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
