"""Malformed data rows: a `UserError` that names the file, the row and what is wrong."""

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibrl.errors import UserError
from calibrl.tasks.countdown.data import countdown_ground_truth
from calibrl.tasks.files import load_examples

GOOD = {
    "data_source": "countdown",
    "prompt": [{"role": "user", "content": "q"}],
    "ability": "math",
    "reward_model": {"style": "rule", "ground_truth": {"target": 3, "numbers": [1, 2]}},
    "extra_info": {"split": "train", "index": 0},
}


def with_ground_truth(**changes):
    gt = {**GOOD["reward_model"]["ground_truth"], **changes}
    return {**GOOD, "reward_model": {"style": "rule", "ground_truth": gt}}


def without(key):
    return {k: v for k, v in GOOD.items() if k != key}


BAD_ROWS = [
    (without("prompt"), "missing 'prompt'"),
    (without("reward_model"), "missing 'reward_model'"),
    ({"target": 5}, "missing 'nums'"),
    ({"question": "x"}, "missing 'target', 'nums'"),
    ([1, 2], "expected an object"),
    ({**GOOD, "data_source": "sudoku"}, "unknown data_source 'sudoku'"),
    ({**GOOD, "data_source": 3}, "data_source is 3"),
    ({**GOOD, "prompt": "just text"}, "expected a non-empty list of messages"),
    ({**GOOD, "prompt": []}, "expected a non-empty list of messages"),
    ({**GOOD, "prompt": [{"role": "user"}]}, "prompt[0].content is None"),
    ({**GOOD, "reward_model": {"style": "rule"}}, "expected {'ground_truth'"),
    ({**GOOD, "extra_info": {"index": "seven"}}, "extra_info.index is 'seven'"),
    (with_ground_truth(numbers=[1, "2"]), "numbers[1] is '2', expected an integer"),
    (with_ground_truth(numbers=[1, 2.5]), "numbers[1] is 2.5"),
    (with_ground_truth(numbers=[True, 2]), "numbers[0] is True"),
    (with_ground_truth(numbers=[]), "numbers is empty"),
    (with_ground_truth(numbers=[3, -1]), "negative"),
    (with_ground_truth(numbers="12"), "numbers is '12', expected a list"),
    (with_ground_truth(target=None), "target is None"),
    (with_ground_truth(target="3"), "target is '3'"),
    ({"target": 5, "nums": None}, "numbers is None"),
]


@pytest.mark.parametrize("row, message", BAD_ROWS)
def test_bad_row_names_file_row_and_problem(tmp_path, row, message):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(UserError) as err:
        load_examples(path)
    text = str(err.value)
    assert text.startswith(f"{path} row 1: ")
    assert message in text
    assert "\n" not in text


def test_nan_target_in_parquet(tmp_path):
    path = tmp_path / "data.parquet"
    rows = [{"target": 5.0, "nums": [2, 3]}, {"target": math.nan, "nums": [2, 3]}]
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(UserError, match=r"data.parquet row 1: target is nan, expected an integer"):
        load_examples(path)


def test_integral_floats_are_accepted():
    assert countdown_ground_truth({"target": 5.0, "numbers": [2.0, 3]}) == {
        "target": 5,
        "numbers": [2, 3],
    }
    for target in (math.inf, 5.5):
        with pytest.raises(UserError, match="expected an integer"):
            countdown_ground_truth({"target": target, "numbers": [2, 3]})


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "data.jsonl",
            '{"target": 5, "nums": [2, 3]}\n{"target": 5,\n',
            "line 2 is not valid JSON",
        ),
        ("data.json", '[{"target": 5, "nums": [2, 3]},', "not valid JSON"),
        ("data.csv", "target,nums\n", "unknown file type"),
        ("data.parquet", "not parquet at all", "cannot read as parquet"),
    ],
)
def test_unreadable_files(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_examples(path)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_examples(tmp_path / "nope.parquet")
