"""The confidence warm-up (`calibrl calibrate`): its rows say what inference sees, its loop
teaches the stated value to tell right answers from wrong ones, and a run writes its folder."""

from __future__ import annotations

import functools
import json
import math
import random
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from calibrl.algo.confidence_loss import CONFIDENCE_LOSSES, expected_value, value_mass_nll
from calibrl.algo.stated_value import value_tokens
from calibrl.cli.main import _register, app
from calibrl.errors import UserError
from calibrl.models import build_tiny_model, build_tokenizer, create_tiny_model
from calibrl.protocol.prompts import confidence_messages
from calibrl.protocol.reanswer import NO_ANSWER, REANSWER_PREFIX, reanswer_analysis, reanswers_in
from calibrl.protocol.tags import CONFIDENCE_OPEN
from calibrl.rollout.rollouts import encode_messages
from calibrl.settings.calibrate import CalibrateSettings
from calibrl.tasks import get_task
from calibrl.tasks.countdown.data import examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.tasks.files import write_examples
from calibrl.training.calibrate import (
    CalibrationRows,
    answer_loss,
    confidence_batch,
    confidence_terms,
    expected_confidences,
    mean_by_grade,
    run_calibrate,
    train_calibration,
)
from calibrl.training.calibrate_data import GradedAnswer, confidence_row, own_analysis
from calibrl.training.sft_batch import IGNORE, collate, token_mean_loss

SMALL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_position_embeddings": 512}
Q = "How likely is it that your answer is correct?"


@functools.cache
def examples():
    train, _ = generate_countdown(40, num_numbers=(2, 3), max_number=20, seed=3, test_size=1)
    return examples_from_instances(train, "train")


def config(tmp_path: Path, **changes) -> CalibrateSettings:
    values = {"data": "unused", "model": "unused", "out": str(tmp_path / "out"), "steps": 60,
              "lr": 3e-3, "warmup_steps": 0, "batch_size": 16, "answer_batch_size": 4,
              "progress": False, "bf16": False, "device": "cpu", "confidence_question": Q,
              "log_every": 10}
    return CalibrateSettings.create(**{**values, **changes})


def graded_pairs() -> list[GradedAnswer]:
    """Each problem with its reference answer (right, target 1) and a wrong one (target 0)."""
    task, rng, out = get_task("countdown"), random.Random(0), []
    for ex in examples():
        right, wrong = task.reference_trace(ex), task.wrong_trace(ex, rng)
        out.append(GradedAnswer(ex.index, task.difficulty(ex.ground_truth), right, True,
                                "I checked each step.", 1.0))
        out.append(GradedAnswer(ex.index, task.difficulty(ex.ground_truth), wrong, False,
                                "", 0.0))
    return out


def test_value_tokens_are_the_ten_digits_after_zero_point():
    tokenizer = build_tokenizer()
    values = value_tokens(tokenizer)
    assert [tokenizer.decode([i]) for i in values.ids] == [str(d) for d in range(10)]
    assert values.values == tuple(d / 10 for d in range(10))


def test_a_tokenizer_that_merges_the_value_is_refused():
    class Merging:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [len(text)]}  # one token per text, whatever it is

    with pytest.raises(UserError, match="one token"):
        value_tokens(Merging())


def test_own_analysis_reads_the_first_block_or_nothing():
    assert own_analysis("<analysis> a b </analysis>\n<confidence>0.3</confidence>") == "a b"
    assert own_analysis("<confidence>0.3</confidence>") == ""
    assert own_analysis("\x00<analysis>x") == "" and own_analysis(None) == ""


def test_a_reanswer_analysis_lists_the_other_answers_in_order():
    assert reanswer_analysis(["Lizu", " Volir  Ka ", None, ""]) == (
        f"{REANSWER_PREFIX} <answer>Lizu</answer> <answer>Volir Ka</answer> "
        f"<answer>{NO_ANSWER}</answer> <answer>{NO_ANSWER}</answer>")
    assert reanswers_in(reanswer_analysis(["Lizu", "Volir Ka"])) == ["Lizu", "Volir Ka"]
    assert reanswers_in("I checked my answer.") == []


