"""Data sources: local files (direct), folders and Hub data set ids (through `datasets`); no
test touches the network (`datasets.load_dataset` is replaced where a Hub id is read)."""

from __future__ import annotations

import json

import pytest

from calibrl.cli.main import main
from calibrl.data.sources import HubSource, hub_source
from calibrl.errors import UserError
from calibrl.tasks.files import load_examples

datasets = pytest.importorskip("datasets")

ROWS = [{"target": 3, "nums": [1, 2]}, {"target": 10, "nums": [2, 5, 7]}]


@pytest.mark.parametrize("spec,expected", [
    ("org/name", HubSource("org/name", None, "train")),
    ("org/name:test", HubSource("org/name", None, "test")),
    ("openai/gsm8k:main:test", HubSource("openai/gsm8k", "main", "test")),
    ("data/train.parquet", None),  # a file type: a local path, existing or not
    ("./org/name", None),
    ("/abs/name", None),
    ("a/b/c", None),
    ("org/name:a:b:c", None),
])
def test_hub_ids_are_told_from_local_paths(spec, expected):
    assert hub_source(spec) == expected


def test_a_first_part_that_is_a_local_folder_makes_a_local_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    assert hub_source("data/missing") is None
    with pytest.raises(UserError, match="data/missing"):
        load_examples("data/missing")


def _fake_hub(monkeypatch, rows=ROWS, error=None):
    calls = []

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        if error is not None:
            raise error
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


@pytest.mark.parametrize("spec,call", [
    ("Jiayi-Pan/Countdown-Tasks-3to4", ("Jiayi-Pan/Countdown-Tasks-3to4", None, "train")),
    ("me/countdown:main:test", ("me/countdown", "main", "test")),
])
def test_a_hub_id_is_read_with_load_dataset(spec, call, monkeypatch):
    calls = _fake_hub(monkeypatch)
    examples = load_examples(spec)
    assert calls == [call]
    assert [ex.ground_truth for ex in examples] == [
        {"target": 3, "numbers": [1, 2]}, {"target": 10, "numbers": [2, 5, 7]}]


def test_a_hub_failure_is_one_user_error_line(monkeypatch):
    _fake_hub(monkeypatch, error=ConnectionError("Couldn't reach the Hub\nretry later"))
    with pytest.raises(UserError) as info:
        load_examples("org/name")
    assert str(info.value) == ("Hub data set 'org/name': cannot load with datasets.load_dataset "
                               "(Couldn't reach the Hub)")


def test_a_folder_saved_by_datasets(tmp_path):
    dataset = datasets.Dataset.from_list(ROWS)
    dataset.save_to_disk(str(tmp_path / "one"))
    assert [ex.ground_truth["target"] for ex in load_examples(tmp_path / "one")] == [3, 10]
    datasets.DatasetDict({"train": dataset, "test": dataset}).save_to_disk(str(tmp_path / "two"))
    with pytest.raises(UserError, match="holds the splits train, test"):
        load_examples(tmp_path / "two")
    assert len(load_examples(tmp_path / "two" / "test")) == 2


def test_a_folder_of_data_files_goes_through_load_dataset(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert [ex.ground_truth["target"] for ex in load_examples(folder)] == [3, 10]


def test_a_file_is_read_directly_without_datasets(tmp_path, monkeypatch):
    _fake_hub(monkeypatch, error=AssertionError("load_dataset must not be called for a file"))
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert len(load_examples(path)) == 2
    with pytest.raises(UserError, match="no such file"):
        load_examples(tmp_path / "nope.parquet")


def test_train_reads_a_hub_id(tmp_path, monkeypatch, tiny_model_dir):
    calls = _fake_hub(monkeypatch)
    model = tiny_model_dir
    main(["train", f"model.path={model}", "data.train_path=someone/countdown:test",
          f"logging.output_dir={tmp_path}", "logging.run_name=run", "logging.tensorboard=false",
          "optim.total_steps=1", "rollout.prompts_per_step=2", "rollout.num_generations_answer=2",
          "rollout.max_answer_tokens=4", "rollout.max_confidence_tokens=4",
          "algorithm.mode=rlvr"])
    assert calls == [("someone/countdown", None, "test")]
    assert (tmp_path / "run/final-model/config.json").is_file()


def test_train_with_an_unreachable_hub_id_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    _fake_hub(monkeypatch, error=OSError("offline"))
    with pytest.raises(SystemExit) as info:
        main(["train", "data.train_path=someone/countdown", f"logging.output_dir={tmp_path}"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("error: Hub data set 'someone/countdown': cannot load with "
                   "datasets.load_dataset (offline)")
