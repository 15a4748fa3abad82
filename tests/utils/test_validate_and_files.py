"""Pure value checks for settings, and the file helpers' one-line errors."""

import errno

import numpy as np
import pytest
import torch

from calibrl.errors import UserError
from calibrl.utils.files import (
    check_output_dir,
    check_output_file,
    describe_os_error,
    read_text_file,
)
from calibrl.utils.validate import (
    SEED_LIMIT,
    check_adam_betas,
    check_non_negative,
    check_positive,
    check_seed,
)


@pytest.mark.parametrize("seed", [0, 1, SEED_LIMIT - 1])
def test_seeds_numpy_accepts_pass(seed):
    np.random.default_rng(seed), np.random.RandomState(seed)  # the libraries agree
    assert check_seed(seed) == seed


@pytest.mark.parametrize("seed", [-1, SEED_LIMIT, 2**64, 1.0, True, "3"])
def test_seeds_outside_the_range_are_refused_with_the_name(seed):
    with pytest.raises(UserError, match="--seed must be an integer in"):
        check_seed(seed, "--seed")


def test_adam_betas_match_what_torch_accepts():
    param = [torch.nn.Parameter(torch.zeros(1))]
    for betas in [(0.9, 0.999), (0.0, 0.0)]:
        torch.optim.AdamW(param, betas=betas)
        assert check_adam_betas(betas) == betas
    for betas in [(1.5, 0.9), (0.9, 1.0), (-0.1, 0.9), (float("nan"), 0.9)]:
        with pytest.raises(ValueError):
            torch.optim.AdamW(param, betas=betas)
        with pytest.raises(UserError, match="optim.betas must be two numbers"):
            check_adam_betas(betas, "optim.betas")
    with pytest.raises(UserError):
        check_adam_betas((0.9,))


@pytest.mark.parametrize("value", [0, -48, -1.0, float("nan"), float("inf"), True])
def test_positive_refuses_zero_negative_and_non_finite(value):
    with pytest.raises(UserError, match="--max-examples must be greater than 0"):
        check_positive(value, "--max-examples")


def test_non_negative_allows_zero_only_from_below():
    assert check_non_negative(0.0, "--temperature") == 0.0
    assert check_positive(3, "--samples") == 3
    with pytest.raises(UserError, match="--temperature must be at least 0, got -1"):
        check_non_negative(-1, "--temperature")


def test_read_text_file_refuses_non_utf8_in_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"seed: 1 # caf\xe9\n")
    with pytest.raises(UserError) as info:
        read_text_file(path, "config file")
    assert "not UTF-8" in str(info.value) and "\n" not in str(info.value)
    path.write_text("seed: 1\n", encoding="utf-8")
    assert read_text_file(path, "config file") == "seed: 1\n"
    with pytest.raises(UserError, match="cannot read config file"):
        read_text_file(tmp_path / "missing.yaml", "config file")


def test_check_output_dir_creates_nothing_and_refuses_files(tmp_path):
    check_output_dir(tmp_path / "a" / "b", "--out")
    assert list(tmp_path.iterdir()) == []  # the write probe is gone, nothing was created
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="exists and is not a folder"):
        check_output_dir(tmp_path / "f", "--out")
    with pytest.raises(UserError, match="is a file, not a folder"):
        check_output_dir(tmp_path / "f" / "sub", "--out")
    with pytest.raises(UserError, match="is a folder, expected a file name"):
        check_output_file(tmp_path, "--plot")


def test_describe_os_error_only_for_user_fixable_errors():
    full = OSError(errno.ENOSPC, "No space left on device", "/x/train.parquet")
    assert describe_os_error(full) == "cannot write /x/train.parquet: No space left on device"
    assert describe_os_error(OSError(errno.ENOENT, "No such file", "/x")) is None
