"""Flattening a tree into a TrainBatch; gradients reach each row only through its own span."""

import pytest
import torch

from algo.helpers import encode, make_sample, two_turn_tree
from calibrl.algo.batch import TrainBatch, build_train_batch, response_logprobs, row_advantages
from calibrl.algo.masks import span_loss_mask
from calibrl.algo.policy_loss import policy_loss
from calibrl.algo.rollout_tree import (
    ANSWER,
    CONFIDENCE,
    AnswerNode,
    PromptNode,
    RolloutTree,
    iter_rows,
)
from calibrl.errors import UserError


@pytest.fixture
def tree(byte_tok):
    return two_turn_tree(byte_tok)


def test_layout(byte_tok, tree):
    batch = build_train_batch(tree, byte_tok)
    rows = list(iter_rows(tree))
    assert len(batch) == len(rows) == 3 + 4 + 3
    assert (
        batch.sample_type.tolist()
        == [ANSWER, CONFIDENCE, CONFIDENCE] * 2 + [ANSWER] + [CONFIDENCE] * 3
    )
    assert batch.prompt_group.tolist() == [0] * 6 + [1] * 4
    assert batch.answer_group.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    num_ctx, num_resp = batch.prompt_ids.shape[1], batch.response_ids.shape[1]
    assert batch.attention_mask.shape == batch.position_ids.shape == (len(rows), num_ctx + num_resp)
    for name in ("response_mask", "loss_mask", "advantages"):
        assert getattr(batch, name).shape == (len(rows), num_resp)
    pad = byte_tok.pad_token_id
    for b, row in enumerate(rows):
        ctx, resp = row.sample.context_ids, row.sample.token_ids
        # context left-padded, response right-padded: every response starts at column P
        assert batch.prompt_ids[b, num_ctx - len(ctx) :].tolist() == ctx
        assert (batch.prompt_ids[b, : num_ctx - len(ctx)] == pad).all()
        assert batch.response_ids[b, : len(resp)].tolist() == resp
        assert batch.attention_mask[b].tolist() == [0] * (num_ctx - len(ctx)) + [1] * (
            len(ctx) + len(resp)
        ) + [0] * (num_resp - len(resp))
        assert batch.position_ids[b, num_ctx - len(ctx) : num_ctx + len(resp)].tolist() == list(
            range(len(ctx) + len(resp))
        )
        kind = "confidence" if row.sample_type == CONFIDENCE else "answer"
        assert batch.loss_mask[b, : len(resp)].tolist() == span_loss_mask(byte_tok, resp, kind)
    assert (batch.loss_mask <= batch.response_mask).all()
    assert torch.equal(batch.input_ids, torch.cat([batch.prompt_ids, batch.response_ids], 1))
    # the inserted user turn is in the context of confidence rows, never in the response
    question = encode(byte_tok, " How sure are you? Reply in <confidence>.")
    conf_ctx = rows[1].sample.context_ids
    assert conf_ctx[-len(question) :] == question


def test_advantages_are_per_row_scalars_on_the_mask(byte_tok, tree):
    batch = build_train_batch(tree, byte_tok, lambda_ans=2.0, lambda_conf=0.5)
    scalar = row_advantages(list(iter_rows(tree)), lambda_ans=2.0, lambda_conf=0.5)
    assert torch.equal(batch.advantages, scalar[:, None] * batch.loss_mask)
    eps = 1e-6
    # answers of prompt 0: rewards 1, 0 -> +-1 (times 2); prompt 1 has one answer -> 0
    assert scalar[[0, 3, 6]].tolist() == pytest.approx(
        [2 * 0.5 / (0.5 + eps), -2 * 0.5 / (0.5 + eps), 0.0]
    )
    # confidences of answer 0: 0.96, 0.36 -> +-1 (times 0.5); answer 1: 1, 0 -> +-1
    assert scalar[[1, 2, 4, 5]].tolist() == pytest.approx([0.5, -0.5, 0.5, -0.5], abs=1e-5)
    # answer 2: 0, 0.75, 0.75 -> mean 0.5, std sqrt(1/8)
    s = (1 / 8) ** 0.5
    assert scalar[7:].tolist() == pytest.approx([-0.25 / s, 0.125 / s, 0.125 / s], abs=1e-4)
    assert batch.rewards.tolist() == pytest.approx([1, 0.96, 0.36, 0, 1, 0, 1, 0, 0.75, 0.75])


