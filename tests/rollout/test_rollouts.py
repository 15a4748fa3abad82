"""The three mode rollouts: tree shapes, conversations of turn 2, truncation, templates."""

import pytest
import torch

from calibrl.algo import score_tree
from calibrl.data import TaskExample
from calibrl.models import build_tiny_model, build_tokenizer
from calibrl.protocol.prompts import CONFIDENCE_QUESTION, RLCR_INSTRUCTION
from calibrl.rollout.factory import make_engine
from calibrl.rollout.rollouts import RolloutSettings, encode_messages, plain_template, run_rollout
from calibrl.tasks.countdown import COUNTDOWN


@pytest.fixture(scope="module")
def parts():
    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2)
    examples = [TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i)
                for i, gt in enumerate([{"target": 3, "numbers": [1, 2]},
                                        {"target": 24, "numbers": [4, 6, 1]}])]
    return tokenizer, make_engine("hf", model, tokenizer), examples


SETTINGS = RolloutSettings(num_generations_answer=3, num_generations_confidence=2,
                           max_answer_tokens=5, max_confidence_tokens=4)


def test_two_turn_tree_shape_and_turn2_conversation(parts):
    tokenizer, engine, examples = parts
    tree = run_rollout(engine, tokenizer, examples, SETTINGS, "two_turn", 0)
    assert [len(p.answers) for p in tree.prompts] == [3, 3]
    for prompt, ex in zip(tree.prompts, examples, strict=True):
        assert prompt.index == ex.index and prompt.ground_truth == ex.ground_truth
        for answer in prompt.answers:
            assert len(answer.sample.token_ids) <= 5
            assert len(answer.confidences) == 2
            context = tokenizer.decode(answer.confidences[0].context_ids)
            # prompt -> the sampled answer as the assistant turn -> the confidence question
            assert context.index(ex.messages[-1]["content"]) < context.index(CONFIDENCE_QUESTION)
            assert answer.sample.text in context
            assert context.rstrip().endswith("<|im_start|>assistant")
    # answers cut at the limit still got their confidence turn (random weights: all are cut)
    assert any(a.sample.finish_reason == "length" and a.confidences
               for p in tree.prompts for a in p.answers)
    score_tree(tree)
    assert all(a.correct is not None for p in tree.prompts for a in p.answers)


def test_rlcr_and_rlvr_are_single_turn(parts):
    tokenizer, engine, examples = parts
    rlcr = run_rollout(engine, tokenizer, examples, SETTINGS, "rlcr", 0)
    rlvr = run_rollout(engine, tokenizer, examples, SETTINGS, "rlvr", 0)
    for tree in (rlcr, rlvr):
        assert all(not a.confidences for p in tree.prompts for a in p.answers)
    rlcr_context = tokenizer.decode(rlcr.prompts[0].answers[0].sample.context_ids)
    assert RLCR_INSTRUCTION.strip() in rlcr_context
    assert RLCR_INSTRUCTION.strip() not in tokenizer.decode(
        rlvr.prompts[0].answers[0].sample.context_ids)
    # a single-turn RLCR completion may use the answer and the confidence budget
    assert max(len(a.sample.token_ids) for p in rlcr.prompts for a in p.answers) <= 9


def test_same_seed_same_rollout(parts):
    tokenizer, engine, examples = parts
    a = run_rollout(engine, tokenizer, examples, SETTINGS, "two_turn", 7)
    b = run_rollout(engine, tokenizer, examples, SETTINGS, "two_turn", 7)
    texts = lambda t: [(x.sample.text, [c.text for c in x.confidences])  # noqa: E731
                       for p in t.prompts for x in p.answers]
    assert texts(a) == texts(b)


def test_a_greedy_confidence_turn_after_sampled_answers(parts):
    from dataclasses import replace

    tokenizer, engine, examples = parts
    greedy = replace(SETTINGS, confidence_temperature=0.0)
    sampled = run_rollout(engine, tokenizer, examples, SETTINGS, "two_turn", 3)
    tree = run_rollout(engine, tokenizer, examples, greedy, "two_turn", 3)
    answers = lambda t: [a.sample.text for p in t.prompts for a in p.answers]  # noqa: E731
    assert answers(tree) == answers(sampled)  # turn 1 keeps its temperature
    assert len(set(answers(tree))) > 1
    for prompt in tree.prompts:
        for answer in prompt.answers:  # the two confidences of an answer: both its argmax
            first, second = answer.confidences
            assert first.token_ids == second.token_ids
            logits = engine.model(torch.tensor([first.context_ids])).logits[0, -1]
            assert first.token_ids[0] == int(logits.argmax())
    assert any(a.confidences[0].token_ids != a.confidences[1].token_ids
               for p in sampled.prompts for a in p.answers)


