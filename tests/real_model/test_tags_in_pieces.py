"""Tags the real tokenizer writes in pieces (`<think>` -> `<`, `think`, `>`), sometimes glued to
their neighbours (`.<`, `>.`): where the span masks, the readout's state and the probe's chain
begin and end on its tokens, against references read from the tokenizer's own character
offsets. Only the tokenizer is loaded (under a second), yet the folder is the converted model's.
"""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from calibrl.algo.masks import span_loss_mask
from calibrl.algo.readout import state_position
from calibrl.probe.traces import chain_span
from calibrl.protocol.tags import (
    ANALYSIS_CLOSE,
    ANALYSIS_OPEN,
    ANSWER_CLOSE,
    ANSWER_OPEN,
    CONFIDENCE_CLOSE,
    CONFIDENCE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
)

pytestmark = pytest.mark.slow

TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE, ANALYSIS_OPEN, ANALYSIS_CLOSE,
        CONFIDENCE_OPEN, CONFIDENCE_CLOSE)


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    return AutoTokenizer.from_pretrained(smollm2_dir)


def tokens_with_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The tokenizer's ids of `text` and each one's characters, checked to tile the text."""
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(o) for o in encoding["offset_mapping"]]
    assert [s for s, _ in offsets] == [0] + [e for _, e in offsets[:-1]]  # no gap, no overlap
    assert offsets[-1][1] == len(text)
    return list(encoding["input_ids"]), offsets


def token_at(offsets: list[tuple[int, int]], char: int) -> int:
    return next(t for t, (start, end) in enumerate(offsets) if start <= char < end)


def test_every_tag_is_several_tokens(tokenizer):
    for tag in TAGS:
        assert len(tokenizer(tag, add_special_tokens=False)["input_ids"]) >= 2, tag


# (kind, completion, the tag the span starts at (None: the first token), the tag it ends with
# (None: no closed block, the whole completion trains)); each completion ends with the EOS token.
CASES = [
    ("answer", "<think>\nThe capital of Peru is Lima.\n</think>\n<answer>Lima</answer>",
     THINK_OPEN, ANSWER_CLOSE),
    ("answer", "Sure.<think>Peru's capital.</think> <answer>Lima</answer>.\nDone",
     THINK_OPEN, ANSWER_CLOSE),
    ("answer", "<think>Lima or Cusco.</think>\n<answer>Cusco</answer>\n<answer>Lima</answer>",
     THINK_OPEN, ANSWER_CLOSE),
    ("answer", "The answer: <answer>Lima</answer>", None, ANSWER_CLOSE),
    ("answer", "<think>\nThe capital of Peru is", None, None),
    ("confidence", "<analysis>\nLima is the capital.\n</analysis>\n<confidence>0.9</confidence>",
     ANALYSIS_OPEN, CONFIDENCE_CLOSE),
    ("confidence", "I am sure. <confidence>0.85</confidence>", CONFIDENCE_OPEN,
     CONFIDENCE_CLOSE),
    ("rlcr", "<think>Lima.</think><answer>Lima</answer>\n<analysis>sure</analysis>\n"
     "<confidence>0.7</confidence>", THINK_OPEN, CONFIDENCE_CLOSE),
]


@pytest.mark.parametrize("kind, text, start_tag, end_tag", CASES)
def test_span_masks_start_and_end_on_the_tokens_holding_the_tags(tokenizer, kind, text,
                                                                 start_tag, end_tag):
    ids, offsets = tokens_with_offsets(tokenizer, text)
    eos = tokenizer.eos_token_id
    mask = span_loss_mask(tokenizer, ids + [eos], kind)

    start = 0 if start_tag is None else text.find(start_tag)
    end = len(text) if end_tag is None else text.rfind(end_tag) + len(end_tag)
    # A token trains when one of its characters is in the span; the EOS right after a closed
    # span trains too (the model learns to stop), and after an open one, as its last token.
    expected = [int(s < end and e > start) for s, e in offsets]
    expected.append(int(end_tag is None or (end == len(text))))
    assert mask == expected

    trained = [t for t, m in enumerate(mask[:-1]) if m]
    assert trained[0] == token_at(offsets, start)  # the token holding the tag's first piece
    assert trained[-1] == token_at(offsets, end - 1)  # the one completing the closing tag
    assert trained == list(range(trained[0], trained[-1] + 1))


@pytest.mark.parametrize("text", [
    "<analysis>\nLima.\n</analysis>\n<confidence>0.9</confidence>",
    "Sure.<confidence>0.85</confidence>",
    "no value at all",
])
def test_the_readout_state_is_taken_at_the_token_completing_confidence(tokenizer, text):
    ids, offsets = tokens_with_offsets(tokenizer, text)
    at = text.find(CONFIDENCE_OPEN)
    expected = len(ids) if at == -1 else token_at(offsets, at + len(CONFIDENCE_OPEN) - 1) + 1
    assert state_position(tokenizer, ids) == expected


@pytest.mark.parametrize("text", [
    "<think>\nPeru is in South America.\nIts capital is Lima.\n</think>\n<answer>Lima</answer>",
    "<think>Peru is in South America.</think><answer>Lima</answer>",
    "<think>\nPeru is in South America, so Lima\n<answer>Lima</answer>",
])
def test_the_probe_s_chain_holds_no_piece_of_a_tag(tokenizer, text):
    ids, offsets = tokens_with_offsets(tokenizer, text)
    body_from = text.find(THINK_OPEN) + len(THINK_OPEN)
    body_to = text.find(THINK_CLOSE) if THINK_CLOSE in text else text.find(ANSWER_OPEN)
    # The tokens wholly inside the thought, less the blank ones that end it.
    inside = [t for t, (s, e) in enumerate(offsets) if s >= body_from and e <= body_to]
    while inside and not text[offsets[inside[-1]][0]:offsets[inside[-1]][1]].strip():
        inside.pop()
    start, end = chain_span(tokenizer, ids, THINK_OPEN, THINK_CLOSE)
    assert list(range(start, end)) == inside
    chain = tokenizer.decode(ids[start:end])
    assert chain == text[offsets[start][0]:offsets[end - 1][1]]
    assert chain.strip() and not any(piece in chain for piece in ("<", ">"))