def test_confidence_level_and_single_confidence_refusal(byte_tok, tree):
    for answer in tree.prompts[0].answers + tree.prompts[1].answers:
        del answer.confidences[1:]
    with pytest.raises(UserError):
        build_train_batch(tree, byte_tok)
    batch = build_train_batch(tree, byte_tok, confidence_level="prompt")
    assert (batch.sample_type == CONFIDENCE).sum() == 3


def test_single_turn_modes(byte_tok):
    prompt = "Make 3 from 1 and 2."
    rlcr_text = "<think> add </think><answer>1 + 2</answer><analysis> sure </analysis><confidence>0.9</confidence>"
    for mode, text, kind in (
        ("rlvr", "<think> add </think><answer>1 + 2</answer>", "answer"),
        ("rlcr", rlcr_text, "rlcr"),
    ):
        answers = [
            AnswerNode(make_sample(byte_tok, prompt, text, reward=r)) for r in (1.0, 0.0, 0.5)
        ]
        tree = RolloutTree(
            mode, [PromptNode(0, "countdown", {"target": 3, "numbers": [1, 2]}, answers)]
        )
        batch = build_train_batch(tree, byte_tok)
        assert batch.sample_type.tolist() == [ANSWER] * 3
        ids = answers[0].sample.token_ids
        assert batch.loss_mask[0, : len(ids)].tolist() == span_loss_mask(byte_tok, ids, kind)
        assert batch.loss_mask[0, : len(ids)].sum() == len(ids)  # from <think> through the EOS
        assert batch.advantages[:, 0].tolist() == pytest.approx([1.2247, -1.2247, 0.0], abs=1e-3)
    tree.prompts[0].answers[0].confidences.append(answers[1].sample)
    with pytest.raises(ValueError, match="no confidence samples"):
        build_train_batch(tree, byte_tok)


def test_samples_without_logprobs_still_batch(byte_tok, tree):
    # the trainer takes old log-probs from the policy, never from the rollout
    with_logprobs = build_train_batch(tree, byte_tok)
    tree.prompts[0].answers[0].sample.logprobs = None
    without = build_train_batch(tree, byte_tok)
    assert all(torch.equal(getattr(with_logprobs, f), getattr(without, f))
               for f in ("response_ids", "loss_mask", "advantages"))


def test_split_trim_select_to(byte_tok, tree):
    batch = build_train_batch(tree, byte_tok)
    parts = batch.split(4)
    assert [len(p) for p in parts] == [4, 4, 2]
    start = 0
    for part in parts:
        full = batch.select(slice(start, start + len(part)))
        # trimming removes only all-padding columns: real tokens and their positions are kept
        assert part.prompt_ids.shape[1] <= full.prompt_ids.shape[1]
        assert part.attention_mask[:, 0].any() and part.response_mask[:, -1].any()
        for name in ("response_ids", "loss_mask", "advantages", "response_mask"):
            width = getattr(part, name).shape[1]
            assert torch.equal(getattr(part, name), getattr(full, name)[:, :width])
            assert getattr(full, name)[:, width:].abs().sum() == 0 or name == "response_ids"
        drop = full.prompt_ids.shape[1] - part.prompt_ids.shape[1]
        assert torch.equal(part.prompt_ids, full.prompt_ids[:, drop:])
        assert torch.equal(
            part.position_ids[part.attention_mask.bool()],
            full.position_ids[full.attention_mask.bool()],
        )
        start += len(part)
    moved = batch.to("meta")
    assert moved.loss_mask.device.type == "meta" and moved.advantages.device.type == "meta"
    assert len(batch.select(batch.sample_type == ANSWER)) == 3
    with pytest.raises(ValueError):
        batch.split(0)


