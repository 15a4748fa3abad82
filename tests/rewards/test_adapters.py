"""verl and TRL adapters give calibrl's scores."""

import importlib.util
import inspect
import sys

import pytest

from calibrl.errors import UserError
from calibrl.rewards import trl_adapter, verl_adapter
from calibrl.tasks.countdown import compute_score

GT = {"target": 12, "numbers": [3, 4]}


def _load_like_verl(path: str, name: str, reward_kwargs: dict) -> object:
    # What verl's `get_custom_reward_fn` does with `reward.custom_reward_function.{path,name}`:
    # a file module registered as "custom_module", the named function, `reward_kwargs` merged
    # into every call's keyword arguments.
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["custom_module"]
    raw_fn = getattr(module, name)
    return lambda *args, **kwargs: raw_fn(*args, **{**kwargs, **reward_kwargs})


def test_verl_custom_reward_function_contract():
    fn = _load_like_verl(verl_adapter.__file__, "compute_score", {"format_bonus": 0.5})
    # verl's reward managers pass everything by keyword.
    def call(text: str) -> dict:
        return fn(data_source="countdown", solution_str=text, ground_truth=GT,
                  extra_info={"index": 0, "split": "train"})

    assert call("<think>3*4=12</think><answer>3*4</answer>") == {"score": 1.0, "acc": 1.0}
    assert call("<answer>3+4</answer>") == {"score": 0.1, "acc": 0.0}
    assert call("nothing") == {"score": 0.0, "acc": 0.0}
    assert fn("countdown", "<answer>4*3</answer>", GT) == {"score": 1.0, "acc": 1.0}


def test_verl_reward_signature_matches_verl_when_installed():
    params = inspect.signature(verl_adapter.compute_score).parameters
    assert list(params)[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"]
    assert params["extra_info"].default is None
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if importlib.util.find_spec("verl") is None:
        return  # verl is not a dependency; the contract above is what its loader relies on
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create({"custom_reward_function": {
        "path": verl_adapter.__file__, "name": "compute_score", "reward_kwargs": {}}})
    fn = get_custom_reward_fn(config)
    assert fn(data_source="countdown", solution_str="<answer>3*4</answer>", ground_truth=GT,
              extra_info=None)["score"] == 1.0


def test_trl_reward_reads_reward_model_column_and_conversational_completions():
    completions = ["<think>..</think>\n<answer>3*4</answer>", "<answer>4-3</answer>",
                   [{"role": "assistant", "content": "<answer>4*3</answer>"}]]
    kwargs = {"reward_model": [{"style": "rule", "ground_truth": GT}] * 3,
              "data_source": ["countdown"] * 3}
    assert trl_adapter.countdown_reward(completions, **kwargs) == [1.0, 0.1, 1.0]
    assert trl_adapter.countdown_accuracy(completions, **kwargs) == [1.0, 0.0, 1.0]


def test_trl_reward_reads_public_target_nums_columns():
    out = trl_adapter.countdown_reward(["<answer>3*4</answer>", "x"], target=[12, 12],
                                       nums=[[3, 4], [3, 4]])
    assert out == [compute_score("<answer>3*4</answer>", GT), 0.0]


def test_trl_reward_without_ground_truth_is_a_clear_error():
    with pytest.raises(UserError, match="reward_model"):
        trl_adapter.countdown_reward(["x"], prompts=["p"])
