"""The synthetic tasks' test costs a stated budget: ``test_size`` prompts per bin scored with one
teacher-forced forward pass per batch (not one per generated token), with the same exact-match
accuracy as greedy generation, and a progress line per bin."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cplxnet.tasks.lm.synthetic import SyntheticTask
from cplxnet.tasks.lm.task import LMOptions, make_task


class FlawedOracle(nn.Module):
    """A causal model of copy/reverse that answers right except where a hash of the prefix
    says otherwise: logits at position t depend on ``ids[:, :t + 1]`` only."""

    def __init__(self, task: SyntheticTask, modulus: int = 5) -> None:
        super().__init__()
        self.task, self.modulus = task, modulus
        self.anchor = nn.Parameter(torch.zeros(()))
        self.calls = 0

    def unsupported_length(self, n: int) -> None:
        return None

    def forward(self, ids: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        self.calls += 1
        B, T = ids.shape
        V = len(self.task.vocab)
        logits = torch.zeros(B, T, V)
        for b in range(B):
            row = ids[b].tolist()
            for t in range(T):
                prefix = row[: t + 1]
                if self.task.sep not in prefix:
                    continue
                s = prefix.index(self.task.sep)
                prompt = torch.tensor(prefix[:s])
                j = t - s
                answer = self.task.answer(prompt).tolist() + [self.task.eos]
                right = answer[j] if j < len(answer) else self.task.eos
                wrong = sum((k + 1) * v for k, v in enumerate(prefix)) % self.modulus == 0
                other = self.task.first_symbol + (right + 1) % self.task.alphabet
                guess = other if wrong else right
                logits[b, t, guess] = 1.0
        return logits


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_teacher_forced_accuracy_equals_greedy_generation(name):
    task = SyntheticTask(name, 4)
    prompts = task.prompts(torch.Generator().manual_seed(0), [1, 2, 3, 4, 5, 6, 7, 8] * 6)
    model = FlawedOracle(task)
    greedy = task.greedy_answers(model, prompts)
    expected = sum(
        torch.equal(a, torch.cat([task.answer(p), p.new_tensor([task.eos])]))
        for p, a in zip(prompts, greedy)
    ) / len(prompts)
    assert 0.1 < expected < 0.9  # some answers right, some wrong: the comparison means something
    for batch_tokens in (1, 40, 16384):  # one prompt per batch .. all in one batch
        assert task.accuracy(model, prompts, batch_tokens) == pytest.approx(expected)


def test_synthetic_test_costs_one_forward_per_batch_and_reports_progress():
    """Context 64 (the command of issue 28, item 11): 3 bins x 100 prompts of up to 513 tokens
    take one forward pass per batch of about 16384 tokens, 3 + 7 + 13 = 23 in all or fewer; greedy
    generation took up to 257 forward passes per batch."""
    task = make_task("synthetic:copy", context=64)

    class Counting(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.anchor = nn.Parameter(torch.zeros(()))
            self.calls = 0
            self.tokens = 0
            self.largest = 0

        def unsupported_length(self, n: int) -> None:
            return None

        def forward(self, ids, padding_mask=None):
            self.calls += 1
            self.tokens += ids.numel()
            self.largest = max(self.largest, ids.numel())
            return torch.zeros(*ids.shape, len(task.vocab))

    model = Counting()
    lines: list[str] = []
    test = task.test(model, LMOptions(), lines.append)
    assert list(test) == ["1-64", "65-128", "129-256"]
    assert all(entry["n"] == 100 for entry in test.values())
    assert model.calls <= 3 + 7 + 13, model.calls
    assert model.tokens <= 3 * 100 * (8 * 64 + 1)
    assert model.largest <= LMOptions().batch_tokens  # batched: memory bounded too
    assert len(lines) == 3 and all("100 prompts" in line for line in lines)
