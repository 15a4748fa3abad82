"""The two turns' token sequences on the real model with its own chat template.

Turn 2 is not built by appending tokens to turn 1: the rollout renders the whole conversation
again (question, the answer's text as the assistant's reply, the confidence question) through
the chat template and encodes it (`calibrl.rollout.rollouts`). These tests check that this
encoding is exactly the template's, that it begins with turn 1's prompt, and that it carries the
answer's own generated tokens wherever the tokenizer writes the answer's text that way; and that
the engine's log-probs of both turns are the model's own on those exact sequences, as the
trainer computes them.
"""

from __future__ import annotations

import pytest
import torch

from calibrl.algo import build_train_batch, score_tree
from calibrl.algo.rollout_tree import iter_rows
from calibrl.protocol.modes import get_mode
from calibrl.protocol.prompts import CONFIDENCE_QUESTION
from calibrl.rollout.engine import Generation
from calibrl.rollout.factory import make_engine
from calibrl.rollout.rollouts import RolloutSettings, sample_answers, sample_confidences
from real_model.questions import question_examples

pytestmark = pytest.mark.slow

SETTINGS = RolloutSettings(num_generations_answer=2, num_generations_confidence=2,
                           temperature=1.0, max_answer_tokens=20, max_confidence_tokens=12)


