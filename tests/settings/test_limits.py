"""Values the libraries would refuse minutes into a run are refused when settings are built."""

from pathlib import Path

import numpy as np
import pytest
import torch

from calibrl.errors import UserError
from calibrl.settings import EvalSection, ProbeSettings, SFTSettings, TrainSettings
from calibrl.settings.base import SEED_LIMIT

SFT_REQUIRED = {"data": "d.parquet", "out": "o", "steps": 1}
SEEDED = [(TrainSettings, {}), (SFTSettings, SFT_REQUIRED), (EvalSection, {}),
          (ProbeSettings, {"model": "m", "data": "d.parquet", "out": "o"})]


@pytest.mark.parametrize(("cls", "required"), SEEDED)
@pytest.mark.parametrize("seed", [0, 1, SEED_LIMIT - 1])
def test_seeds_numpy_and_torch_accept_pass(cls, required, seed):
    np.random.default_rng(seed), np.random.RandomState(seed)
    torch.Generator().manual_seed(seed)
    assert cls.create(**required, seed=seed).seed == seed


@pytest.mark.parametrize(("cls", "required"), SEEDED)
@pytest.mark.parametrize("seed", [-1, SEED_LIMIT, 2**64])
def test_seeds_numpy_refuses_are_one_line_errors(cls, required, seed):
    with pytest.raises(ValueError):
        np.random.RandomState(seed)
    with pytest.raises(UserError, match=r"^config seed: Input should be") as info:
        cls.create(**required, seed=seed)
    assert "\n" not in str(info.value)


def test_adam_betas_are_refused_exactly_where_torch_refuses_them():
    param = [torch.nn.Parameter(torch.zeros(1))]
    for betas in [(0.9, 0.999), (0.0, 0.0)]:
        torch.optim.AdamW(param, betas=betas)
        assert TrainSettings.create(optim={"betas": betas}).optim.betas == betas
        assert SFTSettings.create(**SFT_REQUIRED, betas=betas).betas == betas
    for betas in [(1.5, 0.9), (0.9, 1.0), (-0.1, 0.9), (float("nan"), 0.9)]:
        with pytest.raises(ValueError):
            torch.optim.AdamW(param, betas=betas)
        with pytest.raises(UserError, match=r"^config optim\.betas\.[01]: "):
            TrainSettings.create(optim={"betas": betas})
        with pytest.raises(UserError, match=r"^config betas\.[01]: "):
            SFTSettings.create(**SFT_REQUIRED, betas=betas)


@pytest.mark.parametrize("key", ["lr", "weight_decay"])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_numbers_are_refused_in_every_section(key, value):
    with pytest.raises(UserError, match=f"config optim.{key}: Input should be a finite number"):
        TrainSettings.create(optim={key: value})
    with pytest.raises(UserError, match=f"config {key}: Input should be a finite number"):
        SFTSettings.create(**SFT_REQUIRED, **{key: value})
    with pytest.raises(UserError, match="config algorithm.lambda_ans: Input should be a finite"):
        TrainSettings.create(algorithm={"lambda_ans": value})


@pytest.mark.parametrize(("values", "key"), [({"max_examples": -48}, "max_examples"),
                                             ({"temperature": -1}, "temperature"),
                                             ({"samples": 0}, "samples")])
def test_negative_counts_and_temperatures_are_refused(values, key):
    with pytest.raises(UserError, match=f"^config {key}: Input should be greater than"):
        EvalSection.create(**values)


@pytest.mark.parametrize(("change", "message"), [
    ({"numbers": [4, 2]}, "numbers must be [fewest, most] with 1 <= fewest <= most, got [4, 2]"),
    ({"numbers": [0, 3], "size_weights": [1, 1, 1, 1]}, "1 <= fewest"),
    ({"size_weights": [-1, 2, 1]}, "size_weights must be non-negative"),
    ({"sft_size_weights": [1, 1]}, "sft_size_weights needs one weight per size 2..4, got 2"),
    ({"test_size": 16000, "n_problems": 16000},
     "test_size (16000) must be below n_problems (16000)"),
])
def test_demo_data_sizes_and_weights_must_fit_together(change, message):
    import yaml

    from calibrl.settings import DemoSettings

    values = yaml.safe_load((Path(__file__).parents[2] / "configs/demo.yaml").read_text())
    values["data"].update(change)
    with pytest.raises(UserError) as info:
        DemoSettings.create(**values)
    assert str(info.value).startswith("config data: ") and message in str(info.value)
    assert "{" not in str(info.value)  # the section's values are not dumped into the line
