"""Fixtures: the tiny tokenizer and random model of `tiny_lm`, built once per session."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

from rollout.tiny_lm import build_model, build_tokenizer


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return build_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer) -> Qwen2ForCausalLM:
    return build_model(len(tokenizer))


@pytest.fixture(scope="session")
def prompts(tokenizer) -> list[list[int]]:
    texts = ["Using the numbers [3, 5, 7], create", "<think> 7 - 3", "How confident are you? <analysis>"]
    return [tokenizer.encode(t) for t in texts]
