"""Data files through their tasks: each task's own Arrow schema, aliases, and a task's
conversion that reads its rows without the registry."""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.tasks import get_task, known_sources
from calibrl.tasks.files import load_examples, write_examples, write_splits

COUNTDOWN, NUMERIC_QA = get_task("countdown"), get_task("numeric_qa")
ROW = {"data_source": "countdown_3to4", "prompt": [{"role": "user", "content": "q"}],
       "reward_model": {"ground_truth": {"target": 3, "numbers": [1, 2]}}}


@pytest.mark.parametrize("task", [COUNTDOWN, NUMERIC_QA], ids=lambda task: task.name)
def test_each_task_writes_its_own_schema(tmp_path, task):
    train, test = task.generate(6, seed=1, test_size=2)
    paths = write_splits(tmp_path, {"train": train, "test": test})
    assert pq.read_schema(paths["train"]) == task.arrow_schema()
    assert load_examples(paths["train"]) == train and load_examples(paths["test"]) == test


def test_one_file_holds_one_task(tmp_path):
    (countdown,), (numeric,) = COUNTDOWN.generate(1, test_size=0)[0], NUMERIC_QA.generate(
        1, test_size=0)[0]
    with pytest.raises(UserError, match="one file holds one task, got countdown, numeric_qa"):
        write_examples(tmp_path / "mixed.parquet", [countdown, numeric])


def test_a_task_answers_to_its_aliases():
    assert {"countdown_3to4", "countdown_tasks", "numeric-qa"} <= set(known_sources())
    assert get_task("countdown_tasks") is COUNTDOWN and get_task("numeric-qa") is NUMERIC_QA


def test_an_alias_is_read_as_written_and_stored_with_the_tasks_schema(tmp_path):
    path = tmp_path / "alias.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    (example,) = load_examples(path)
    assert example == TaskExample("countdown_3to4", ROW["prompt"], {"target": 3, "numbers": [1, 2]},
                                  0)
    write_examples(tmp_path / "alias.parquet", [example])
    assert pq.read_schema(tmp_path / "alias.parquet") == COUNTDOWN.arrow_schema()


def test_countdown_conversion_takes_its_aliases_and_refuses_other_tasks_rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    (example,) = COUNTDOWN.convert_file(path, test_size=0).train
    assert example.data_source == "countdown"
    numeric = {**ROW, "data_source": "numeric_qa"}
    path.write_text(json.dumps(ROW) + "\n" + json.dumps(numeric) + "\n")
    with pytest.raises(UserError, match=r"rows.jsonl row 1: data_source 'numeric_qa' is not "
                                        r"Countdown"):
        COUNTDOWN.convert_file(path, test_size=0)


def test_the_data_layer_loads_no_task():
    """Storage stands alone: reading a file imports nothing of `calibrl.tasks`."""
    code = ("import sys, calibrl.data, calibrl.data.sources; "
            "print(sorted(m for m in sys.modules if m.startswith('calibrl.tasks')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
