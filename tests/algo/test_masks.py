"""Span masks on real tokenizers: split and glued tags, EOS, non-canonical ids, prompt tags."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from algo.helpers import encode
from calibrl.algo.masks import (
    CharSpan,
    answer_char_span,
    char_span,
    confidence_char_span,
    rlcr_char_span,
    span_loss_mask,
    token_char_offsets,
)

# ------------------------------------------------------------------ character spans, by hand

THINK_ANSWER = "pre <think> a </think> <answer> 3 </answer> post"


@pytest.mark.parametrize(
    "text, span",
    [
        (THINK_ANSWER, (4, THINK_ANSWER.index(" post"))),
        ("x <answer>1</answer>", (0, 20)),  # no <think>: from the first generated character
        ("<think> t </think> no answer", (0, 28)),  # no answer block: the whole completion
        ("<think> t <answer> 1 + 2", (0, 24)),  # unclosed (truncated): the whole completion
        ("<answer>1</answer> <think> late", (0, 18)),  # <think> after the answer does not start it
        ("<think><answer>1</answer><answer>2</answer>!", (0, 43)),  # the last closing tag ends it
        (
            "</answer> <think> x <answer>1",
            (0, 29),
        ),  # a closing tag before the opening one: unclosed
    ],
)
def test_answer_char_span(text, span):
    assert answer_char_span(text)[:2] == span


@pytest.mark.parametrize(
    "text, span",
    [
        ("Sure. <analysis> a </analysis> <confidence> 0.7 </confidence>\n", (6, 61)),
        ("Sure. <confidence>0.7</confidence>", (6, 34)),  # no analysis: starts at <confidence>
        ("<confidence>0.7</confidence> <analysis> late", (0, 28)),  # analysis after: ignored
        ("<analysis> a </analysis> no confidence", (0, 38)),  # no block: the whole completion
        ("<analysis> a <confidence> 0.", (0, 28)),
    ],
)
def test_confidence_char_span(text, span):
    assert confidence_char_span(text)[:2] == span


def test_rlcr_char_span_joins_both_turns():
    text = "ok <think> t </think><answer>3</answer><analysis>a</analysis><confidence>0.6</confidence> bye"
    assert rlcr_char_span(text) == CharSpan(3, text.index(" bye"), True)
    assert rlcr_char_span("<think> t </think><answer>3</answer>") == CharSpan(0, 36, False)


def ref_span(text, kind):
    """Slow reference with regexes."""
    open_tag, close_tag, starts = {
        "answer": ("<answer>", "</answer>", ["<think>"]),
        "confidence": ("<confidence>", "</confidence>", ["<analysis>", "<confidence>"]),
        "rlcr": ("<confidence>", "</confidence>", ["<think>"]),
    }[kind]
    first_open = re.search(re.escape(open_tag), text)
    closes = [m.end() for m in re.finditer(re.escape(close_tag), text)]
    if not first_open or not closes or closes[-1] - len(close_tag) < first_open.end():
        return 0, len(text)
    for tag in starts:
        m = re.search(re.escape(tag), text)
        if m and m.start() <= first_open.start():
            return m.start(), closes[-1]
    return 0, closes[-1]


PIECES = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<analysis>",
    "</analysis>",
    "<confidence>",
    "</confidence>",
    "<",
    ">",
    "/",
    "think",
    "answer",
    " ",
    "0.5",
    "x\n",
]


@given(
    st.lists(st.sampled_from(PIECES), max_size=14),
    st.sampled_from(["answer", "confidence", "rlcr"]),
)
def test_char_span_matches_regex_reference(pieces, kind):
    text = "".join(pieces)
    assert char_span(text, kind)[:2] == ref_span(text, kind)


# ------------------------------------------------------------------ offsets on real tokenizers

SAMPLES = [
    "Hi <think> ok</think><answer>1+2</answer>",
    "<analysis> The answer looks right. </analysis> <confidence> 0.8 </confidence>",
    "café naïve 置信度 – done. 🙂 <think>x</think>",
    "  leading spaces and\ttabs\n\n<answer>(3 * 4) - 2</answer>\n",
]


@pytest.mark.parametrize("tok_name", ["byte_tok", "metaspace_tok"])
@pytest.mark.parametrize("text", SAMPLES)
def test_offsets_cover_the_decoded_text(request, tok_name, text):
    tok = request.getfixturevalue(tok_name)
    ids = encode(tok, text)
    decoded, offsets = token_char_offsets(tok, ids)
    assert decoded == tok.decode(ids)
    assert len(offsets) == len(ids) and offsets[0][0] == 0 and offsets[-1][1] == len(decoded)
    for (s0, e0), (s1, e1) in zip(offsets, offsets[1:], strict=False):
        assert s0 <= e0 and (e0 == s1 or (s0, e0) == (s1, e1))  # contiguous, or a shared group


def test_non_canonical_ids_are_decoded_not_retokenised(byte_tok):
    text = "<think>x</think><answer>1</answer>"
    ids = [i for ch in text for i in encode(byte_tok, ch)]  # one token per character
    assert ids != encode(byte_tok, text)
    decoded, offsets = token_char_offsets(byte_tok, ids)
    assert decoded == text
    assert [decoded[s:e] for s, e in offsets] == list(text)


def test_multibyte_character_split_over_tokens_shares_its_span(byte_tok):
    ids = encode(byte_tok, "a置b")
    decoded, offsets = token_char_offsets(byte_tok, ids)
    assert decoded == "a置b" and len(ids) > 3  # 置 is three byte tokens here
    assert [decoded[s:e] for s, e in offsets] == ["a"] + ["置"] * (len(ids) - 2) + ["b"]


# ------------------------------------------------------------------ token masks


def expected_mask(tok, ids, kind):
    """Slow reference: decode prefixes (exact for ASCII) and test each token's characters."""
    text = tok.decode(ids)
    start, end = ref_span(text, kind)
    mask = []
    for t in range(len(ids)):
        s, e = len(tok.decode(ids[:t])), len(tok.decode(ids[: t + 1]))
        mask.append(int(s < end and e > start))
    return mask


