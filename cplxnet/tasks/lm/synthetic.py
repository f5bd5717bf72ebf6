"""Order-decided synthetic tasks in decoder format: ``copy`` and ``reverse``.

After Kazemnejad et al., "The Impact of Positional Encoding on Length Generalization in
Transformers", NeurIPS 2023: a sequence is ``prompt <sep> answer <eos>`` over a small alphabet,
the answer being the prompt (``copy``) or the prompt reversed (``reverse``). The model is trained
with the next-token loss on the answer and ``<eos>`` only, on prompts of 1 .. L symbols (uniform
length, uniform symbols, fresh sequences every step), and scored by the exact-match accuracy of
its greedy answer: given ``prompt <sep>`` it generates ``n + 1`` tokens for a prompt of ``n``
symbols, and is right only if they are the answer followed by ``<eos>`` (stopping on time is
part of the task). Bins of prompt lengths: ``1-L`` (the training lengths), ``L+1-2L`` and
``2L+1-4L`` (never seen).

Evaluation budget: ``test_size`` (100) fixed prompts per bin and ``dev_size`` (200) dev prompts,
scored in batches of about ``batch_tokens`` (16384) tokens. At every evaluation of training the
dev prompts are scored by their loss on the answers and by their exact match (the history's
``dev_accuracy``, the learning curve); ``LMOptions.monitor`` says which of the two picks the best
checkpoint and drives early stopping (the loss by default).
The greedy answer is exactly right if and only if the most likely next token is the right one at
every answer position given the right prefix (by induction over the positions), so
:meth:`SyntheticTask.accuracy` scores a batch with one teacher-forced forward pass instead of
``n + 1`` generation steps: the test costs 3 bins x 100 prompts of at most ``8L + 1`` tokens, one
forward pass per batch.

Dev and test sets are drawn from fixed seeds (independent of the training seed), so every run
of a study is scored on the same sequences.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...engine.metrics import evaluating
from .data import TokenVocab

__all__ = ["TASKS", "SyntheticTask", "IGNORE", "SYNTHETIC_CONTEXT"]

TASKS = ("copy", "reverse")
IGNORE = -100  # target id that the loss ignores (cross_entropy's ignore_index)
SEP, EOS = "<sep>", "<eos>"
DEV_SEED, TEST_SEED = 7_919, 104_729
#: The default longest training prompt ``L`` of a synthetic task on the command line.
SYNTHETIC_CONTEXT = 16


class SyntheticTask:
    """A copy/reverse task with training prompts of ``1 .. max_prompt`` symbols.

    Args:
        task: ``"copy"`` or ``"reverse"``.
        max_prompt: ``L``, the longest training prompt.
        alphabet: number of symbols (``a``, ``b``, ...; at most 26).
        test_size: examples per test bin; ``dev_size``: dev examples (lengths ``1 .. L``).
    """

    def __init__(
        self,
        task: str,
        max_prompt: int,
        alphabet: int = 10,
        test_size: int = 100,
        dev_size: int = 200,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown synthetic task {task!r}; valid: {', '.join(TASKS)}")
        if max_prompt < 1 or not 2 <= alphabet <= 26:
            raise ValueError("SyntheticTask: need max_prompt >= 1 and 2 <= alphabet <= 26")
        self.task, self.max_prompt, self.alphabet = task, max_prompt, alphabet
        self.test_size, self.dev_size = test_size, dev_size
        symbols = [chr(ord("a") + i) for i in range(alphabet)]
        self.vocab = TokenVocab(["<pad>", "<unk>", SEP, EOS, *symbols])
        self.sep, self.eos = self.vocab.stoi[SEP], self.vocab.stoi[EOS]
        self.first_symbol = self.vocab.stoi[symbols[0]]

    @property
    def longest_input(self) -> int:
        """Inputs of the longest training sequence: ``prompt <sep> answer`` = ``2L + 1``."""
        return 2 * self.max_prompt + 1

    def bins(self) -> list[tuple[str, int, int]]:
        """``(name, shortest, longest)`` prompt lengths of the test bins."""
        L = self.max_prompt
        return [(f"1-{L}", 1, L), (f"{L + 1}-{2 * L}", L + 1, 2 * L),
                (f"{2 * L + 1}-{4 * L}", 2 * L + 1, 4 * L)]  # fmt: skip

    def answer(self, prompt: torch.Tensor) -> torch.Tensor:
        return prompt if self.task == "copy" else prompt.flip(0)

    def prompts(self, generator: torch.Generator, lengths: Sequence[int]) -> list[torch.Tensor]:
        """Random prompts (symbol ids) of the given lengths."""
        return [
            torch.randint(
                self.first_symbol, self.first_symbol + self.alphabet, (n,), generator=generator
            )
            for n in lengths
        ]

    def sequence(self, prompt: torch.Tensor) -> torch.Tensor:
        """``prompt <sep> answer <eos>`` as ids."""
        return torch.cat([prompt, prompt.new_tensor([self.sep]), self.answer(prompt),
                          prompt.new_tensor([self.eos])])  # fmt: skip

    def collate(
        self, prompts: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inputs ``(B, T)``, targets ``(B, T)`` (:data:`IGNORE` except at the answer and
        ``<eos>``) and the padding mask (True = padding, at the end) of teacher forcing."""
        seqs = [self.sequence(p) for p in prompts]
        T = max(len(s) for s in seqs) - 1
        ids = torch.zeros(len(seqs), T, dtype=torch.long)
        targets = torch.full((len(seqs), T), IGNORE, dtype=torch.long)
        mask = torch.ones(len(seqs), T, dtype=torch.bool)
        for i, (p, s) in enumerate(zip(prompts, seqs)):
            n = len(p)
            ids[i, : len(s) - 1] = s[:-1]
            mask[i, : len(s) - 1] = False
            targets[i, n : 2 * n + 1] = s[n + 1 :]  # position n (<sep>) predicts the answer
        return ids, targets, mask

    def batch(
        self, generator: torch.Generator, batch_size: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A training batch: prompt lengths uniform in ``1 .. L``."""
        lengths = torch.randint(1, self.max_prompt + 1, (batch_size,), generator=generator)
        return self.collate(self.prompts(generator, lengths.tolist()))

    def _fixed(self, seed: int, lo: int, hi: int, count: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(lo, hi + 1, (count,), generator=g).tolist()
        return self.prompts(g, lengths)

    def dev_prompts(self) -> list[torch.Tensor]:
        return self._fixed(DEV_SEED, 1, self.max_prompt, self.dev_size)

    def test_prompts(self, lo: int, hi: int) -> list[torch.Tensor]:
        return self._fixed(TEST_SEED + 1_000 * lo + hi, lo, hi, self.test_size)

    @torch.no_grad()
    def loss(
        self, model: nn.Module, prompts: Sequence[torch.Tensor], batch_size: int = 64
    ) -> float:
        """Mean teacher-forced cross-entropy (nats) over the answer and ``<eos>`` tokens."""
        total, count = 0.0, 0
        device = next(model.parameters()).device
        with evaluating(model):
            for i in range(0, len(prompts), batch_size):
                batch = self.collate(prompts[i : i + batch_size])
                ids, targets, mask = (t.to(device) for t in batch)
                logits = model(ids, mask)
                total += float(F.cross_entropy(logits.flatten(0, 1).double(), targets.flatten(),
                                               ignore_index=IGNORE, reduction="sum"))  # fmt: skip
                count += int((targets != IGNORE).sum())
        return total / count

    @torch.no_grad()
    def greedy_answers(
        self, model: nn.Module, prompts: Sequence[torch.Tensor], batch_size: int = 100
    ) -> list[torch.Tensor]:
        """The ``n + 1`` tokens the model generates greedily after each ``prompt <sep>``.

        Prompts of different lengths share a batch: each row is padded at the end and reads its
        next token at its own last position (the causal mask makes the padding invisible). The
        whole prefix is recomputed at every step (no key/value cache).
        """
        with evaluating(model):
            device = next(model.parameters()).device
            out: list[torch.Tensor] = []
            for i in range(0, len(prompts), batch_size):
                chunk = prompts[i : i + batch_size]
                n = torch.tensor([len(p) for p in chunk], device=device)
                B, T = len(chunk), int(2 * n.max()) + 2
                buf = torch.zeros(B, T, dtype=torch.long, device=device)
                for r, p in enumerate(chunk):
                    buf[r, : len(p)] = p.to(device)
                    buf[r, len(p)] = self.sep
                cur = n + 1  # tokens so far in each row
                rows = torch.arange(B, device=device)
                for _ in range(int(n.max()) + 1):
                    active = cur < 2 * n + 2  # rows still generating their n + 1 tokens
                    logits = model(buf[:, : int(cur.max())])  # (B, T', V)
                    nxt = logits[rows, cur - 1].argmax(-1)
                    buf[rows[active], cur[active]] = nxt[active]
                    cur = torch.where(active, cur + 1, cur)
                out.extend(buf[r, len(p) + 1 : 2 * len(p) + 2].cpu() for r, p in enumerate(chunk))
        return out

    @torch.no_grad()
    def accuracy(
        self, model: nn.Module, prompts: Sequence[torch.Tensor], batch_tokens: int = 16384
    ) -> float:
        """Exact-match accuracy of the greedy answers (answer and ``<eos>`` all right), equal to
        that of :meth:`greedy_answers` and computed with one teacher-forced forward pass per
        batch: a greedy answer is right exactly when the arg-max next token is the target at
        every answer position given the right prefix. A batch holds about ``batch_tokens``
        tokens (at least one prompt). The equality needs positions that do not depend on the
        batch: a randomized encoding with ``eval_positions="random"`` draws one set of
        positions per forward, shared by the batch's sequences (padded to its longest), so its
        score is that of those draws and depends on ``batch_tokens``."""
        if not prompts:
            raise ValueError("SyntheticTask.accuracy: no prompts")
        with evaluating(model):
            device = next(model.parameters()).device
            right = 0
            i = 0
            while i < len(prompts):
                longest = 2 * len(prompts[i]) + 1
                count = 0
                while i + count < len(prompts):  # prompts in order; a batch of about batch_tokens
                    longest = max(longest, 2 * len(prompts[i + count]) + 1)
                    if count and longest * (count + 1) > batch_tokens:
                        break
                    count += 1
                ids, targets, _ = (t.to(device) for t in self.collate(prompts[i : i + count]))
                logits = model(ids)  # padding at the end is invisible under the causal mask
                hit = (logits.argmax(-1) == targets) | (targets == IGNORE)
                right += int(hit.all(dim=1).sum())
                i += count
        return right / len(prompts)