def test_reanswer_needs_more_answers_than_it_shows(tmp_path):
    with pytest.raises(UserError, match="answers_per_prompt must exceed reanswers"):
        config(tmp_path, analysis="reanswer", reanswers=3, answers_per_prompt=3)
    with pytest.raises(UserError, match="at least 2"):
        config(tmp_path, target="agreement", answers_per_prompt=1)


def test_a_row_is_the_inference_context_then_the_reply_with_the_value_left_to_the_score():
    tokenizer = build_tokenizer()
    values = value_tokens(tokenizer)
    ex, graded = examples()[0], graded_pairs()[0]
    row = confidence_row(tokenizer, ex, graded, values, Q)
    context = encode_messages(tokenizer, confidence_messages(ex.messages, graded.answer, Q))
    assert row.input_ids[:len(context)] == context  # what the engine sees at turn 2
    assert all(label == IGNORE for label in row.labels[:len(context)])
    reply = tokenizer.decode(row.input_ids[len(context):])
    assert reply.startswith("<analysis>I checked each step.</analysis>\n<confidence>0.9")
    assert row.input_ids[row.value_pos] == values.ids[9]  # target 1 -> the nearest tenth, 0.9
    assert row.labels[row.value_pos] == IGNORE  # the scoring loss, not CE, trains it
    trained = [i for i, label in enumerate(row.labels) if label != IGNORE]
    assert trained[0] == len(context) and trained[-1] == len(row.input_ids) - 1
    assert row.input_ids[-1] == tokenizer.eos_token_id


@pytest.mark.parametrize("grade", [True, False])
def test_training_moves_the_stated_value_towards_the_target(tmp_path, grade):
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=1, num_heads=2)
    values = value_tokens(tokenizer)
    cfg = config(tmp_path, steps=15, batch_size=8, answer_batch_size=2, lr=1e-2)
    graded = [g for g in graded_pairs() if g.correct == grade][:10]
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()}, graded, values, cfg)
    assert len(rows.answers) == (10 if grade else 0)  # only right answers are imitated
    pad = tokenizer.pad_token_id
    before = expected_confidences(model.eval(), rows.confidence, values, pad)
    with (tmp_path / "log.jsonl").open("w") as log:
        trained, final = train_calibration(model, tokenizer, rows, values, cfg, log)
    after = expected_confidences(trained, rows.confidence, values, pad)
    shift = (sum(after) - sum(before)) / len(after)
    assert (shift > 0.2) if grade else (shift < -0.2)
    logged = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [10]
    # A uniform distribution over the tenths scores 0.385 against 1 and 0.285 against 0.
    assert final["score"] < (0.385 if grade else 0.285)
    assert (final["answer_ce"] > 0) == grade


@pytest.mark.parametrize("scheduler", ["constant_with_warmup", "cosine"])
def test_the_learning_rate_follows_the_schedule(tmp_path, scheduler):
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=1, num_heads=2)
    values = value_tokens(tokenizer)
    cfg = config(tmp_path, steps=5, warmup_steps=2, batch_size=4, answer_batch_size=0, lr=1e-3,
                 log_every=1, scheduler=scheduler, min_lr_ratio=0.1)
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()}, graded_pairs()[:8],
                           values, cfg)
    with (tmp_path / "log.jsonl").open("w") as log:
        train_calibration(model, tokenizer, rows, values, cfg, log)
    lrs = [json.loads(line)["lr"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert lrs[0] == pytest.approx(0.5e-3)  # half-way through the warm-up
    if scheduler == "cosine":  # from the peak down to the floor at the last step
        assert lrs[1] == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4))))
        assert lrs[-1] == pytest.approx(1e-4)
        assert all(a > b for a, b in zip(lrs[1:-1], lrs[2:], strict=True))
    else:
        assert lrs[1:] == pytest.approx([1e-3] * 4)


