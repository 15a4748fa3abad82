"""verl and TRL adapters give calibrl's scores."""

import importlib.util

import pytest

from calibrl.errors import UserError
from calibrl.rewards import trl_adapter, verl_adapter
from calibrl.tasks.countdown import compute_score

GT = {"target": 12, "numbers": [3, 4]}


def test_verl_custom_reward_function_loaded_by_path_like_verl():
    # verl loads `custom_reward_function.path` as a file module and takes `.name` from it.
    spec = importlib.util.spec_from_file_location("custom_module", verl_adapter.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module.compute_score
    assert fn("countdown", "<answer>3*4</answer>", GT, extra_info={"index": 0}) == 1.0
    assert fn("countdown", "<answer>3+4</answer>", GT) == 0.1
    assert fn("countdown", "nothing", GT) == 0.0


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
