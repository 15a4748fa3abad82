"""`optim.shared_context`: each distinct context encoded once gives the plain forward pass's
log-probs and gradients (up to float rounding), and the trainer refuses it where it cannot run."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from algo.helpers import make_sample, two_turn_tree
from calibrl.algo.batch import build_train_batch
from calibrl.algo.rollout_tree import AnswerNode, PromptNode, RolloutTree
from calibrl.errors import UserError
from calibrl.models import create_tiny_model
from calibrl.training.policy import token_logprobs
from training.test_policy_options import _trainer


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return create_tiny_model(tmp_path_factory.mktemp("model") / "m", hidden_size=32,
                             num_layers=2, num_heads=2)


@pytest.fixture(scope="module")
def model_and_tok(model_dir):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():  # a random model, so the check does not pass by flat logits
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model, AutoTokenizer.from_pretrained(model_dir)


def _rlvr_tree(tok) -> RolloutTree:
    """3 prompts of different lengths (so contexts are left-padded), 3, 1 and 2 answers."""
    prompts = [("Numbers: 3 4. Target: 7.", ["<answer>3 + 4</answer>", "<answer>4", ""]),
               ("Numbers: 10 2 5 9. Target: 1.", ["<think>10 / 2 = 5</think>"]),
               ("Hi", ["<answer>1</answer>", "<answer>12 * 3</answer> and more words"])]
    return RolloutTree("rlvr", [
        PromptNode(i, "countdown", {}, [AnswerNode(make_sample(tok, ctx, c, float(j % 2)))
                                        for j, c in enumerate(completions)])
        for i, (ctx, completions) in enumerate(prompts)])


def _logprobs_and_grads(model, batch, shared: bool):
    model.zero_grad(set_to_none=True)
    logp, entropy = token_logprobs(model, batch, temperature=0.7, with_entropy=True,
                                   shared_context=shared)
    mask = batch.response_mask
    (logp * mask * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach() * mask, entropy * mask, grads


@pytest.mark.parametrize("make_tree", [_rlvr_tree, two_turn_tree], ids=["rlvr", "two_turn"])
def test_shared_context_matches_the_plain_forward(model_and_tok, make_tree):
    model, tok = model_and_tok
    batch = build_train_batch(make_tree(tok), tok)
    contexts = {tuple(row.tolist()) for row in batch.prompt_ids}
    assert len(contexts) < len(batch)  # some rows share a context: the case under test
    plain_logp, plain_ent, plain_grads = _logprobs_and_grads(model, batch, shared=False)
    logp, ent, grads = _logprobs_and_grads(model, batch, shared=True)
    torch.testing.assert_close(logp, plain_logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(ent, plain_ent, rtol=0, atol=1e-5)
    assert grads.keys() == plain_grads.keys() and plain_grads
    for name, grad in plain_grads.items():  # float rounding, relative to the gradient's scale
        assert (grads[name] - grad).abs().max() <= 1e-5 * grad.abs().max(), name


def test_shared_context_with_one_response_token_and_distinct_contexts(model_and_tok):
    model, tok = model_and_tok
    tree = RolloutTree("rlvr", [PromptNode(i, "countdown", {}, [
        AnswerNode(make_sample(tok, ctx, "", eos=True))]) for i, ctx in enumerate(["a b", "c"])])
    batch = build_train_batch(tree, tok)
    assert batch.response_ids.shape[1] == 1
    with torch.no_grad():
        plain, _ = token_logprobs(model, batch)
        shared, _ = token_logprobs(model, batch, shared_context=True)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-5)


def test_trainer_with_shared_context_trains_like_the_plain_one(tmp_path, model_dir,
                                                              monkeypatch):
    import calibrl.training.policy as policy

    calls = [0]
    shared_logits = policy.response_logits_shared

    def counted(model, batch):
        calls[0] += 1
        return shared_logits(model, batch)

    monkeypatch.setattr(policy, "response_logits_shared", counted)
    metrics, calls_after = [], []
    for shared in ("false", "true"):
        _trainer(tmp_path / shared, model_dir, "optim.total_steps=1",
                 f"optim.shared_context={shared}", "algorithm.kl_coef=0.1").train()
        # Same seed, same samples: the same loss and gradient in the first step.
        first = json.loads((tmp_path / shared / "run/metrics.jsonl").read_text().splitlines()[0])
        metrics.append({k: v for k, v in first.items() if k.startswith("train/")})
        calls_after.append(calls[0])
    assert calls_after[0] == 0 and calls_after[1] >= 2  # policy and reference forward passes
    plain, shared = metrics
    assert plain.keys() == shared.keys() and plain["train/grad_norm"] > 0
    for key, value in plain.items():  # not the weights: Adam's first step amplifies rounding
        assert shared[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


def test_shared_context_with_gradient_checkpointing_is_refused(tmp_path, model_dir):
    with pytest.raises(UserError, match="optim.shared_context"):
        _trainer(tmp_path, model_dir, "optim.shared_context=true",
                 "model.gradient_checkpointing=true")