def test_expected_confidences_read_what_the_training_pass_reads(tmp_path):
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=1, hidden_size=32, num_layers=1, num_heads=2).eval()
    values = value_tokens(tokenizer)
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()}, graded_pairs()[:12],
                           values, config(tmp_path)).confidence
    pad = tokenizer.pad_token_id
    with torch.no_grad():
        full = confidence_terms(model, confidence_batch(rows, pad), values, "expected_brier")
    kept = expected_confidences(model, rows, values, pad, batch_size=5)  # batches of 5, 5, 2
    torch.testing.assert_close(torch.tensor(kept), full["expected"], rtol=1e-5, atol=1e-5)


def test_losses_on_the_reply_positions_equal_those_of_the_full_logits(tmp_path):
    """Only the positions after the batch's first labelled token go through the output layer;
    the losses and their gradients are those of every position's logits."""
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=2, hidden_size=32, num_layers=1, num_heads=2)
    values = value_tokens(tokenizer)
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()}, graded_pairs()[:12],
                           values, config(tmp_path))
    batch = confidence_batch(rows.confidence[:7], tokenizer.pad_token_id)
    assert len(set(batch["attention_mask"].sum(1).tolist())) > 1  # rows of several lengths
    ids, vals = values.tensors()

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    terms = confidence_terms(model, batch, values, "expected_brier")
    got = terms["score"] + terms["format"] + terms["mass"]
    full = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    at = full[torch.arange(7), batch["value_pos"] - 1]  # [B, V]
    want = (CONFIDENCE_LOSSES["expected_brier"](at[:, ids], vals, batch["targets"]).mean()
            + token_mean_loss(full, batch["labels"]) + value_mass_nll(at, ids).mean())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(terms["expected"], expected_value(at[:, ids], vals).detach())
    for g, w in zip(grads(got), grads(want), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    answers = collate(rows.answers[:5], tokenizer.pad_token_id)
    full = model(input_ids=answers["input_ids"], attention_mask=answers["attention_mask"]).logits
    torch.testing.assert_close(answer_loss(model, answers),
                               token_mean_loss(full, answers["labels"]), rtol=1e-5, atol=1e-6)


def test_train_layers_tunes_only_the_top_blocks(tmp_path):
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=2, num_heads=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = config(tmp_path, steps=3, batch_size=4, answer_batch_size=2, lr=1e-2, train_layers=1)
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()}, graded_pairs()[:8],
                           value_tokens(tokenizer), cfg)
    trained, _ = train_calibration(model, tokenizer, rows, value_tokens(tokenizer), cfg)
    for key, value in trained.state_dict().items():
        moved = not torch.equal(value, before[key])
        assert moved == ("layers.1." in key or key == "model.norm.weight"), key


def test_mean_by_grade_splits_scores():
    assert mean_by_grade([0.2, 0.8, 0.6], [False, True, True]) == {"right": 0.7, "wrong": 0.2}
    assert mean_by_grade([0.5], [True]) == {"right": 0.5, "wrong": None}


@pytest.fixture(scope="module")
def data_and_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate")
    write_examples(root / "train.parquet", examples())
    model = create_tiny_model(root / "model", seed=0, **SMALL)
    return root / "train.parquet", model


def test_a_run_grades_trains_and_writes_its_folder(tmp_path, data_and_model):
    data, model = data_and_model
    cfg = config(tmp_path, data=str(data), model=str(model), prompts=6, answers_per_prompt=2,
                 steps=3, max_answer_tokens=16, max_confidence_tokens=12, target="agreement",
                 summary_rows=5)
    summary = run_calibrate(cfg)
    out = Path(cfg.out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["calibrate_config.json", "graded.jsonl", "calibrate_log.jsonl", "summary.json", "model"])
    graded = [json.loads(line) for line in (out / "graded.jsonl").read_text().splitlines()]
    assert len(graded) == 12 == summary["answers"]
    assert summary["summary_answers"] == 4  # every third answer: at most summary_rows
    assert {g["index"] for g in graded} == {ex.index for ex in examples()[:6]}
    assert all(g["target"] in (0.0, 1.0) for g in graded)  # agreement with the one other answer
    assert json.loads((out / "calibrate_config.json").read_text())["target"] == "agreement"
    with pytest.raises(UserError, match="--overwrite"):
        run_calibrate(cfg)
    run_calibrate(cfg.model_copy(update={"overwrite": True}))