def _grad_of_logits(batch: TrainBatch, logits: torch.Tensor, old_logp: torch.Tensor,
                    **kw) -> torch.Tensor:
    logits = logits.clone().requires_grad_(True)
    logp = response_logprobs(logits, batch)
    loss, _ = policy_loss(
        logp,
        old_logp,
        batch.advantages,
        batch.loss_mask,
        sample_type=batch.sample_type,
        **kw,
    )
    loss.backward()
    return logits.grad


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_gradients_flow_only_through_each_rows_own_span(byte_tok, tree, agg):
    batch = build_train_batch(tree, byte_tok)
    gen = torch.Generator().manual_seed(0)
    rows, cols = batch.input_ids.shape
    logits = torch.randn(rows, cols, len(byte_tok), generator=gen)
    old = response_logprobs(logits, batch)  # on-policy: ratio 1, nothing clipped
    grad = _grad_of_logits(batch, logits, old, agg=agg)
    num_ctx = batch.prompt_ids.shape[1]
    # the logits at column P + t - 1 predict response token t: only those under the mask get grad
    predicts = torch.zeros(rows, cols, dtype=torch.bool)
    predicts[:, num_ctx - 1 : num_ctx - 1 + batch.loss_mask.shape[1]] = batch.advantages != 0
    assert (batch.advantages != 0).sum() > 0.7 * batch.loss_mask.sum()  # most rows carry a signal
    has_grad = grad.abs().sum(-1) > 0
    assert torch.equal(has_grad, predicts)  # no grad from context, inserted turn or padding

    # answer-token gradients come only from answer rows and confidence-token gradients only from
    # confidence rows: zeroing one type's advantages leaves the other type's gradients unchanged
    # (same mask, so the same normaliser) and silences its own.
    for keep in (ANSWER, CONFIDENCE):
        only = batch.select(slice(None))
        only.advantages = batch.advantages * (batch.sample_type == keep)[:, None]
        g = _grad_of_logits(only, logits, old, agg=agg)
        keep_rows = batch.sample_type == keep
        assert torch.allclose(g[keep_rows], grad[keep_rows], atol=1e-7)
        assert g[~keep_rows].abs().max() == 0


def test_padded_batch_equals_rows_alone_in_a_tiny_model(byte_tok, tree):
    """Left-padded contexts with these positions and attention mask give each row the same
    log-probs as running it unpadded (checked on a tiny Llama built in code)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(byte_tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
        )
    ).eval()
    batch = build_train_batch(tree, byte_tok)
    with torch.no_grad():
        logits = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
        ).logits
        logp = response_logprobs(logits, batch)
        for b, row in enumerate(iter_rows(tree)):
            ids = torch.tensor([row.sample.context_ids + row.sample.token_ids])
            alone = model(input_ids=ids).logits[0].log_softmax(-1)
            n = len(row.sample.context_ids)
            want = alone[n - 1 : -1].gather(-1, ids[0, n:, None]).squeeze(-1)
            assert torch.allclose(logp[b, : len(row.sample.token_ids)], want, atol=1e-4)


def test_empty_tree_and_context_are_refused(byte_tok):
    with pytest.raises(ValueError):
        build_train_batch(RolloutTree("rlvr", []), byte_tok)
    sample = make_sample(byte_tok, "", "<answer>1</answer>")
    tree = RolloutTree(
        "rlvr", [PromptNode(0, "countdown", {}, [AnswerNode(sample), AnswerNode(sample)])]
    )
    with pytest.raises(ValueError, match="context"):
        build_train_batch(tree, byte_tok)
