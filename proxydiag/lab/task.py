"""The verifiable-reward task: sort a short list of digits.

Prompt ``BOS d1 d2 d3 d4 SEP``, answer the digits in ascending order then ``EOS``. The reward
is exact match (1.0) with partial credit per correct position (so that GRPO groups are rarely
all-equal), as in rule-based math/sorting rewards of RL post-training.
"""

from __future__ import annotations

import torch

N_DIGITS = 10
BOS, SEP, EOS, PAD = 10, 11, 12, 13
VOCAB = 14
LIST_LEN = 4
PROMPT_LEN = LIST_LEN + 2
ANSWER_LEN = LIST_LEN + 1  # digits + EOS


def prompts(n: int, *, gen: torch.Generator) -> torch.Tensor:
    """``n`` random prompts, shape (n, PROMPT_LEN)."""
    digits = torch.randint(0, N_DIGITS, (n, LIST_LEN), generator=gen)
    bos = torch.full((n, 1), BOS)
    sep = torch.full((n, 1), SEP)
    return torch.cat([bos, digits, sep], dim=1)


def answers(prompt: torch.Tensor) -> torch.Tensor:
    """The correct answers (sorted digits + EOS), shape (n, ANSWER_LEN)."""
    digits = prompt[:, 1 : 1 + LIST_LEN].sort(dim=1).values
    return torch.cat([digits, torch.full((prompt.shape[0], 1), EOS)], dim=1)


def reward(prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Per sequence reward in [0, 1]: 1 for an exact answer, else 0.5 × fraction of correct
    positions."""
    target = answers(prompt)
    correct = (response[:, : target.shape[1]] == target).float()
    exact = correct.all(dim=1).float()
    return torch.where(exact > 0, exact, 0.5 * correct.mean(dim=1))


def pretrain_batch(n: int, *, gen: torch.Generator, noise: float) -> torch.Tensor:
    """Supervised sequences (prompt + answer) where a fraction ``noise`` of answer digits is
    replaced at random, so pre-training leaves room for RL to improve."""
    prompt = prompts(n, gen=gen)
    target = answers(prompt)
    flip = torch.rand(target.shape, generator=gen) < noise
    flip[:, -1] = False
    rand = torch.randint(0, N_DIGITS, target.shape, generator=gen)
    return torch.cat([prompt, torch.where(flip, rand, target)], dim=1)
