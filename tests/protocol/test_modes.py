"""The mode registry: lookup and its error, the built-in specs, and a fourth mode that flows
through rollout, scoring, batch, stats, config and evaluation settings from one registration."""

from __future__ import annotations

import pytest

from calibrl.algo import build_train_batch, rollout_stats, score_tree
from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.models import build_tokenizer
from calibrl.protocol import modes
from calibrl.protocol.modes import ModeSpec, get_mode, mode_names, register_mode
from calibrl.protocol.prompts import RLCR_INSTRUCTION, confidence_messages, plain_answer_messages
from calibrl.protocol.tags import ANSWER_CLOSE, CONFIDENCE_CLOSE
from calibrl.rollout.engine import Generation
from calibrl.rollout.rollouts import RolloutSettings, run_rollout
from calibrl.settings import EvalSection, TrainSettings, load_settings
from calibrl.tasks import get_task

GT = {"target": 3, "numbers": [1, 2]}
RIGHT = "<think> 1 + 2 </think>\n<answer>1 + 2</answer>"
CONFIDENCE = "<analysis> ok </analysis>\n<confidence>0.8</confidence>"


def test_lookup_and_unknown_mode_error():
    assert mode_names()[:3] == ("two_turn", "rlcr", "rlvr")
    assert get_mode("rlcr").name == "rlcr"
    with pytest.raises(UserError, match=r"unknown mode 'ppo'; choose one of two_turn, rlcr, rlvr"):
        get_mode("ppo")
    with pytest.raises(UserError, match="unknown mode"):
        get_mode(["not", "hashable"])  # type: ignore[arg-type]


def test_builtin_specs():
    two_turn, rlcr, rlvr = (get_mode(n) for n in ("two_turn", "rlcr", "rlvr"))
    assert [m.turns for m in (two_turn, rlcr, rlvr)] == [2, 1, 1]
    assert [m.states_confidence for m in (two_turn, rlcr, rlvr)] == [True, True, False]
    assert (two_turn.answer_stop, rlcr.answer_stop) == ((ANSWER_CLOSE,), (CONFIDENCE_CLOSE,))
    assert [m.max_response_tokens(128, 48) for m in (two_turn, rlcr, rlvr)] == [128, 176, 128]
    assert [m.answer_token_budget(128, 48) for m in (two_turn, rlcr, rlvr)] == [128, 176, 128]
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    assert rlcr.answer_prompt(messages)[-1]["content"] == "q" + RLCR_INSTRUCTION
    assert two_turn.answer_prompt(messages) == messages and messages[-1]["content"] == "q"
    assert rlcr.confidence_texts("a", ["c"]) == ["a"]
    assert two_turn.confidence_texts("a", ["c", "d"]) == ["c", "d"]
    assert rlvr.confidence_texts("a", ["c"]) == []
    assert two_turn.score_answer(True, RIGHT) == 1.0 and rlvr.score_answer(False, RIGHT) == 0.0
    assert rlcr.score_answer(True, RIGHT + CONFIDENCE) == pytest.approx(1 + 1 - 0.2**2)
    assert two_turn.score_confidence(False, CONFIDENCE) == pytest.approx(1 - 0.8**2)
    with pytest.raises(ValueError, match="already registered"):
        register_mode(ModeSpec("rlvr", "again", plain_answer_messages, (ANSWER_CLOSE,),
                               "answer", "calibrl.rewards.calibration:correctness_reward"))


# --- a fourth mode, registered here only ------------------------------------------------------

def _shout(task_messages):
    messages = plain_answer_messages(task_messages)
    messages[-1]["content"] += " SHOUT"
    return messages


def _double(correct: bool, text: str) -> float:
    return 2.0 * float(correct)


SHOUT = ModeSpec(name="test_shout", summary="a test mode", answer_prompt=_shout,
                 answer_stop=(ANSWER_CLOSE,), answer_span="answer", answer_reward=_double,
                 confidence_prompt=confidence_messages,
                 confidence_reward="calibrl.rewards.calibration:brier_reward")


@pytest.fixture
def fourth_mode():
    register_mode(SHOUT)
    yield SHOUT
    modes._REGISTRY.pop(SHOUT.name)


class ScriptedEngine:
    """Answers every turn-1 prompt with `RIGHT` and every turn-2 prompt with `CONFIDENCE`."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    def generate(self, prompts, params):
        self.calls.append((prompts, params))
        text = RIGHT if ANSWER_CLOSE in params.stop else CONFIDENCE
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return [[Generation(ids, text, [-1.0] * len(ids), "stop")] * params.n for _ in prompts]

    def update_weights(self, model):
        pass


def test_a_fourth_mode_flows_through_every_caller(fourth_mode):
    tokenizer = build_tokenizer()
    engine = ScriptedEngine(tokenizer)
    examples = [TaskExample("countdown", get_task("countdown").make_prompt(GT), GT, 0)]
    settings = RolloutSettings(num_generations_answer=2, num_generations_confidence=2)
    tree = score_tree(run_rollout(engine, tokenizer, examples, settings, "test_shout", seed=0))

    (turn1, params1), (_, params2) = engine.calls
    assert tokenizer.decode(turn1[0]).count(" SHOUT") == 1
    assert params1.stop == (ANSWER_CLOSE,) and params2.stop == (CONFIDENCE_CLOSE,)
    answers = tree.prompts[0].answers
    assert [a.sample.reward for a in answers] == [2.0, 2.0]  # the mode's own reward
    assert [c.reward for c in answers[0].confidences] == pytest.approx([1 - 0.2**2] * 2)

    batch = build_train_batch(tree, tokenizer, confidence_level="prompt")
    assert len(batch) == 2 + 4
    stats = rollout_stats(tree)
    assert stats["confidence/count"] == 4 and stats["calibration/confidence_mean"] == 0.8
    assert settings.max_response_tokens("test_shout") == settings.max_answer_tokens

    train = load_settings(TrainSettings, None, ["algorithm.mode=test_shout"])
    assert train.algorithm.mode == "test_shout"
    assert EvalSection(mode="test_shout").mode == "test_shout"


def test_config_offers_the_registered_modes():
    from calibrl.settings.sections import AlgorithmSection

    help_text = AlgorithmSection.model_fields["mode"].description
    assert all(name in help_text for name in ("two_turn", "rlcr", "rlvr"))
    assert AlgorithmSection().mode == modes.DEFAULT_MODE == "two_turn"