def test_a_reanswer_run_shows_each_answer_the_prompts_other_answers(tmp_path, data_and_model):
    data, model = data_and_model
    cfg = config(tmp_path, data=str(data), model=str(model), prompts=4, answers_per_prompt=3,
                 steps=2, max_answer_tokens=16, max_confidence_tokens=12,
                 analysis="reanswer", reanswers=2)
    run_calibrate(cfg)
    graded = [json.loads(line) for line in (Path(cfg.out) / "graded.jsonl").read_text()
              .splitlines()]
    task = get_task("countdown")
    for start in range(0, len(graded), 3):
        prompt = graded[start:start + 3]
        assert len({g["index"] for g in prompt}) == 1
        keys = [task.extract_answer(g["answer"].split("</think>")[-1]) for g in prompt]
        for i, g in enumerate(prompt):  # the next two answers of the prompt, cyclically
            others = [keys[(i + 1) % 3], keys[(i + 2) % 3]]
            assert g["analysis"] == reanswer_analysis(others)


def test_bad_input_is_one_line_and_exit_2(tmp_path, data_and_model):
    _register()
    _, model = data_and_model
    result = CliRunner().invoke(app, ["calibrate", "--data", str(tmp_path / "none.parquet"),
                                      "--model", str(model), "--out", str(tmp_path / "o")])
    assert result.exit_code != 0 and "no such file" in str(result.exception or result.output)
    result = CliRunner().invoke(app, ["calibrate", "--data", "x", "--model", "m", "--out", "o",
                                      "target=guess"])
    assert result.exit_code != 0


def _graded_run(tmp_path, data_and_model, **changes) -> list[dict]:
    """One step of a run with `changes`; its graded.jsonl rows."""
    data, model = data_and_model
    cfg = config(tmp_path, data=str(data), model=str(model), steps=1, max_answer_tokens=16,
                 max_confidence_tokens=12, **changes)
    run_calibrate(cfg)
    return [json.loads(line) for line in (Path(cfg.out) / "graded.jsonl").read_text()
            .splitlines()]


def test_mapped_agreement_targets_are_the_accuracy_at_each_agreement(tmp_path, data_and_model):
    graded = _graded_run(tmp_path, data_and_model, prompts=8, answers_per_prompt=3,
                         target="mapped_agreement")
    assert {g["agreement"] for g in graded} <= {0.0, 0.5, 1.0}
    for g in graded:
        same = [h["correct"] for h in graded if h["agreement"] == g["agreement"]]
        assert g["target"] == pytest.approx(sum(same) / len(same))


def test_mapped_likelihood_targets_map_the_likelihood_on_other_prompts(tmp_path,
                                                                      data_and_model):
    from calibrl.algo.self_estimates import cluster_folds, held_out_binned_targets

    graded = _graded_run(tmp_path, data_and_model, prompts=10, answers_per_prompt=2,
                         target="mapped_likelihood")
    task = get_task("countdown")
    by_index = {ex.index: ex for ex in examples()}
    assert all(g["cluster"] == str(task.readout_cluster(by_index[g["index"]].ground_truth))
               for g in graded)
    assert all(0.0 < g["likelihood"] <= 1.0 for g in graded)  # sampled answers have log-probs
    want = held_out_binned_targets([g["likelihood"] for g in graded],
                                   [g["correct"] for g in graded],
                                   cluster_folds([g["cluster"] for g in graded]).tolist())
    assert [g["target"] for g in graded] == pytest.approx(want)
    with pytest.raises(UserError, match="held-out prompts: prompts must be at least 2"):
        config(tmp_path, prompts=1, target="mapped_likelihood")


