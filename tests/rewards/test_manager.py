"""Batch reward manager: score on the last valid response token; hostile rows never stall."""

import time

import pytest
import torch

from calibrl.rewards import BatchRewardManager
from calibrl.tasks import Task, register_task
from calibrl.tasks.countdown import compute_score

VOCAB = ["<pad>", "Assistant:", " ", "<answer>", "</answer>", "1", "2", "3", "+", "*", "\n", "x"]


class CharTokenizer:
    """Enough of a tokenizer for the manager: ids -> text."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(VOCAB[i] for i in ids if not (skip_special_tokens and i == 0))

    def encode(self, text_pieces):
        return [VOCAB.index(p) for p in text_pieces]


TOK = CharTokenizer()
GT = {"target": 3, "numbers": [1, 2]}


def _pad_left(rows, width):
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r)
        mask[i, width - len(r):] = 1
    return ids, mask


def _pad_right(rows, width):
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


def test_scores_land_on_last_valid_response_token():
    prompts = [TOK.encode(["x", "\n", "Assistant:"]), TOK.encode(["Assistant:"])]
    responses = [
        TOK.encode([" ", "<answer>", "1", "+", "2", "</answer>"]),  # correct: 1.0
        TOK.encode(["<answer>", "1", "*", "2", "</answer>"]),  # wrong value: 0.1
    ]
    p_ids, p_mask = _pad_left(prompts, 5)
    r_ids, r_mask = _pad_right(responses, 8)
    out = BatchRewardManager(TOK).compute(p_ids, p_mask, r_ids, r_mask,
                                          ["countdown"] * 2, [GT, GT])
    expected = torch.zeros(2, 8)
    expected[0, 5], expected[1, 4] = 1.0, 0.1
    assert torch.equal(out.token_scores, expected)
    assert out.scores.tolist() == pytest.approx([1.0, 0.1])
    assert out.failures == {}


def test_matches_compute_score_on_decoded_strings():
    prompts = [TOK.encode(["Assistant:"])] * 3
    responses = [TOK.encode(["<answer>", "3", "</answer>"]), TOK.encode(["x"]),
                 TOK.encode(["<answer>", "1", "+", "2", "</answer>", "\n", "x"])]
    p_ids, p_mask = _pad_left(prompts, 2)
    r_ids, r_mask = _pad_right(responses, 7)
    out = BatchRewardManager(TOK).compute(p_ids, p_mask, r_ids, r_mask, ["countdown"] * 3, [GT] * 3)
    for i in range(3):
        text = TOK.decode(prompts[i] + responses[i])
        assert out.scores[i].item() == pytest.approx(compute_score(text, GT))


def test_empty_response_row_stays_zero():
    p_ids, p_mask = _pad_left([TOK.encode(["Assistant:"])], 1)
    r_ids = torch.zeros(1, 3, dtype=torch.long)
    out = BatchRewardManager(TOK).compute(p_ids, p_mask, r_ids, torch.zeros_like(r_ids),
                                          ["countdown"], [GT])
    assert torch.count_nonzero(out.token_scores) == 0


class _SlowTask(Task):
    name = "test_slow_task"
    failure_score = -1.0

    def make_prompt(self, ground_truth, style=None):
        return []

    def check(self, answer_text, ground_truth):
        return False

    def score(self, solution_str, ground_truth):
        if "x" in solution_str:
            while True:  # a scorer that never returns on this row
                pass
        if "3" in solution_str:
            raise RuntimeError("scorer bug")
        return float("nan") if "*" in solution_str else 0.5


register_task(_SlowTask())


@pytest.mark.timeout(20)
def test_hostile_rows_get_failure_score_without_stalling_the_batch():
    prompts = [TOK.encode(["Assistant:"])] * 4
    responses = [TOK.encode(["x"]), TOK.encode(["3"]), TOK.encode(["1", "*"]), TOK.encode(["1"])]
    p_ids, p_mask = _pad_left(prompts, 1)
    r_ids, r_mask = _pad_right(responses, 2)
    start = time.monotonic()
    out = BatchRewardManager(TOK, timeout_s=0.2).compute(
        p_ids, p_mask, r_ids, r_mask, ["test_slow_task"] * 4, [{}] * 4)
    assert time.monotonic() - start < 5
    assert out.scores.tolist() == [-1.0, -1.0, -1.0, 0.5]
    assert set(out.failures) == {0, 1, 2}
    assert out.failures[0].startswith("timeout")
    assert not torch.isnan(out.token_scores).any()


def test_unknown_data_source_is_a_clear_error():
    from calibrl.errors import UserError

    p_ids, p_mask = _pad_left([TOK.encode(["Assistant:"])], 1)
    r_ids, r_mask = _pad_right([TOK.encode(["1"])], 1)
    with pytest.raises(UserError, match="unknown data_source 'nope'; known: .*countdown"):
        BatchRewardManager(TOK).compute(p_ids, p_mask, r_ids, r_mask, ["nope"], [GT])