def test_plain_template_and_prompt_truncation(parts):
    tokenizer, _, examples = parts
    messages = examples[0].messages
    text = plain_template(messages)
    assert text.startswith("System: ") and text.endswith("\nAssistant:")
    ids = encode_messages(tokenizer, messages, "plain")
    assert tokenizer.decode(ids) == text
    assert encode_messages(tokenizer, messages, "auto", max_tokens=10) == \
        encode_messages(tokenizer, messages, "auto")[-10:]


def _token_ids(tree):
    return [[(a.sample.token_ids, [c.token_ids for c in a.confidences]) for a in p.answers]
            for p in tree.prompts]


def test_shards_of_a_batch_draw_the_samples_of_the_whole_batch(parts):
    # Several processes each roll out a shard; numbering the random streams from the shard's
    # first prompt makes the samples independent of how the batch was split.
    tokenizer, engine, examples = parts
    settings = RolloutSettings(num_generations_answer=2, num_generations_confidence=2,
                               max_answer_tokens=6, max_confidence_tokens=4)
    whole = run_rollout(engine, tokenizer, examples, settings, "two_turn", 7)
    first = run_rollout(engine, tokenizer, examples[:1], settings, "two_turn", 7, first_prompt=0)
    second = run_rollout(engine, tokenizer, examples[1:], settings, "two_turn", 7, first_prompt=1)
    assert _token_ids(whole) == _token_ids(first) + _token_ids(second)
    unnumbered = run_rollout(engine, tokenizer, examples[1:], settings, "two_turn", 7)
    assert _token_ids(unnumbered) != _token_ids(second)  # not vacuous: the offset matters


class NumberedEngine:
    """Turn 1: the k-th of n answers is `<answer>k + k</answer>`; turn 2: `0.5` stated."""

    def __init__(self, tokenizer):
        self.tokenizer, self.turn2_prompts = tokenizer, []

    def generate(self, prompts, params):
        from calibrl.protocol.tags import ANSWER_CLOSE
        from calibrl.rollout.engine import Generation

        if ANSWER_CLOSE in params.stop:
            texts = [f"<answer>{k} + {k}</answer>" for k in range(params.n)]
        else:
            self.turn2_prompts += prompts
            texts = ["<confidence>0.5</confidence>"] * params.n
        out = []
        for _ in prompts:
            ids = [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
            out.append([Generation(i, t, [-1.0] * len(i), "stop")
                        for i, t in zip(ids, texts, strict=True)])
        return out

    def update_weights(self, model):
        pass


def test_turn2_shows_the_prompts_other_answers_when_asked(parts):
    from dataclasses import replace

    from calibrl.algo import build_train_batch

    tokenizer, _, examples = parts
    engine = NumberedEngine(tokenizer)
    shown = replace(SETTINGS, reanswers_shown=2)
    tree = score_tree(run_rollout(engine, tokenizer, examples, shown, "two_turn", 0))
    expected = ["<analysis>Again: <answer>1 + 1</answer> <answer>2 + 2</answer></analysis>\n",
                "<analysis>Again: <answer>2 + 2</answer> <answer>0 + 0</answer></analysis>\n",
                "<analysis>Again: <answer>0 + 0</answer> <answer>1 + 1</answer></analysis>\n"]
    for prompt in tree.prompts:
        for answer, analysis in zip(prompt.answers, expected, strict=True):
            for confidence in answer.confidences:
                context = tokenizer.decode(confidence.context_ids)
                assert context.endswith(analysis)  # after the open assistant turn
                assert context.index(CONFIDENCE_QUESTION) < context.index(analysis)
                assert confidence.text == "<confidence>0.5</confidence>"
                assert confidence.reward == pytest.approx(1 - (0.5 - answer.correct) ** 2)
    # the analysis is context: only the stated value is sampled and trained
    batch = build_train_batch(tree, tokenizer)
    conf_rows = batch.sample_type == 1
    trained = [tokenizer.decode(ids[mask > 0]) for ids, mask in
               zip(batch.response_ids[conf_rows], batch.loss_mask[conf_rows], strict=True)]
    assert trained and all("Again" not in t and "0.5" in t for t in trained)
    # off by default: the model writes its whole reply
    plain = run_rollout(NumberedEngine(tokenizer), tokenizer, examples, SETTINGS, "two_turn", 0)
    context = tokenizer.decode(plain.prompts[0].answers[0].confidences[0].context_ids)
    assert "Again:" not in context and context.rstrip().endswith("<|im_start|>assistant")
