"""`optim.skip_rows_without_gradient`: the rows of groups that all scored the same (and carry
no KL term) stay out of the forward/backward, and the update's gradient is unchanged."""

from __future__ import annotations

import pytest
import torch

import calibrl.training.update as update
from algo.helpers import make_sample
from calibrl.algo.batch import build_train_batch
from calibrl.algo.rollout_tree import AnswerNode, PromptNode, RolloutTree
from training.test_policy_options import _trainer

# The tests stand in for optimizer.step (to read the gradients it would use), so the scheduler's
# check that the optimiser stepped first fires; the trainer itself steps in order.
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler")

TOKEN_LOGPROBS = update.token_logprobs
# Prompt 0's answers differ; prompts 1 and 2 score the same three times (advantage 0).
REWARDS = [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def _batch(tok, rewards_by_prompt):
    tree = RolloutTree("rlvr", [
        PromptNode(i, "test_coin", {}, [
            AnswerNode(make_sample(tok, f"Prompt {i}: flip.", f"<answer>{'ht'[k % 2]}{k}</answer>",
                                   reward))
            for k, reward in enumerate(rewards)])
        for i, rewards in enumerate(rewards_by_prompt)])
    return build_train_batch(tree, tok)


def _update(tmp_path, model_dir, monkeypatch, *overrides, rewards=REWARDS):
    """One `update_policy` on the fixed batch: the gradients the optimiser stepped with, the
    rows each forward pass saw, and the metrics."""
    trainer = _trainer(tmp_path, model_dir, *overrides)
    policy = trainer.policy
    rows_seen, grads = [], {}

    def counted(model, batch, *args, **kwargs):
        rows_seen.append(len(batch))
        return TOKEN_LOGPROBS(model, batch, *args, **kwargs)

    def capture():
        grads.update({n: p.grad.clone() for n, p in policy.model.named_parameters()})

    monkeypatch.setattr(update, "token_logprobs", counted)
    monkeypatch.setattr(policy.optimizer, "step", capture)
    metrics = update.update_policy(policy, _batch(policy.tokenizer, rewards), trainer.cfg,
                                   shard=(0, 3), max_len=8, step=1, run_dir=tmp_path)
    return grads, rows_seen, metrics


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_rows_without_gradient_are_skipped_and_the_gradient_is_the_same(
        tmp_path, tiny_model_dir, monkeypatch, agg):
    common = (f"algorithm.loss_agg={agg}", "optim.micro_batch_size=2")
    full, full_rows, full_metrics = _update(tmp_path / "all", tiny_model_dir, monkeypatch,
                                            "optim.skip_rows_without_gradient=false", *common)
    part, part_rows, part_metrics = _update(tmp_path / "skip", tiny_model_dir, monkeypatch,
                                            *common)
    assert full_rows == [2, 2, 2, 2, 1] and part_rows == [2, 1]  # 9 rows, then prompt 0's 3
    assert full_metrics["train/rows_trained"] == 1.0
    assert part_metrics["train/rows_trained"] == pytest.approx(3 / 9)
    assert full.keys() == part.keys() and full
    scale = max(float(g.abs().max()) for g in full.values())
    assert scale > 0
    for name, grad in full.items():
        torch.testing.assert_close(part[name], grad, rtol=0, atol=1e-5 * scale, msg=name)


def test_rows_with_a_kl_term_still_train(tmp_path, tiny_model_dir, monkeypatch):
    _, rows, metrics = _update(tmp_path, tiny_model_dir, monkeypatch, "algorithm.kl_coef=0.1",
                               "optim.micro_batch_size=16")
    assert rows == [9, 9]  # the reference model's pass and the policy's: every row
    assert metrics["train/rows_trained"] == 1.0


def test_a_batch_without_gradient_still_steps_on_zero_gradients(tmp_path, tiny_model_dir,
                                                                monkeypatch):
    grads, rows, metrics = _update(tmp_path, tiny_model_dir, monkeypatch,
                                   rewards=[[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    assert rows == [1] and metrics["train/rows_trained"] == 0.0
    assert grads and all(torch.count_nonzero(g) == 0 for g in grads.values())
