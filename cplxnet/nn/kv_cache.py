r"""The key/value cache of incremental (autoregressive) decoding."""

from __future__ import annotations

import torch

__all__ = ["KVCache"]


class KVCache:
    r"""The keys and values one self-attention layer has computed so far, so that decoding a
    sequence one token at a time costs one step per token instead of a pass over the window.

    ``MultiheadAttention.forward(x, cache=c, is_causal=True)`` treats the ``Lq`` rows of ``x``
    as the positions ``len(c) .. len(c) + Lq - 1``: it projects them, applies the encoding's
    ``rotate(q, k, v, offset=len(c))``, appends the new keys and values ``(B, H, Lq, Dh)`` to
    the cache and attends from the new queries to every cached key :math:`j \le` the query's
    position. Each layer of a stack has its own cache
    (``TransformerEncoder.forward(..., cache=[KVCache() for _ in layers])``). A cached pass gives
    the logits of an uncached pass over the whole sequence when the encoding's
    ``supports_kv_cache`` is True (see :mod:`cplxnet.encodings.base`).

    Cost per new token and layer: :math:`O(t D)` for the attention over ``t`` cached keys,
    against :math:`O(t^2 D + t D^2)` to recompute the window.

    Examples::

        >>> attn = cplxnet.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = torch.randn(1, 5, 8, dtype=torch.cfloat)
        >>> full = attn(x, need_weights=False, is_causal=True)[0]
        >>> cache = KVCache()
        >>> steps = [attn(x[:, t : t + 1], need_weights=False, is_causal=True, cache=cache)[0]
        ...          for t in range(5)]
        >>> torch.allclose(torch.cat(steps, 1), full, atol=1e-6), len(cache)
        (True, 5)
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None  # (B, H, t, Dh)
        self.values: torch.Tensor | None = None  # (B, H, t, Dv)

    def __len__(self) -> int:
        """The number of cached positions ``t``."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the keys ``k`` and values ``v`` ``(B, H, L, D)`` of the new positions and return
        all keys and values ``(B, H, t + L, D)``."""
        if self.keys is None:
            self.keys, self.values = k, v
        else:
            if k.shape[:2] != self.keys.shape[:2]:
                raise ValueError(
                    f"KVCache: new keys of shape {tuple(k.shape)} do not continue the cached "
                    f"{tuple(self.keys.shape)} (batch and heads must match); use a new cache "
                    "for a new batch"
                )
            self.keys = torch.cat([self.keys, k], dim=-2)
            self.values = torch.cat([self.values, v], dim=-2)
        return self.keys, self.values

    def reset(self) -> None:
        """Forget every cached position."""
        self.keys = self.values = None

    def __repr__(self) -> str:
        return f"KVCache(length={len(self)})"
