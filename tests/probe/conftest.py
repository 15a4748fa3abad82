"""Fixtures: the calibrl tokenizer, a tiny random model, and a few Countdown problems."""

from __future__ import annotations

import pytest
import torch

from calibrl.data import TaskExample
from calibrl.models.tiny import build_tiny_model
from calibrl.models.tokenizer import build_tokenizer
from calibrl.tasks.countdown import COUNTDOWN

PROBLEMS = [([20, 14, 6], 1), ([3, 5, 7], 8), ([2, 9, 4], 26), ([12, 3, 8], 12), ([7, 6, 2], 40)]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread; more only contend on CI's two shared cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer):
    """Random weights with a sharpened output layer, so samples are not uniform noise."""
    model = build_tiny_model(tokenizer, hidden_size=32, num_layers=2, num_heads=2,
                             tie_embeddings=False, max_position_embeddings=512)
    with torch.no_grad():
        model.lm_head.weight.mul_(10.0)
    return model.eval()


def make_examples(problems=PROBLEMS) -> list[TaskExample]:
    out = []
    for i, (numbers, target) in enumerate(problems):
        gt = {"target": target, "numbers": list(numbers)}
        out.append(TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "test"))
    return out


@pytest.fixture(scope="session")
def examples() -> list[TaskExample]:
    return make_examples()
