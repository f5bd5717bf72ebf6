"""Forward+backward time of cplxnet's grid layers (convolutions 1-3d and transposed, pools,
Upsample, channel dropout) relative to the real PyTorch layer on the same number of real values
or FLOPs, to torch's native complex op where one exists, and to complextorch's and torchcvnn's
layers, measured side by side in one process with the harness ``benchmarks/harness.py``.

    python benchmarks/grid_layers.py --out benchmarks/RESULTS.md   # one thread, 15 rounds
    python benchmarks/grid_layers.py --quick                       # tiny shapes, every row runs

Shapes (a small complex U-Net's): 2-D ``(8, C, 64, 64)``, 3-D ``(2, C, 16, 16, 16)``, 1-D
``(16, C, 1024)``, ``C = 32`` complex channels (the real baseline gets ``(B, 2C, ...)``, and a
real convolution ``2C -> 2C`` for a complex ``C -> C``: the same FLOPs as the block kernel).
torchcvnn is timed only if it is installed (it is not a dependency); its ``MaxPool2d`` gathers
from the first (batch, channel) plane only (``z.flatten()[indices]``), so it computes another
function for ``B C > 1`` and is timed for reference only.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

import harness  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from cplxnet import nn as cnn  # noqa: E402

try:
    import torchcvnn.nn as tcnn  # noqa: E402
except ImportError:  # pragma: no cover - optional comparison
    tcnn = None

Case, fwd_bwd, ctnn = harness.Case, harness.fwd_bwd, harness.ctnn
SECTION = "grid_layers.py: convolutions, pools, Upsample, Dropout2d/3d (1 thread)"
ROWS: dict = {}
SHAPES = {1: (16, 1024), 2: (8, 64, 64), 3: (2, 16, 16, 16)}  # batch, spatial sizes
QUICK = {1: (2, 16), 2: (2, 8, 8), 3: (1, 4, 4, 4)}


row = harness.registry(ROWS)


def _inputs(nd, c, cfg):
    b, *sp = (QUICK if cfg.seq < 16 else SHAPES)[nd]
    z = torch.randn(b, c, *sp, dtype=cfg.dtype, requires_grad=True)
    x = torch.randn(b, 2 * c, *sp, requires_grad=True)
    return z, x


def _case(nd, c, cfg, ours, real, native=None, ct=None, tc=None, inputs=None):
    """A row: ``ours`` on complex ``(B, C, *S)``, ``real`` on ``(B, 2C, *S)``, and the optional
    native complex / complextorch / torchcvnn modules on the complex input."""
    z, x = inputs or _inputs(nd, c, cfg)
    base = {"real, 2x channels": fwd_bwd(real, x)}
    if native is not None:
        base["torch native complex"] = fwd_bwd(native, z)
    if ct is not None and ctnn is not None:
        base["complextorch"] = fwd_bwd(ct(), z)
    if tc is not None and tcnn is not None:
        base["torchcvnn"] = fwd_bwd(tc(), z)
    return Case(fwd_bwd(ours, z), base)


def _conv_row(nd, name, transposed):
    kw = {"kernel_size": 2, "stride": 2} if transposed else {"kernel_size": 3, "padding": 1}
    tname = f"ConvTranspose{nd}d" if transposed else f"Conv{nd}d"

    @row(name)
    def build(c, cfg):
        ct = (lambda: getattr(ctnn, tname)(c, c, **kw)) if hasattr(ctnn, tname) else None
        tc = (lambda: getattr(tcnn, tname)(c, c, **kw)) if hasattr(tcnn, tname) else None
        return _case(
            nd, c, cfg,
            getattr(cnn, tname)(c, c, **kw),
            getattr(nn, tname)(2 * c, 2 * c, **kw),
            native=getattr(nn, tname)(c, c, **kw, dtype=cfg.dtype),
            ct=ct, tc=tc,
        )  # fmt: skip


_conv_row(3, "Conv3d k=3", False)
for _nd in (1, 2, 3):
    _conv_row(_nd, f"ConvTranspose{_nd}d k=2 s=2", True)


def _channels_last_row(name, nd, ours, real):
    """``ours()`` on a channels-last complex input against ``real()`` on the channels-last and
    on the contiguous real input of 2x the channels."""
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d

    @row(f"{name} channels-last")
    def build(c, cfg):
        z, x = _inputs(nd, c, cfg)
        zc, xc = (t.detach().contiguous(memory_format=fmt).requires_grad_() for t in (z, x))
        real_layer = real(c)
        if name.startswith("Dropout"):
            torch.manual_seed(0)
        return Case(
            fwd_bwd(ours(c), zc),
            {"real, 2x channels, channels-last": fwd_bwd(real_layer, xc),
             "real, 2x channels, contiguous": fwd_bwd(real_layer, x)},
        )  # fmt: skip


for _nd in (2, 3):
    _convs = (
        ("Conv", {"kernel_size": 3, "padding": 1}, "k=3"),
        ("ConvTranspose", {"kernel_size": 2, "stride": 2}, "k=2 s=2"),
    )
    for _t, _kw, _shape in _convs:
        _cls = f"{_t}{_nd}d"
        _channels_last_row(
            f"{_cls} {_shape}", _nd,
            lambda c, cls=_cls, kw=_kw: getattr(cnn, cls)(c, c, **kw),
            lambda c, cls=_cls, kw=_kw: getattr(nn, cls)(2 * c, 2 * c, **kw),
        )  # fmt: skip
for _name, _nd, _cls, _args, _kw in (
    ("MaxPool2d k=2", 2, "MaxPool2d", (2,), {}),
    ("AvgPool2d k=3 s=2 p=1", 2, "AvgPool2d", (3, 2, 1), {}),
    ("AdaptiveAvgPool2d 7", 2, "AdaptiveAvgPool2d", (7,), {}),
    ("AdaptiveMaxPool2d 7", 2, "AdaptiveMaxPool2d", (7,), {}),
    ("Upsample bilinear x2", 2, "Upsample", (), {"scale_factor": 2, "mode": "bilinear"}),
    ("Upsample trilinear x2", 3, "Upsample", (), {"scale_factor": 2, "mode": "trilinear"}),
    ("MaxPool3d k=2", 3, "MaxPool3d", (2,), {}),
):
    _channels_last_row(
        _name, _nd,
        lambda c, cls=_cls, a=_args, kw=_kw: getattr(cnn, cls)(*a, **kw),
        lambda c, cls=_cls, a=_args, kw=_kw: getattr(nn, cls)(*a, **kw),
    )  # fmt: skip


def _free_row(name, nd, cls, args=(), kw=None, ct_name=None, tc_name=None, tc_kw=None):
    kw = kw or {}

    @row(name)
    def build(c, cfg):
        ct = getattr(ctnn, ct_name or cls, None) if ctnn is not None else None
        tc = getattr(tcnn, tc_name or cls, None) if tcnn is not None else None
        case = _case(
            nd, c, cfg, getattr(cnn, cls)(*args, **kw), getattr(nn, cls)(*args, **kw),
            ct=(lambda: ct(*args, **kw)) if ct else None,
            tc=(lambda: tc(*args, **(tc_kw or kw))) if tc else None,
        )  # fmt: skip
        if cls.startswith("Dropout"):
            torch.manual_seed(0)
        return case


for _nd in (1, 2, 3):
    _free_row(f"MaxPool{_nd}d k=2", _nd, f"MaxPool{_nd}d", (2,), ct_name=f"MagMaxPool{_nd}d")
    _free_row(f"AvgPool{_nd}d k=2", _nd, f"AvgPool{_nd}d", (2,), tc_kw={"stride": 2})
_free_row("AvgPool2d k=3 s=2 p=1", 2, "AvgPool2d", (3, 2, 1))
_free_row("AdaptiveAvgPool2d 7", 2, "AdaptiveAvgPool2d", (7,))
_free_row("AdaptiveMaxPool2d 7", 2, "AdaptiveMaxPool2d", (7,))
_free_row("Upsample nearest x2 (2-D)", 2, "Upsample", kw={"scale_factor": 2})
_free_row("Upsample bilinear x2", 2, "Upsample", kw={"scale_factor": 2, "mode": "bilinear"})
_free_row("Upsample linear x2 (1-D)", 1, "Upsample", kw={"scale_factor": 2, "mode": "linear"})
_free_row("Upsample trilinear x2", 3, "Upsample", kw={"scale_factor": 2, "mode": "trilinear"})
_free_row("Dropout2d p=0.2", 2, "Dropout2d", (0.2,))
_free_row("Dropout3d p=0.2", 3, "Dropout3d", (0.2,))


@row("MaxUnpool2d k=2")
def _unpool(c, cfg):
    z, x = _inputs(2, c, cfg)
    yz, iz = cnn.MaxPool2d(2, return_indices=True)(z.detach())
    yx, ix = nn.MaxPool2d(2, return_indices=True)(x.detach())
    yz.requires_grad_(), yx.requires_grad_()
    return Case(
        fwd_bwd(cnn.MaxUnpool2d(2), yz, iz),
        {"real, 2x channels": fwd_bwd(nn.MaxUnpool2d(2), yx, ix)},
    )


def main(argv=None):
    harness.one_thread_main(
        argv, doc=__doc__, rows=ROWS, section=SECTION,
        shapes="shapes 1-D (16, C, 1024), 2-D (8, C, 64, 64), 3-D (2, C, 16, 16, 16), C complex "
        "channels (the real baseline: 2C real channels).",
    )  # fmt: skip


if __name__ == "__main__":
    main()
