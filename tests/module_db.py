"""One table describing every cplxnet module once (like torch's ``common_modules.py``).

``tests/nn/test_module_common.py`` runs generic tests over every entry of :data:`MODULES`:
factory kwargs (complex64/complex128 and the default dtype), state_dict round trip,
deterministic ``reset_parameters``, ``gradcheck`` in complex128 (inputs and parameters), repr /
extra_repr, real-input and dtype-mismatch errors, the real twin for ``supports_real`` entries
(its values equal the complex module's on real inputs), and a ``torch.compile`` smoke test for
entries with ``compile_backend``.

How to add a module
-------------------
Add an entry to the section of its kind (core layers, RNN, attention / transformer), e.g.::

    MODULES.append(
        ModuleInfo(
            cnn.MultiheadAttention,
            args=(8, 2),
            kwargs={"batch_first": True},  # inputs (B, L, D)
            make_input=lambda dtype, device: ((_randn((2, 5, 8), dtype, device),), {}),
            compile_backend="aot_eager",   # opt in to the torch.compile smoke test
        )
    )

``make_input(dtype, device)`` returns ``(args, kwargs)`` for ``forward``: build floating inputs with
the given ``dtype`` (the module's dtype: complex, or real for the real-twin test); masks and ids
are not differentiated. Keep shapes tiny: gradcheck perturbs every input and parameter entry.
Set ``takes_factory_kwargs=False`` for parameter-free modules without ``device``/``dtype``
arguments, ``is_random=True`` for modules whose training-mode output depends on the RNG (they
are gradchecked in eval mode), ``supports_real=True`` if the module also accepts a real
dtype / real input, and ``exact_grad=False`` for a module whose backward is a documented surrogate
(a straight-through estimator), which gradcheck cannot confirm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from cplxnet import nn as cnn

__all__ = ["ModuleInfo", "MODULES", "make_module", "sample_input", "output_tensors"]

InputFn = Callable[[torch.dtype, torch.device | str | None], tuple[tuple, dict]]


@dataclass
class ModuleInfo:
    cls: type
    make_input: InputFn
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    name: str | None = None  # test id; defaults to the class name (+ a counter if repeated)
    has_params: bool = True
    takes_factory_kwargs: bool = True  # __init__ accepts device=, dtype=
    is_random: bool = False  # training-mode output depends on the RNG
    supports_real: bool = False  # also runs with a real dtype / real input
    complex_input: bool = True  # the first forward argument is a complex tensor
    compile_backend: str | None = None  # e.g. "inductor" or "aot_eager" to smoke-test compile
    build: Callable | None = None  # constructor to call instead of ``cls`` (e.g. a classmethod)
    exact_grad: bool = True  # False: a documented surrogate gradient (gradcheck is skipped)

    @property
    def id(self) -> str:
        return self.name or self.cls.__name__


def make_module(info: ModuleInfo, dtype: torch.dtype | None = None, device=None) -> torch.nn.Module:
    """Instantiate ``info`` (passing ``device``/``dtype`` only if the module takes them)."""
    build = info.build or info.cls
    if info.takes_factory_kwargs:
        return build(*info.args, **info.kwargs, device=device, dtype=dtype)
    return build(*info.args, **info.kwargs)


def sample_input(info: ModuleInfo, dtype: torch.dtype, device=None) -> tuple[tuple, dict]:
    return info.make_input(dtype, device)


def output_tensors(out, floating_only: bool = True) -> list[torch.Tensor]:
    """The floating and complex tensors (every tensor without ``floating_only``) of a (possibly
    nested) output or input, in order."""
    if isinstance(out, torch.Tensor):
        keep = not floating_only or out.is_complex() or out.is_floating_point()
        return [out] if keep else []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in output_tensors(o, floating_only)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in output_tensors(o, floating_only)]
    return []


def _randn(shape, dtype, device=None):
    return torch.randn(*shape, dtype=dtype, device=device)


def _x(*shape):
    """Sample input factory: one tensor of ``shape`` in the requested dtype."""
    return lambda dtype, device: ((_randn(shape, dtype, device),), {})


def _seq_with_mask(dtype, device):
    x = _randn((3, 5, 4), dtype, device)
    mask = torch.tensor(
        [[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4], device=device
    )
    return (x, mask), {}


def _ids(dtype, device):
    # no padding index (0) here: padding_idx deliberately blocks its gradient, which gradcheck
    # would report as a Jacobian mismatch (tests/nn/test_embedding.py covers padding)
    return (torch.tensor([[4, 3, 9, 3], [1, 5, 2, 2]], device=device),), {}


_ACT = {"has_params": False, "takes_factory_kwargs": False, "supports_real": True}
_READ = {"has_params": False, "takes_factory_kwargs": False}

MODULES: list[ModuleInfo] = [
    # ---- core layers ----
    ModuleInfo(cnn.Linear, _x(2, 3, 5), args=(5, 3), compile_backend="inductor"),
    ModuleInfo(cnn.Linear, _x(4, 5), args=(5, 3), kwargs={"bias": False}, name="Linear_nobias"),
    ModuleInfo(
        cnn.Linear,
        _x(2, 3, 5),
        args=(5, 3),
        kwargs={"weight_field": "real"},
        name="Linear_real_weight",
        compile_backend="aot_eager",
    ),
    ModuleInfo(cnn.Conv1d, _x(2, 4, 7), args=(4, 6, 3), kwargs={"padding": 1}),
    ModuleInfo(
        cnn.Conv1d,
        _x(2, 4, 6),
        args=(4, 4, 3),
        kwargs={"groups": 2, "padding": 1, "padding_mode": "circular", "stride": 2},
        name="Conv1d_groups_circular",
    ),
    ModuleInfo(cnn.Conv2d, _x(2, 2, 4, 4), args=(2, 3, 3), kwargs={"padding": 1}),
    ModuleInfo(cnn.Embedding, _ids, args=(10, 3), kwargs={"padding_idx": 0}, complex_input=False),
    ModuleInfo(cnn.LayerNorm, _x(2, 3, 6), args=(6,), supports_real=True),
    ModuleInfo(
        cnn.LayerNorm, _x(2, 3, 6), args=(6,), kwargs={"mode": "whiten"}, name="LayerNorm_whiten"
    ),
    ModuleInfo(
        cnn.LayerNorm,
        _x(2, 3, 4),
        args=((3, 4),),
        kwargs={"bias": False},
        supports_real=True,
        name="LayerNorm_2d_nobias",
    ),
    ModuleInfo(cnn.BatchNorm1d, _x(6, 3, 4), args=(3,)),
    ModuleInfo(
        cnn.BatchNorm1d,
        _x(6, 3),
        args=(3,),
        kwargs={"affine": False},
        has_params=False,
        name="BatchNorm1d_noaffine",
    ),
    ModuleInfo(cnn.RMSNorm, _x(2, 3, 6), args=(6,), supports_real=True),
    ModuleInfo(cnn.Dropout, _x(3, 5), args=(0.3,), is_random=True, **_ACT),
    ModuleInfo(cnn.CReLU, _x(3, 5), compile_backend="aot_eager", **_ACT),
    ModuleInfo(cnn.ZReLU, _x(3, 5), **_ACT),
    ModuleInfo(cnn.Cardioid, _x(3, 5), **_ACT),
    ModuleInfo(cnn.SplitTanh, _x(3, 5), **_ACT),
    ModuleInfo(cnn.SplitSigmoid, _x(3, 5), **_ACT),
    ModuleInfo(cnn.SplitGELU, _x(3, 5), kwargs={"approximate": "tanh"}, **_ACT),
    ModuleInfo(
        cnn.ModReLU,
        _x(3, 5),
        args=(5,),
        kwargs={"bias_init": -0.1},
        supports_real=True,
        compile_backend="inductor",
    ),
    ModuleInfo(cnn.Magnitude, _x(3, 5), **_READ),
    ModuleInfo(cnn.RealPart, _x(3, 5), **_READ),
    ModuleInfo(cnn.ConcatRealImag, _x(3, 5), kwargs={"dim": -1}, **_READ),
    ModuleInfo(cnn.MeanPool, _seq_with_mask, **_ACT),
    ModuleInfo(cnn.MaxMagnitudePool, _seq_with_mask, **_ACT),
    ModuleInfo(
        cnn.MaxMagnitudePool, _x(2, 3, 6), kwargs={"dim": -1}, name="MaxMagnitudePool_time", **_ACT
    ),
]


# ---- RNN: LSTM / GRU (split and analytic gates), UnitaryRNN(Cell) ----
def _rnn_seq_lengths(dtype, device):
    """(B=2, L=3, D=2) sequence with lengths [3, 2] (padding at the end of the second); the
    modules taking it are built with ``batch_first=True``."""
    return (_randn((2, 3, 2), dtype, device),), {"lengths": torch.tensor([3, 2], device=device)}


_BF = {"batch_first": True}

MODULES.extend(
    [
        ModuleInfo(cnn.LSTM, _rnn_seq_lengths, args=(2, 2), kwargs={"bidirectional": True, **_BF}),
        ModuleInfo(
            cnn.LSTM,
            _rnn_seq_lengths,
            args=(2, 2),
            kwargs={"num_layers": 2, "dropout": 0.3, **_BF},
            is_random=True,
            name="LSTM_2layers_dropout",
        ),
        ModuleInfo(
            cnn.LSTM, _x(2, 3, 2), args=(2, 2), kwargs={"gate": "analytic"}, name="LSTM_analytic"
        ),
        ModuleInfo(
            cnn.LSTM,
            _rnn_seq_lengths,
            args=(2, 3),
            kwargs={"num_layers": 2, "bidirectional": True, "proj_size": 2, **_BF},
            name="LSTM_proj",
        ),
        ModuleInfo(cnn.GRU, _rnn_seq_lengths, args=(2, 2), kwargs={"bidirectional": True, **_BF}),
        ModuleInfo(
            cnn.GRU, _x(2, 3, 2), args=(2, 2), kwargs={"gate": "analytic"}, name="GRU_analytic"
        ),
        ModuleInfo(
            cnn.UnitaryRNN, _rnn_seq_lengths, args=(2, 3), kwargs={"bidirectional": True, **_BF}
        ),
        ModuleInfo(cnn.UnitaryRNNCell, _x(2, 2), args=(2, 3)),
        # ---- state-space ----
        ModuleInfo(cnn.S4D, _x(2, 6, 3), args=(3, 4), compile_backend="aot_eager"),
        ModuleInfo(
            cnn.S4D, _x(3, 5), args=(3, 2), kwargs={"transposed": True}, name="S4D_transposed"
        ),
        ModuleInfo(
            cnn.S4D,
            _x(2, 5, 3),
            args=(3, 2),
            kwargs={"bidirectional": True},
            name="S4D_bidirectional",
        ),  # fmt: skip
    ]
)


# ---- attention / transformer ----
def _seq_kv(dtype, device):
    """Cross-attention input: queries (2, 3, 4), keys/values (2, 5, 4) with key padding."""
    x = _randn((2, 3, 4), dtype, device)
    kv = _randn((2, 5, 4), dtype, device)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device=device)
    return (x,), {"key_padding_mask": pad, "key": kv}


def _seq_key_padding(dtype, device):
    """Attention input: the sequence, and its padding as key_padding_mask."""
    (x, mask), _ = _seq_with_mask(dtype, device)
    return (x,), {"key_padding_mask": mask}


def _seq_padding(dtype, device):
    """Transformer input: the sequence, and its padding as torch's src_key_padding_mask."""
    (x, mask), _ = _seq_with_mask(dtype, device)
    return (x,), {"src_key_padding_mask": mask}