def template_ids(tokenizer, messages) -> list[int]:
    """The chat template's text for `messages` with an open assistant turn, encoded as plain
    text: what any chat client of this model would send."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def forward_logprobs(model, context: list[int], ids: list[int]) -> torch.Tensor:
    """`[T]` log-probs of `ids` after `context` from one plain forward pass (temperature 1)."""
    with torch.no_grad():
        logits = model(torch.tensor([context + ids])).logits[0, len(context) - 1:-1]
    return logits.log_softmax(-1).gather(-1, torch.tensor(ids)[:, None])[:, 0]


@pytest.fixture(scope="module")
def rollout(smollm2):
    model, tokenizer = smollm2
    examples = question_examples(2)
    engine = make_engine("hf", model, tokenizer)
    tree = sample_answers(engine, tokenizer, examples, SETTINGS, "two_turn", seed=0)
    sample_confidences(engine, tokenizer, tree, examples, SETTINGS, seed=0)
    return examples, tree


def test_turn_one_is_the_chat_template_with_its_default_system_turn(smollm2, rollout):
    _, tokenizer = smollm2
    examples, tree = rollout
    spec = get_mode("two_turn")
    for example, prompt in zip(examples, tree.prompts, strict=True):
        messages = spec.answer_prompt(example.messages)
        assert [m["role"] for m in messages] == ["user"]  # the system turn is the template's
        for answer in prompt.answers:
            context = answer.sample.context_ids
            assert context == template_ids(tokenizer, messages)
            text = tokenizer.decode(context)
            assert text.index("<|im_start|>system\n") < text.index(
                f"<|im_start|>user\n{messages[0]['content']}<|im_end|>")
            assert text.endswith("<|im_start|>assistant\n")
            ids = answer.sample.token_ids
            assert 0 < len(ids) <= SETTINGS.max_answer_tokens
            assert answer.sample.text == tokenizer.decode(ids, skip_special_tokens=True)


def test_turn_two_encodes_the_conversation_so_far_and_the_confidence_question(smollm2, rollout):
    _, tokenizer = smollm2
    examples, tree = rollout
    eos = tokenizer.eos_token_id
    answers_met_token_for_token = 0
    for example, prompt in zip(examples, tree.prompts, strict=True):
        for answer in prompt.answers:
            turn1, generated = answer.sample.context_ids, list(answer.sample.token_ids)
            assert len(answer.confidences) == SETTINGS.num_generations_confidence
            contexts = {tuple(c.context_ids) for c in answer.confidences}
            assert len(contexts) == 1  # one context, G_c samples after it
            turn2 = list(contexts.pop())
            conversation = [*example.messages,
                            {"role": "assistant", "content": answer.sample.text},
                            {"role": "user", "content": CONFIDENCE_QUESTION}]
            assert turn2 == template_ids(tokenizer, conversation)
            assert tokenizer.decode(turn2).endswith(
                f"{answer.sample.text}<|im_end|>\n<|im_start|>user\n{CONFIDENCE_QUESTION}"
                "<|im_end|>\n<|im_start|>assistant\n")

            # Turn 1's prompt ends with a line break, which the tokenizer may join with blanks
            # that start a reply (test_a_reply_starting_with_blanks_...): only then can turn 2
            # write turn 1's prompt in other tokens.
            if not answer.sample.text[:1].isspace():
                assert turn2[:len(turn1)] == turn1
            # The reply's own tokens, then the end of the turn (an answer that stopped there
            # generated that token itself), wherever they are how the tokenizer writes it.
            body = generated[:-1] if generated[-1] == eos else generated
            if tokenizer(answer.sample.text, add_special_tokens=False)["input_ids"] == body:
                reply = turn2[len(turn1):len(turn1) + len(body) + 1]
                assert reply == body + [eos]
                answers_met_token_for_token += 1
            for sample in answer.confidences:
                assert 0 < len(sample.token_ids) <= SETTINGS.max_confidence_tokens
    assert answers_met_token_for_token > 0  # the check above is not vacuous


def test_engine_log_probs_are_the_model_s_on_both_turns(smollm2, rollout):
    model, _ = smollm2
    _, tree = rollout
    # Every answer and its first confidence sample: a forward pass of 135 M weights each.
    answers = [a for p in tree.prompts for a in p.answers]
    samples = [a.sample for a in answers] + [a.confidences[0] for a in answers]
    for sample in samples:
        expected = forward_logprobs(model, list(sample.context_ids), list(sample.token_ids))
        torch.testing.assert_close(torch.tensor(sample.logprobs), expected, rtol=0, atol=1e-4)


class ScriptedEngine:
    """Replies with fixed texts (turn 1: `answers` in turn; turn 2: a stated confidence)."""

    def __init__(self, tokenizer, answers: list[str]):
        self.tokenizer, self.answers = tokenizer, answers

    def generate(self, prompts, params):
        answering = "</answer>" in params.stop
        texts = self.answers if answering else ["<confidence>0.6</confidence>"] * params.n
        out = []
        for _ in prompts:
            gens = []
            for text in texts[:params.n]:
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                ids.append(self.tokenizer.eos_token_id)
                gens.append(Generation(ids, self.tokenizer.decode(ids, skip_special_tokens=True),
                                       [-1.0] * len(ids), "stop"))
            out.append(gens)
        return out

    def update_weights(self, model):
        pass


def test_a_reply_starting_with_blanks_is_encoded_again_and_each_row_keeps_its_context(
        smollm2):
    """The tokenizer joins turn 1's closing line break with the blanks that start such a reply,
    so turn 2 does not extend turn 1's tokens there: it is the template's encoding all the same,
    and a training row's context is the one its sample was drawn after, turn by turn."""
    _, tokenizer = smollm2
    examples = question_examples(1)
    replies = ["\n\n<think>Peru.</think>\n<answer>Lima</answer>",
               "<think>Peru.</think>\n<answer>Lima</answer>"]
    engine = ScriptedEngine(tokenizer, replies)
    settings = RolloutSettings(num_generations_answer=2, num_generations_confidence=2)
    tree = sample_answers(engine, tokenizer, examples, settings, "two_turn", seed=0)
    sample_confidences(engine, tokenizer, tree, examples, settings, seed=0)

    blank_led, plain = tree.prompts[0].answers
    for answer in (blank_led, plain):
        conversation = [*examples[0].messages,
                        {"role": "assistant", "content": answer.sample.text},
                        {"role": "user", "content": CONFIDENCE_QUESTION}]
        assert answer.confidences[0].context_ids == template_ids(tokenizer, conversation)
    turn1 = blank_led.sample.context_ids
    assert blank_led.confidences[0].context_ids[:len(turn1)] != turn1  # written again
    assert plain.confidences[0].context_ids[:len(turn1)] == turn1

    batch = build_train_batch(score_tree(tree), tokenizer)
    width = batch.prompt_ids.shape[1]
    for b, row in enumerate(iter_rows(tree)):
        context = batch.prompt_ids[b][batch.attention_mask[b, :width].bool()].tolist()
        assert context == list(row.sample.context_ids)
