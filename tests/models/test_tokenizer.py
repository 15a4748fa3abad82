"""The tiny tokenizer: exact round trips, single-token units, ChatML template."""

from __future__ import annotations

import functools
import json
import string

from hypothesis import given
from hypothesis import strategies as st

from calibrl.models.corpus import CONFIDENCE_QUESTION, CONFIDENCE_QUESTIONS
from calibrl.models.tokenizer import (
    IM_END,
    IM_START,
    PAD_TOKEN,
    build_core_tokenizer,
    build_tokenizer,
)
from calibrl.protocol.tags import TAGS
from calibrl.tasks.countdown import COUNTDOWN, compute_score, extract_solution
from calibrl.tasks.countdown.prompts import SYSTEM_PROMPT, user_prompt

THINK = "<think>\n12 + 5 = 17\n17 * 3 = 51\n</think>\n<answer>(12 + 5) * 3</answer>"


@functools.cache
def tok():
    return build_tokenizer()


def roundtrip(text: str) -> str:
    return tok().decode(tok()(text).input_ids)


def test_system_texts_round_trip_exactly():
    texts = [
        SYSTEM_PROMPT,
        user_prompt([12, 5, 3], 51),
        user_prompt([1, 20, 999, 0, 7, 100], 1000),
        THINK,
        "<think>\nLet me try 96 / 4 = 24\n24 - 3 = 21\nThat works.\n</think>\n"
        "<answer> (96 / 4) - 3 </answer>",
        *CONFIDENCE_QUESTIONS,
        "<analysis>The equation uses each number once.</analysis>\n<confidence>0.7</confidence>",
    ]
    texts += [f"<confidence>{c}</confidence>" for c in ("0.05", "0.75", "1.0", "0", "1", ".5")]
    for text in texts:
        assert roundtrip(text) == text


@given(
    st.lists(
        st.one_of(
            st.integers(0, 10**12).map(str),
            st.sampled_from(list("+-*/()") + [" ", " + ", " = ", ".", "  ", "\n"]),
        ),
        max_size=30,
    ).map("".join)
)
def test_random_equations_round_trip(text):
    assert roundtrip(text) == text


@given(st.text(alphabet=string.printable, max_size=60))
def test_any_ascii_text_round_trips(text):
    assert roundtrip(text) == text


@given(st.text(max_size=30))
def test_any_unicode_text_round_trips(text):
    # Byte-level BPE with no normaliser: even emoji, lone combining marks and \r survive.
    assert roundtrip(text) == text


def test_numbers_up_to_999_are_single_tokens_and_never_carry_a_space():
    vocab = tok().get_vocab()
    for n in range(1000):
        assert tok().tokenize(str(n)) == [str(n)]
    # With the space attached, " 12" would be a second spelling of every number.
    assert tok().tokenize(" equals 12") == ["Ġequals", "Ġ", "12"]
    assert "Ġ12" not in vocab


@given(st.text(alphabet=string.digits, min_size=1, max_size=40))
def test_digit_runs_split_into_pieces_of_three(digits):
    pieces = tok().tokenize(digits)
    assert pieces == [digits[i : i + 3] for i in range(0, len(digits), 3)]


def test_tags_are_single_tokens_kept_by_skip_special_tokens():
    for tag in TAGS:
        assert tok().tokenize(tag) == [tag]
        assert tok().tokenize(f"x{tag}y") == ["x", tag, "y"]
    ids = tok()(f"{IM_START}assistant\n{THINK}{IM_END}").input_ids
    assert tok().decode(ids, skip_special_tokens=True) == "assistant\n" + THINK


def test_equation_units():
    assert tok().tokenize("12 + 5 = 17") == ["12", "Ġ+Ġ", "5", "Ġ=Ġ", "17"]
    assert len(tok().tokenize(THINK)) == 25


def test_special_tokens():
    t = tok()
    assert t.eos_token == IM_END and t.pad_token == PAD_TOKEN
    assert t.pad_token_id != t.eos_token_id
    for special in (IM_START, IM_END, PAD_TOKEN):
        assert t.tokenize(special) == [special]
    assert t("abc").input_ids == t("abc", add_special_tokens=False).input_ids  # no BOS/EOS added


def test_chat_template_is_chatml():
    messages = COUNTDOWN.make_prompt({"target": 51, "numbers": [12, 5, 3]})
    text = tok().apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        f"{IM_START}system\n{SYSTEM_PROMPT}{IM_END}\n"
        f"{IM_START}user\n{user_prompt([12, 5, 3], 51)}{IM_END}\n"
        f"{IM_START}assistant\n"
    )
    without = tok().apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert text == without + f"{IM_START}assistant\n"
    encoded = tok().apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    assert encoded["input_ids"] == tok()(text).input_ids


def test_two_turn_conversation_and_reward_on_decoded_text():
    gt = {"target": 51, "numbers": [12, 5, 3]}
    messages = COUNTDOWN.make_prompt(gt) + [
        {"role": "assistant", "content": THINK},
        {"role": "user", "content": CONFIDENCE_QUESTION},
    ]
    prompt = tok().apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.count(f"{IM_START}assistant\n") == 2
    assert roundtrip(prompt) == prompt
    # Turn 1 as the reward sees it: decoded prompt + response, special tokens kept.
    turn1 = tok().apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    decoded = tok().decode(tok()(turn1 + THINK + IM_END).input_ids)
    assert extract_solution(decoded) == "(12 + 5) * 3"
    assert compute_score(decoded, gt) == 1.0


def test_build_is_deterministic():
    first, second = (
        json.loads(build_core_tokenizer().to_str()),
        json.loads(tok().backend_tokenizer.to_str()),
    )
    for part in ("model", "pre_tokenizer", "normalizer", "decoder", "added_tokens"):
        assert first[part] == second[part]


def test_hostile_ids_decode_without_crashing():
    t = tok()
    ids = list(range(len(t)))[::-1]
    assert isinstance(t.decode(ids), str)
    # A lone UTF-8 continuation byte decodes to the replacement character, not an error.
    lone = t.convert_tokens_to_ids(["Ã"])
    assert t.decode(lone) == "\ufffd"
