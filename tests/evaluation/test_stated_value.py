"""The expected stated value in `calibrl eval`: each answer's, against a slow loop over one
sequence at a time and the ten tokens; never NaN, whatever the reply; not available with a
reason, never a crash; and `confidence_reading` choosing the headline."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import calibrl.evaluation.stated_value as stated_module
from algo.helpers import HOSTILE_REPLIES
from calibrl.algo.readout import last_states, state_sequences
from calibrl.algo.stated_value import value_tokens
from calibrl.cli.main import main
from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.evaluation.records import EXPECTED_UNAVAILABLE
from calibrl.evaluation.run import evaluate
from calibrl.evaluation.stated_value import (
    NO_MODEL,
    NO_TURN,
    expected_at_last,
    stated_expected_fields,
    turn2_reads,
)
from calibrl.models import build_tiny_model, build_tokenizer
from calibrl.rollout.rollouts import encode_messages
from calibrl.settings import EvalSection
from calibrl.tasks.countdown import COUNTDOWN
from calibrl.tasks.files import write_examples

# Every hostile reply of the algo tests, a huge one and one of stray bytes.
REPLIES = [reply for reply, _ in HOSTILE_REPLIES] + [
    "<analysis>" + "12 + 5 = 17, so I am fairly sure. " * 150, "\x00\x01\ufffd<\x7f>0.9"]
SMALL = dict(samples=2, temperature=1.0, max_answer_tokens=6, max_confidence_tokens=6,
             bootstrap=0)


@pytest.fixture(scope="module")
def tiny():
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    return build_tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2).eval(), tokenizer


def _tree(tokenizer, replies, has_turn=True):
    """A rollout tree's shape as the expected value reads it: one prompt, one answer per reply,
    each with one confidence sample (context: a confidence question about an answer)."""
    context = encode_messages(tokenizer, [
        {"role": "user", "content": "Make 3 from 1 and 2."},
        {"role": "assistant", "content": "<answer>1 + 2</answer>"},
        {"role": "user", "content": "How likely is it that your answer is correct?"}])
    answers = [SimpleNamespace(confidences=[SimpleNamespace(
        context_ids=context, token_ids=tokenizer(r, add_special_tokens=False)["input_ids"])])
        for r in replies]
    return SimpleNamespace(spec=SimpleNamespace(has_confidence_turn=has_turn),
                           prompts=[SimpleNamespace(answers=answers)])


def _loop(model, sequence, values):
    """The model on one unpadded sequence; softmax over the ten tokens, one at a time."""
    with torch.no_grad():
        row = model(input_ids=torch.tensor([sequence])).logits[0, -1].double().tolist()
    picked = [row[i] for i in values.ids]
    weights = [math.exp(x - max(picked)) for x in picked]
    return sum(w * v for w, v in zip(weights, values.values, strict=True)) / sum(weights)


def test_expected_values_match_one_sequence_at_a_time(tiny):
    model, tokenizer = tiny
    values = value_tokens(tokenizer)
    tree = _tree(tokenizer, REPLIES)
    sequences = stated_module.value_sequences(tokenizer, tree, values)
    means, finite, _ = expected_at_last(model, sequences, values, batch_size=3)  # mixed lengths
    assert all(finite) and len(means) == len(REPLIES)
    for sequence, mean in zip(sequences, means, strict=True):
        assert mean == pytest.approx(_loop(model, sequence, values), abs=1e-5)


def test_one_pass_gives_the_readouts_states_of_their_own_pass(tiny, monkeypatch):
    """Replies that write `<confidence>` share the value pass; the others (none written, or
    written in pieces the value pass writes otherwise) get a pass of their own."""
    model, tokenizer = tiny
    replies = [*REPLIES, f"<analysis>sure</analysis>{tokenizer.eos_token}"]  # value pass drops EOS
    tree = _tree(tokenizer, replies)
    expected_states = last_states(model, state_sequences(tokenizer, tree))  # [N, H]
    passes = []
    monkeypatch.setattr(stated_module, "last_states",
                        lambda m, seqs: passes.append(len(seqs)) or last_states(m, seqs))
    fields, states = turn2_reads(model, tokenizer, tree, readout=True)
    assert fields == stated_expected_fields(model, tokenizer, tree)
    np.testing.assert_allclose(states, expected_states, rtol=1e-4, atol=1e-5)
    values = value_tokens(tokenizer)
    own = sum(v[:len(s)] != s for v, s in zip(stated_module.value_sequences(tokenizer, tree, values),
                                              state_sequences(tokenizer, tree), strict=True))
    assert 0 < own < len(replies) and passes == [own]  # both kinds are among the replies
    monkeypatch.undo()
    none_fields, none_states = turn2_reads(None, tokenizer, tree, readout=False)
    assert none_states is None and {f[EXPECTED_UNAVAILABLE] for f in none_fields} == {NO_MODEL}


def test_every_hostile_reply_gets_a_finite_expected_value(tiny):
    model, tokenizer = tiny
    fields = stated_expected_fields(model, tokenizer, _tree(tokenizer, REPLIES))
    assert len(fields) == len(REPLIES)
    for f in fields:
        assert set(f) == {"stated_expected"} and math.isfinite(f["stated_expected"])
        assert 0.0 <= f["stated_expected"] <= 0.9


def test_without_a_model_a_turn_or_one_token_tenths_it_is_not_available(tiny, monkeypatch):
    model, tokenizer = tiny
    tree = _tree(tokenizer, ["<confidence>0.5</confidence>"] * 3)
    assert stated_expected_fields(None, tokenizer, tree) == [
        {"stated_expected": None, EXPECTED_UNAVAILABLE: NO_MODEL}] * 3
    assert stated_expected_fields(model, tokenizer, _tree(tokenizer, ["x"], False)) == [
        {"stated_expected": None, EXPECTED_UNAVAILABLE: NO_TURN}]

    def refuse(_tokenizer):
        raise UserError("the tokenizer does not write 0.0 as '0.' and one token")

    monkeypatch.setattr(stated_module, "value_tokens", refuse)
    fields = stated_expected_fields(model, tokenizer, tree)
    assert {f[EXPECTED_UNAVAILABLE] for f in fields} == {
        "the tokenizer does not write 0.0 as '0.' and one token"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    gts = [{"target": 3 + i, "numbers": [1, 2, i][: 2 + i % 2]} for i in range(5)]
    return write_examples(tmp_path_factory.mktemp("ev") / "test.parquet", [
        TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "test")
        for i, gt in enumerate(gts)])


def _rows(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_eval_writes_the_expected_value_and_the_setting_switches_the_headline(
        tiny_model_dir, data, tmp_path, capsys):
    sampled = evaluate(tiny_model_dir, data, tmp_path / "s", EvalSection(**SMALL))
    rows = _rows(tmp_path / "s")
    assert all(0.0 <= r["stated_expected"] <= 0.9 for r in rows)
    assert sampled["confidence_reading"] == "sampled"
    beside = sampled["baselines"]["stated_expected"]
    assert beside["reading"] == "stated (expected value)" and beside["ece"] is not None
    assert beside["mean_confidence"] == pytest.approx(
        sum(r["stated_expected"] for r in rows) / len(rows))
    expected = evaluate(tiny_model_dir, data, tmp_path / "e",
                        EvalSection(**SMALL, confidence_reading="expected"))
    assert _rows(tmp_path / "e") == rows  # one seed: the same answers, read two ways
    assert expected["confidence_reading"] == "expected"
    # The random model seldom writes a value that parses; the expected value is there anyway.
    assert expected.get("calibration_unavailable") is None
    for key in ("ece", "brier", "auroc", "aurc", "mean_confidence"):
        assert expected[key] == beside[key]
    assert expected["within_group_auroc"] == beside["within_group_auroc"]
    assert expected["unparsable_confidence_rate"] == sampled["unparsable_confidence_rate"]
    assert expected["baselines"]["stated_sampled"]["reading"] == "stated (sampled)"
    assert "stated_expected" not in expected["baselines"]
    main(["compare", str(tmp_path / "s"), str(tmp_path / "e")])
    printed = capsys.readouterr().out
    assert "| s | stated (sampled) |" in printed and "| s | stated (expected value) |" in printed
    assert "| e | stated (expected value) |" in printed and "| e | stated (sampled) |" in printed
    assert "The confidence of e is the stated (expected value)" in printed
    assert "Stated (expected value): the mean of the model's distribution" in printed


def test_eval_without_one_token_tenths_reports_why(tiny_model_dir, data, tmp_path, capsys,
                                                    monkeypatch):
    def refuse(_tokenizer):
        raise UserError("no tenths here")

    monkeypatch.setattr(stated_module, "value_tokens", refuse)
    metrics = evaluate(tiny_model_dir, data, tmp_path / "e",
                       EvalSection(**SMALL, confidence_reading="expected"))
    assert metrics["ece"] is None and metrics["calibration_unavailable"] == "no tenths here"
    assert all(r["stated_expected"] is None and r[EXPECTED_UNAVAILABLE] == "no tenths here"
               for r in _rows(tmp_path / "e"))
    sampled = evaluate(tiny_model_dir, data, tmp_path / "s", EvalSection(**SMALL))
    assert sampled["baselines"]["stated_expected"]["calibration_unavailable"] == "no tenths here"
    main(["compare", str(tmp_path / "s")])
    printed = capsys.readouterr().out
    assert "Calibration not available for s, stated (expected value): no tenths here." in printed
