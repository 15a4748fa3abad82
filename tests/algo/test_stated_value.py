"""Where a reply writes (or would write) its stated value, and the expected value there, against
slow obvious references: a linear scan over the reply's tokens, a loop over the ten tokens."""

from __future__ import annotations

import math

import pytest
import torch

from algo.helpers import HOSTILE_REPLIES
from calibrl.algo.stated_value import (
    expected_tenths,
    forced_opening,
    reply_text,
    tokens_within,
    value_context_ids,
    value_tokens,
)
from calibrl.models import build_tokenizer


@pytest.fixture(params=["tiny", "byte"])
def tokenizer(request, byte_tok):
    """calibrl's tiny tokenizer (tags are tokens) and a byte-level BPE that splits tags into
    pieces glued to the text around them."""
    return build_tokenizer() if request.param == "tiny" else byte_tok


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _tokens_within_loop(tokenizer, ids, head):
    """The fewest leading tokens among those with the longest text that is a prefix of head,
    by trying every count."""
    best, best_len = 0, -1
    for n in range(len(ids) + 1):
        text = tokenizer.decode(ids[:n], skip_special_tokens=True,
                                clean_up_tokenization_spaces=False)
        if head.startswith(text) and len(text) > best_len:
            best, best_len = n, len(text)
    return best


def test_value_tokens_carry_the_prefix_they_follow(tokenizer):
    values = value_tokens(tokenizer)
    assert list(values.prefix) == _ids(tokenizer, "<confidence>0.")
    assert reply_text(tokenizer, [*values.prefix, values.ids[7]]) == "<confidence>0.7"


@pytest.mark.parametrize(("reply", "read_after"), HOSTILE_REPLIES)
def test_every_reply_gets_one_value_position(tokenizer, reply, read_after):
    values = value_tokens(tokenizer)
    sampled = _ids(tokenizer, reply) + [tokenizer.eos_token_id]  # EOS writes no text
    ids = value_context_ids(tokenizer, sampled, values.prefix)
    assert reply_text(tokenizer, ids) == read_after
    assert ids[-len(values.prefix):] == list(values.prefix)


def test_a_reply_that_wrote_its_value_is_read_where_it_sampled_the_digit(tokenizer):
    values = value_tokens(tokenizer)
    for digit in range(10):
        sampled = _ids(tokenizer, f"<analysis> I checked it. </analysis>\n<confidence>0.{digit}"
                                  "</confidence>")
        ids = value_context_ids(tokenizer, sampled, values.prefix)
        assert ids == sampled[:len(ids)] and sampled[len(ids)] == values.ids[digit]


def test_a_token_across_the_tag_start_is_written_again(glued_tok):
    # "<analysis", ">Ġhmm</analysis><", "confidence>0.", "9</confidence>": the second token
    # runs into the tag, so only the first is kept as sampled.
    ids = [10, 11, 12, 13, 14]
    assert tokens_within(glued_tok, ids, "<analysis> hmm</analysis>") == 1
    assert tokens_within(glued_tok, ids, "<analysis> hmm</analysis><confidence>0.9"
                                         "</confidence>") == 4  # EOS dropped


@pytest.mark.parametrize("reply", [r for r, _ in HOSTILE_REPLIES] + ["<analysis> x" * 300])
def test_the_bisection_finds_what_a_scan_finds(tokenizer, reply):
    ids = _ids(tokenizer, reply) + [tokenizer.eos_token_id]
    text = reply_text(tokenizer, ids)
    for cut in sorted({0, len(text) // 3, len(text) // 2, len(text) - 1, len(text)}):
        head = text[:max(cut, 0)]
        assert tokens_within(tokenizer, ids, head) == _tokens_within_loop(tokenizer, ids, head)


def test_a_huge_reply_without_a_tag_is_read_after_all_of_it(tokenizer):
    values = value_tokens(tokenizer)
    reply = "<analysis>" + "12 + 5 = 17, so I am fairly sure. " * 400
    ids = value_context_ids(tokenizer, _ids(tokenizer, reply), values.prefix)
    assert reply_text(tokenizer, ids) == reply + "</analysis>\n<confidence>0."


def test_forced_opening_closes_only_an_open_analysis():
    assert forced_opening("<analysis>a") == "</analysis>\n"
    assert forced_opening("<analysis>a</analysis>") == "\n"
    assert forced_opening("<analysis>a</analysis>\n") == ""
    assert forced_opening("") == ""
    assert forced_opening("</analysis><analysis>b") == "</analysis>\n"


def _expected_loop(row, ids, values):
    """Softmax over the ten value tokens' logits, one token at a time, then the mean value."""
    picked = [row[i] for i in ids]
    top = max(picked)
    weights = [math.exp(x - top) for x in picked]
    return sum(w * v for w, v in zip(weights, values, strict=True)) / sum(weights)


def test_expected_tenths_matches_a_loop_over_the_ten_tokens():
    values = value_tokens(build_tokenizer())
    torch.manual_seed(0)
    logits = torch.randn(16, 400) * 6  # [B, V]
    logits[0, list(values.ids)] = torch.tensor([1e30] + [-1e30] * 9)  # far apart, finite
    logits[1] = -float("inf")
    logits[1, list(values.ids)] = 0.0  # everything else impossible: uniform over the tenths
    logits[2, 5] = float("inf")  # a non-value token's logit does not matter
    mean, finite = expected_tenths(logits, values)
    assert finite.all()
    for b in range(16):
        want = _expected_loop(logits[b].double().tolist(), values.ids, values.values)
        assert float(mean[b]) == pytest.approx(want, abs=1e-6)
    assert float(mean[0]) == 0.0 and float(mean[1]) == pytest.approx(0.45)


def test_a_row_with_a_non_finite_value_logit_is_flagged_never_nan():
    values = value_tokens(build_tokenizer())
    logits = torch.zeros(4, 400)
    logits[0, values.ids[3]] = float("nan")
    logits[1, values.ids[9]] = float("inf")
    logits[2, list(values.ids)] = -float("inf")
    mean, finite = expected_tenths(logits, values)
    assert finite.tolist() == [False, False, False, True]
    assert torch.isfinite(mean).all() and ((mean >= 0) & (mean <= 0.9)).all()


def _read_after(text):
    """The reference text the value follows, by plain string operations (the rule of HOSTILE_REPLIES)."""
    start = text.find("<confidence>")
    if start >= 0:
        return text[:start] + "<confidence>0."
    if text.rfind("<analysis>") > text.rfind("</analysis>"):
        text += "</analysis>"
    return text + ("\n" if text and not text.endswith("\n") else "") + "<confidence>0."


def test_junk_token_sequences_get_a_position_after_their_text(tokenizer):
    values = value_tokens(tokenizer)
    vocab = len(tokenizer)
    generator = torch.Generator().manual_seed(1)
    tags = _ids(tokenizer, "<analysis></analysis><confidence>")
    for _ in range(40):  # random ids (split bytes, specials) with tag pieces among them
        junk = torch.randint(0, vocab, (int(torch.randint(0, 60, (1,), generator=generator)),),
                             generator=generator).tolist()
        sampled = [t for i in junk for t in ([i] if i % 5 else [i, *tags[:i % 7]])]
        ids = value_context_ids(tokenizer, sampled, values.prefix)
        assert reply_text(tokenizer, ids) == _read_after(reply_text(tokenizer, sampled))
