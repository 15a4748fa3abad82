"""StopChecker: full-text semantics, tags never cut, windowed decoding exact."""

from __future__ import annotations

import pytest
import torch

from calibrl.rollout.stopping import StopChecker, decode


def first_stop(checker, ids):
    return next((j for j in range(1, len(ids) + 1) if checker.finish(ids[:j]) == "stop"), None)


def test_a_tag_split_over_tokens_stops_on_its_last_token(tokenizer):
    ids = tokenizer.encode("<think> 3 + 5 = 8 </think> <answer> 3 + 5 </answer> then more text")
    checker = StopChecker(tokenizer, ["</answer>"], eos_token_ids=[], max_new_tokens=1000)
    end = first_stop(checker, ids)
    assert decode(tokenizer, ids[:end]).endswith("</answer>")
    assert "</answer>" not in decode(tokenizer, ids[:end - 1])
    pieces = [decode(tokenizer, [t]) for t in ids[:end]]
    assert "</answer>" not in pieces[-1]  # the tag spans several tokens, none was cut


@pytest.mark.parametrize("stop", ["</answer>", "确信", "→", "e", "\n\n"])
def test_windowed_check_fires_where_the_full_text_first_matches(tokenizer, stop):
    text = ("padding " * 40 + "确 信 → x " * 5 + "确信 and an arrow → then\n\n</answer> " + "tail " * 30)
    ids = tokenizer.encode(text)
    checker = StopChecker(tokenizer, [stop], eos_token_ids=[], max_new_tokens=10**6)
    assert len(ids) > 3 * checker.window
    # Called after every new token, the checker must fire exactly where the full text first
    # contains the stop string (it may forget occurrences that scrolled out of its window).
    full = next(j for j in range(1, len(ids) + 1) if stop in decode(tokenizer, ids[:j]))
    fast = next(j for j in range(1, len(ids) + 1) if checker.stop_string_in(ids[:j]))
    assert fast == full


def test_eos_and_length(tokenizer):
    checker = StopChecker(tokenizer, [], eos_token_ids=[tokenizer.eos_token_id], max_new_tokens=3)
    assert checker.finish([5]) is None
    assert checker.finish([5, tokenizer.eos_token_id]) == "stop"
    assert checker.finish([5, 6, 7]) == "length"
    assert checker.finish([5, 6, tokenizer.eos_token_id]) == "stop"  # stop wins over length


@pytest.mark.parametrize("stops", [["</answer>"], ["</analysis>", "确信"], ["→"], ["e"],
                                   ["</answer>", "</confidence>"], ["\n\n"], ["a "]])
def test_tokens_the_table_rules_out_never_complete_a_stop_string(tokenizer, stops):
    # The decode loop decodes a row's text only after a token `may_complete` marks; on random
    # sequences that must find every stop the full check finds, at the same token.
    checker = StopChecker(tokenizer, stops, eos_token_ids=[], max_new_tokens=10**6)
    table = checker.may_complete(len(tokenizer) + 5)
    assert table[len(tokenizer):].all()  # ids the tokenizer does not know: always checked
    if any(s[-1].isspace() for s in stops):
        assert table.all()  # a leading space may be lost when a token is decoded alone
    else:
        assert not table.all()  # the table does rule tokens out
    pieces = stops + ["</", "answer", ">", "确", "信", "→", " e", "a", " ", "b", "\n", "x"]
    generator = torch.Generator().manual_seed(len(stops[0]))
    hits = 0
    for _ in range(60):
        picks = torch.randint(0, len(pieces), (12,), generator=generator).tolist()
        ids = tokenizer.encode("".join(pieces[i] for i in picks))
        first = next((j for j in range(1, len(ids) + 1) if checker.stop_string_in(ids[:j])), None)
        if first is not None:  # the token that completes the first stop string
            assert table[ids[first - 1]]
            hits += 1
    assert hits > 0


def test_the_batch_check_agrees_with_finish_row_by_row(tokenizer):
    checker = StopChecker(tokenizer, ["</answer>"], eos_token_ids=[tokenizer.eos_token_id],
                          max_new_tokens=10**6)
    texts = ["<answer> 3 + 5 </answer> tail", "no tag here at all", "</ans", "x </answer>"]
    rows = [tokenizer.encode(t) + [tokenizer.eos_token_id] for t in texts]
    width = max(len(r) for r in rows)
    tokens = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    order = torch.tensor([2, 0, 3, 1])  # the batch holds the rows in another order
    # A row is checked until it stops, as in the decode loop (finish keeps saying "stop" after).
    ends = [first_stop(checker, r) or len(r) for r in rows]
    assert ends[0] < len(rows[0]) - 1  # "</answer>" ends the first row before its EOS
    for step in range(width):
        live = torch.tensor([step < ends[r] for r in order.tolist()])
        got = checker.stopped(tokens, order, live, step, len(tokenizer))
        want = [bool(alive) and checker.finish(rows[r][:step + 1]) == "stop"
                for r, alive in zip(order.tolist(), live.tolist(), strict=True)]
        assert got.tolist() == want
