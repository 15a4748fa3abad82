"""Early answers: a trace cut after some words, the forced text, and the answer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.protocol.completions import (
    EARLY_ANSWER_TEXT,
    answer_trace,
    chain_word_ends,
    early_answer_split,
    trace_parts,
)
from calibrl.settings.probe import FORCED_TEXT

word = st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs", "Z", "Cc")),
               min_size=1, max_size=5)
step = st.lists(word, min_size=1, max_size=4).map(" ".join)


def obvious_context(steps: list[str], keep: int) -> str:
    """The shortest prefix of the steps' text that holds `keep` words, found by trying all."""
    body = "\n".join(steps)
    if keep == 0:
        return "<think>\n</think>\n<answer>"
    for cut in range(len(body) + 1):
        prefix = body[:cut]
        if len(prefix.split()) == keep and not prefix[-1:].isspace() and (
                cut == len(body) or body[cut].isspace()):
            return "<think>\n" + prefix + "\n</think>\n<answer>"
    raise AssertionError("no such prefix")


@given(st.lists(step, min_size=1, max_size=4), word, st.data())
def test_a_cut_keeps_the_first_words_and_asks_for_the_answer(steps, answer, data):
    trace = answer_trace(steps, answer)
    assert trace_parts(trace) == (steps, answer)
    n_words = sum(len(s.split()) for s in steps)
    assert len(chain_word_ends(trace)) == n_words
    keep = data.draw(st.integers(0, n_words))
    context, target = early_answer_split(trace, keep)
    assert context == obvious_context(steps, keep)
    assert context.endswith(EARLY_ANSWER_TEXT) and target == answer + "</answer>"
    if keep == n_words:
        assert context + target == trace
    assert early_answer_split(trace, n_words + 1) is None
    assert early_answer_split(trace, -1) is None


def test_text_not_laid_out_as_a_trace_has_no_cut():
    for text in ("", "<answer>1</answer>", "<think>\n1 + 2 = 3</think><answer>3</answer>",
                 "<think>\n1 + 2 = 3\n</think>\n<answer>3</answer> trailing"):
        assert trace_parts(text) is None and early_answer_split(text, 0) is None
        assert chain_word_ends(text) is None


def test_the_probe_asks_in_the_format_the_warm_up_teaches():
    assert FORCED_TEXT == EARLY_ANSWER_TEXT


def test_each_answer_is_shown_the_ones_after_it_never_its_own():
    from calibrl.protocol.reanswer import others_for_each, reanswer_prefill

    keys = ["a", "b", None, "d"]
    shown = others_for_each(keys, 2)
    for i, others in enumerate(shown):  # the slow, obvious version
        assert others == [keys[(i + 1) % 4], keys[(i + 2) % 4]]
    counts = [sum(o.count(k) for o in shown) for k in keys]
    assert counts == [2, 2, 2, 2]  # every answer shown equally often
    assert others_for_each(keys, 3)[0] == ["b", None, "d"]
    with pytest.raises(ValueError, match="more than 4"):
        others_for_each(keys, 4)
    assert reanswer_prefill(["x", None]) == (
        "<analysis>Again: <answer>x</answer> <answer>?</answer></analysis>\n")