MODULES.extend(
    [
        ModuleInfo(
            cnn.MultiheadAttention,
            _seq_key_padding,
            args=(4, 2),
            kwargs={"batch_first": True},
            supports_real=True,
            compile_backend="aot_eager",
        ),
        ModuleInfo(
            cnn.MultiheadAttention,
            _seq_key_padding,
            args=(4, 2),
            kwargs={"score": "modulus", "bias": False, "batch_first": True},
            supports_real=True,
            name="MultiheadAttention_modulus_nobias",
        ),
        ModuleInfo(
            cnn.MultiheadAttention,
            _seq_key_padding,
            args=(4, 2),
            kwargs={"projection": "real", "batch_first": True},
            supports_real=True,
            name="MultiheadAttention_real_projection",
        ),
        ModuleInfo(
            cnn.MultiheadAttention,
            _seq_kv,
            args=(4, 2),
            kwargs={"batch_first": True},
            supports_real=True,
            name="MultiheadAttention_cross",
        ),
        ModuleInfo(
            cnn.TransformerEncoderLayer,
            _seq_padding,
            args=(4, 2),
            kwargs={"dim_feedforward": 6, "batch_first": True},
            is_random=True,
            supports_real=True,
        ),
        ModuleInfo(
            cnn.TransformerEncoderLayer,
            _seq_padding,
            args=(4, 2),
            kwargs={
                "dim_feedforward": 6,
                "norm_first": True,
                "norm": "whiten",
                "activation": "gelu",
                "score": "modulus",
                "batch_first": True,
            },
            is_random=True,
            name="TransformerEncoderLayer_prenorm_whiten",
        ),
        ModuleInfo(
            cnn.TransformerEncoderLayer,
            _seq_padding,
            args=(4, 2),
            kwargs={"dim_feedforward": 6, "projection": "real", "batch_first": True},
            is_random=True,
            name="TransformerEncoderLayer_real_projection",
        ),
        ModuleInfo(
            cnn.TransformerEncoder,
            _seq_padding,
            args=(4, 2, 2),
            kwargs={
                "dim_feedforward": 6,
                "norm_first": True,
                "norm": "rms",
                "final_norm": "rms",
                "batch_first": True,
            },
            build=cnn.TransformerEncoder.from_sizes,
            is_random=True,
            supports_real=True,
        ),
    ]
)

# Entries kept in sibling files, one per family of layers.
from module_db_extra import MODULES as _EXTRA  # noqa: E402
from module_db_grid import MODULES as _GRID  # noqa: E402
from module_db_norm import MODULES as _NORM  # noqa: E402
from module_db_seq2seq import MODULES as _SEQ2SEQ  # noqa: E402

MODULES.extend(_GRID + _NORM + _SEQ2SEQ + _EXTRA)
