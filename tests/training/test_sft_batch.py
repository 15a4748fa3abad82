"""SFT tensors: labels only on the last message, prefix checks, batching, loss, schedule."""

from __future__ import annotations

import functools
import math
import random

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.models import IM_END, build_tokenizer
from calibrl.settings.sft import SFTMix
from calibrl.tasks.countdown.data import examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.training.sft import lr_factor
from calibrl.training.sft_batch import (
    IGNORE,
    TokenizedConversation,
    bucket_batches,
    collate,
    token_mean_loss,
    tokenize_conversation,
)
from calibrl.training.sft_data import build_conversations


@functools.cache
def tok():
    return build_tokenizer()


@functools.cache
def conversations():
    train, _ = generate_countdown(30, num_numbers=(3, 3), max_number=20, seed=2, test_size=0)
    return build_conversations(examples_from_instances(train, "train"), SFTMix(),
                               random.Random(0))


def test_labels_cover_exactly_the_last_message_and_its_eos():
    kinds = set()
    for conv in conversations():
        kinds.add(conv.kind)
        row = tokenize_conversation(tok(), conv.messages)
        full = tok().apply_chat_template(conv.messages, tokenize=False)
        full_ids = tok()(full, add_special_tokens=False)["input_ids"]
        assert row.input_ids == full_ids[: len(row.input_ids)]
        assert len(row.labels) == len(row.input_ids)
        start = next(i for i, label in enumerate(row.labels) if label != IGNORE)
        assert all(label == IGNORE for label in row.labels[:start])
        assert row.labels[start:] == row.input_ids[start:]
        assert row.input_ids[-1] == tok().eos_token_id
        trained = tok().decode(row.input_ids[start:])
        assert trained == conv.messages[-1]["content"] + IM_END
        # Everything before the labels is exactly what the model is prompted with.
        prompt = tok().apply_chat_template(conv.messages[:-1], tokenize=False,
                                           add_generation_prompt=True)
        assert tok().decode(row.input_ids[:start]) == prompt
    assert kinds == {"answer", "confidence", "rlcr"}


def test_a_reply_prefix_is_context_not_target():
    train, _ = generate_countdown(20, num_numbers=(3, 3), max_number=20, seed=2, test_size=0)
    convs = build_conversations(examples_from_instances(train, "train"), SFTMix(0, 0, 0, early=1),
                                random.Random(0))
    for conv in convs:
        row = tokenize_conversation(tok(), conv.messages, conv.reply_prefix)
        start = next(i for i, label in enumerate(row.labels) if label != IGNORE)
        prompt = tok().apply_chat_template(conv.messages[:-1], tokenize=False,
                                           add_generation_prompt=True)
        assert tok().decode(row.input_ids[:start]) == prompt + conv.reply_prefix
        assert (tok().decode(row.input_ids[start:])
                == conv.messages[-1]["content"][len(conv.reply_prefix):] + IM_END)
    with pytest.raises(UserError, match="reply prefix"):
        tokenize_conversation(tok(), convs[0].messages, "not the start")


def test_a_template_that_breaks_the_prefix_or_the_eos_is_refused():
    messages = conversations()[0].messages
    with pytest.raises(UserError, match="last message"):
        tokenize_conversation(tok(), messages[:-1])
    shifty = build_tokenizer()
    shifty.chat_template = ("{%- if add_generation_prompt %}x{%- endif %}"
                            + shifty.chat_template)
    with pytest.raises(UserError, match="prefix"):
        tokenize_conversation(shifty, messages)
    no_eos = build_tokenizer()
    no_eos.chat_template = ("{%- for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}"
                            "{%- endfor %}{%- if add_generation_prompt %}assistant: {%- endif %}")
    with pytest.raises(UserError, match="eos"):
        tokenize_conversation(no_eos, messages)


@given(st.lists(st.integers(1, 300), max_size=200), st.integers(1, 2000), st.integers(0, 5))
def test_bucket_batches_use_every_row_once_within_the_budget(lengths, budget, seed):
    batches = bucket_batches(lengths, budget, random.Random(seed), pool_batches=4)
    flat = sorted(i for batch in batches for i in batch)
    assert flat == list(range(len(lengths)))
    for batch in batches:
        assert batch
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= budget or len(batch) == 1


def test_bucket_batches_group_similar_lengths():
    rng = random.Random(0)
    lengths = [rng.choice((50, 400)) for _ in range(400)]
    for batch in bucket_batches(lengths, 4000, random.Random(1)):
        assert len({lengths[i] for i in batch}) == 1 or len(batch) < 3


def test_collate_pads_on_the_right():
    rows = [TokenizedConversation([5, 6, 7], [IGNORE, 6, 7]), TokenizedConversation([8], [8])]
    batch = collate(rows, pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["labels"].tolist() == [[IGNORE, 6, 7], [8, IGNORE, IGNORE]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def test_token_mean_loss_matches_a_loop():
    torch.manual_seed(0)
    logits = torch.randn(3, 6, 11)
    labels = torch.randint(0, 11, (3, 6))
    labels[0, :4] = IGNORE
    labels[2, :] = IGNORE
    terms = []
    for b in range(3):
        for t in range(5):
            if labels[b, t + 1] != IGNORE:
                terms.append(-F.log_softmax(logits[b, t], -1)[labels[b, t + 1]])
    expected = torch.stack(terms).mean()
    assert torch.allclose(token_mean_loss(logits, labels), expected, atol=1e-6)
    assert token_mean_loss(logits, torch.full_like(labels, IGNORE)).item() == 0.0


def test_lr_factor():
    kw = {"warmup_steps": 10, "min_lr_ratio": 0.1}
    assert lr_factor(0, 0.0, scheduler="cosine", **kw) == pytest.approx(0.1)
    assert lr_factor(9, 0.0, scheduler="cosine", **kw) == pytest.approx(1.0)
    assert lr_factor(50, 0.5, scheduler="cosine", **kw) == pytest.approx(0.1 + 0.9 * 0.5)
    assert lr_factor(50, 1.0, scheduler="cosine", **kw) == pytest.approx(0.1)
    assert lr_factor(50, 7.0, scheduler="cosine", **kw) == pytest.approx(0.1)
    assert lr_factor(4, 0.9, scheduler="constant_with_warmup", **kw) == pytest.approx(0.5)
    assert lr_factor(50, 0.9, scheduler="constant_with_warmup", **kw) == 1.0
    for p in (0.1, 0.3, 0.77):
        slow = 0.1 + 0.9 * (1 + math.cos(math.pi * p)) / 2
        assert lr_factor(20, p, scheduler="cosine", **kw) == pytest.approx(slow)
    assert lr_factor(0, 0.0, scheduler="cosine", warmup_steps=0, min_lr_ratio=0.0) == 1.0