def test_every_target_the_settings_accept_has_a_rule():
    from typing import get_args

    from calibrl.settings.calibrate import CalibrateSection
    from calibrl.training.calibrate_data import CONFIDENCE_TARGETS

    assert set(get_args(CalibrateSection.model_fields["target"].annotation)) == set(
        CONFIDENCE_TARGETS)


def test_readout_targets_are_the_probe_of_each_answers_state(tmp_path, data_and_model,
                                                            monkeypatch):
    import calibrl.training.calibrate_data as calibrate_data
    from calibrl.algo.readout import last_states, out_of_fold_readout

    seen = {}

    def probe(features, correct, clusters):  # the real probe, its inputs kept
        seen.update(features=features, correct=list(correct), clusters=list(clusters))
        seen["out"] = out_of_fold_readout(features, correct, clusters)
        return seen["out"]

    def states(model, sequences):
        seen["sequences"] = [list(s) for s in sequences]
        return last_states(model, sequences)

    monkeypatch.setattr(calibrate_data, "out_of_fold_readout", probe)
    monkeypatch.setattr(calibrate_data, "last_states", states)
    graded = _graded_run(tmp_path, data_and_model, prompts=10, answers_per_prompt=2,
                         target="readout")
    assert len(seen["sequences"]) == len(graded) == 20
    assert seen["correct"] == [g["correct"] for g in graded]
    assert seen["clusters"] == [g["cluster"] for g in graded]
    assert [g["target"] for g in graded] == [g["readout"] for g in graded]
    assert [g["target"] for g in graded] == pytest.approx(list(seen["out"]))
    assert all(0.0 <= g["target"] <= 1.0 for g in graded)
    tokenizer = build_tokenizer(model_max_length=512)
    for sequence in seen["sequences"]:  # the turn-2 context, then the reply up to <confidence>
        text = tokenizer.decode(sequence)
        assert Q in text
        reply = text.split(Q, 1)[1]
        assert CONFIDENCE_OPEN not in reply or reply.rstrip().endswith(CONFIDENCE_OPEN)


def test_readout_target_needs_the_models_own_analysis(tmp_path):
    with pytest.raises(UserError, match="analysis=own"):
        config(tmp_path, target="readout", analysis="reanswer", answers_per_prompt=4)


def test_frozen_states_train_the_same_weights_as_the_full_forward(tmp_path):
    tokenizer = build_tokenizer(model_max_length=512)
    values = value_tokens(tokenizer)
    trained = []
    for frozen in (False, True):
        model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=3, num_heads=2)
        cfg = config(tmp_path, steps=4, batch_size=4, answer_batch_size=2, lr=1e-2,
                     train_layers=1, frozen_states=frozen)
        rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()},
                               graded_pairs()[:8], values, cfg)
        model, final = train_calibration(model, tokenizer, rows, values, cfg)
        assert final["frozen_blocks"] == (2 if frozen else 0)  # 3 blocks, the top one trained
        trained.append(model.state_dict())
    moved = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=3,
                             num_heads=2).state_dict()
    assert not torch.equal(trained[1]["model.layers.2.mlp.up_proj.weight"],
                           moved["model.layers.2.mlp.up_proj.weight"])
    for key, value in trained[0].items():
        torch.testing.assert_close(trained[1][key], value, rtol=1e-4, atol=1e-6)


def test_frozen_states_fall_back_to_the_full_forward_where_the_split_differs(tmp_path,
                                                                           monkeypatch, capsys):
    import calibrl.training.calibrate as calibrate

    monkeypatch.setattr(calibrate, "matches_full_forward", lambda *a, **k: False)
    tokenizer = build_tokenizer(model_max_length=512)
    values = value_tokens(tokenizer)
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=3, num_heads=2)
    cfg = config(tmp_path, steps=2, batch_size=4, answer_batch_size=2, lr=1e-2,
                 train_layers=1, frozen_states=True)
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples()}, graded_pairs()[:8],
                           values, cfg)
    _, final = train_calibration(model, tokenizer, rows, values, cfg)
    assert final["frozen_blocks"] == 0
    assert "cannot be split" in capsys.readouterr().out