def test_glued_and_split_tags_by_hand(glued_tok):
    names = [
        "Ok",
        ".<th",
        "ink>",
        "Ġ2",
        "</",
        "think><ans",
        "wer>",
        "1+1",
        "</answer>Ċ",
        "Ċ",
        "<|eos|>",
    ]
    ids = glued_tok.convert_tokens_to_ids(names)
    assert glued_tok.decode(ids) == "Ok.<think> 2</think><answer>1+1</answer>\n\n<|eos|>"
    # ".<th" holds the start of <think>, "</answer>\n" its end: both train; "Ok" and the trailing
    # "\n" do not; the EOS does not directly follow the span, so it does not train either.
    assert span_loss_mask(glued_tok, ids, "answer") == [0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    ids_eos = glued_tok.convert_tokens_to_ids(names[:9] + ["<|eos|>"])
    assert span_loss_mask(glued_tok, ids_eos, "answer") == [0, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    # the glued "think><ans" token is both a think end and an answer start
    conf = glued_tok.convert_tokens_to_ids(
        ["Ok", "<analysis", ">Ġhmm</analysis><", "confidence>0.", "9</confidence>", "<|eos|>"]
    )
    assert span_loss_mask(glued_tok, conf, "confidence") == [0, 1, 1, 1, 1, 1]
    assert span_loss_mask(glued_tok, conf, "confidence", eos_ids=[]) == [0, 1, 1, 1, 1, 0]


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Hi <think> ok</think><answer>1+2</answer>", "answer"),
        ("Hi <think> ok</think><answer>1+2</answer> trailing words", "answer"),
        ("no tags at all here", "answer"),
        (
            "Sure. <analysis> The answer looks right. </analysis> <confidence> 0.8 </confidence> bye",
            "confidence",
        ),
        ("Sure. <confidence> 0.8 </confidence>", "confidence"),
        (
            "<think> I add </think><answer> 3 </answer><analysis> ok </analysis><confidence>0.25</confidence>x",
            "rlcr",
        ),
    ],
)
@pytest.mark.parametrize("tok_name", ["byte_tok", "metaspace_tok"])
def test_mask_matches_slow_reference(request, tok_name, text, kind):
    tok = request.getfixturevalue(tok_name)
    ids = encode(tok, text)
    assert span_loss_mask(tok, ids, kind, eos_ids=[]) == expected_mask(tok, ids, kind)


@given(
    st.lists(st.sampled_from(PIECES), max_size=12),
    st.sampled_from(["answer", "confidence", "rlcr"]),
    st.booleans(),
)
def test_random_tag_soup_matches_reference(byte_tok, pieces, kind, char_level):
    text = "".join(pieces)
    ids = [i for ch in text for i in encode(byte_tok, ch)] if char_level else encode(byte_tok, text)
    assert span_loss_mask(byte_tok, ids, kind, eos_ids=[]) == expected_mask(byte_tok, ids, kind)


def test_eos_trains_only_right_after_a_closed_span(byte_tok):
    eos = byte_tok.eos_token_id
    closed = encode(byte_tok, "x <think> a </think><answer>3</answer>") + [eos]
    mask = span_loss_mask(byte_tok, closed, "answer")
    assert mask[-1] == 1 and mask[0] == 0
    unclosed = encode(byte_tok, "x <think> a") + [eos]
    assert span_loss_mask(byte_tok, unclosed, "answer") == [1] * len(unclosed)


def test_tags_in_the_prompt_never_count(byte_tok):
    # The turn-2 context ends with an opening tag that the completion closes: the completion alone
    # holds no complete block, so it trains entirely rather than from a tag it did not write.
    completion = encode(byte_tok, " 0.7 </confidence>")
    assert span_loss_mask(byte_tok, completion, "confidence") == [1] * len(completion)


def test_unknown_kind_is_refused(byte_tok):
    with pytest.raises(ValueError):
        span_loss_mask(byte_tok, encode(byte_tok, "x"), "bogus")


def test_empty_completion(byte_tok):
    assert token_char_offsets(byte_tok, []) == ("", [])
    assert span_loss_mask(byte_tok, [], "answer") == []


class CharTokenizer:
    """A tokenizer without a Rust backend: one id per character of a fixed alphabet."""

    alphabet = "<>/thinkaswerx 0.5"
    eos_token_id = len(alphabet)

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=None):
        return "".join("<eos>" if i == self.eos_token_id else self.alphabet[i] for i in ids)


def test_tokenizers_without_a_backend_use_decode():
    tok = CharTokenizer()
    text = "xx<think>a</think><answer>5</answer>"
    ids = [tok.alphabet.index(c) for c in text] + [tok.eos_token_id]
    assert token_char_offsets(tok, ids)[0] == text + "<eos>"
    assert span_loss_mask(tok, ids, "answer") == [0, 0] + [1] * (len(text) - 2) + [1]
