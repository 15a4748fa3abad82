"""Data files: schema round trip, atomic deterministic writes, TinyZero and {target, nums} input."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibrl.data import TaskExample
from calibrl.data import parquet as parquet_module
from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.countdown import compute_score
from calibrl.tasks.countdown.data import countdown_example, examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.tasks.files import load_examples, write_examples

COUNTDOWN = get_task("countdown")
TINYZERO_PROMPT = (
    "A conversation between User and Assistant. ... User: Using the numbers [44, 19, 35], "
    "create an equation that equals 98. ... Assistant: Let me solve this step by step.\n<think>"
)


def generated(seed=0, n=12):
    train, test = generate_countdown(n, seed=seed, test_size=3)
    return examples_from_instances(train, "train"), examples_from_instances(test, "test")


def test_round_trip_through_parquet(tmp_path):
    train, test = generated()
    write_examples(tmp_path / "train.parquet", train)
    write_examples(tmp_path / "test.parquet", test)
    assert load_examples(tmp_path / "train.parquet") == train
    assert load_examples(tmp_path / "test.parquet") == test
    row = pq.read_table(tmp_path / "train.parquet").to_pylist()[0]
    example = train[0]
    assert row == {
        "data_source": "countdown",
        "prompt": get_task("countdown").make_prompt(example.ground_truth),
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": example.ground_truth},
        "extra_info": {
            "split": "train",
            "index": 0,
            "solution": example.extra["solution"],
            "steps": example.extra["steps"],
        },
    }
    for e in train + test:
        answer = f"<answer>{e.extra['solution']}</answer>"
        assert get_task(e.data_source).score(answer, e.ground_truth) == 1.0
    assert [e.index for e in train] == list(range(len(train)))


def test_same_seed_gives_identical_bytes(tmp_path):
    for name in ("a", "b"):
        write_examples(tmp_path / name / "train.parquet", generated(seed=5)[0])
    assert (tmp_path / "a" / "train.parquet").read_bytes() == (
        tmp_path / "b" / "train.parquet"
    ).read_bytes()


def test_empty_split_keeps_the_schema(tmp_path):
    write_examples(tmp_path / "test.parquet", [])
    assert pq.read_schema(tmp_path / "test.parquet") == get_task("countdown").arrow_schema()
    assert load_examples(tmp_path / "test.parquet") == []


def test_unknown_extra_keys_are_kept(tmp_path):
    example = countdown_example({"target": 3, "numbers": [1, 2]}, 0, "train", {"source_id": "x7"})
    write_examples(tmp_path / "t.parquet", [example])
    (loaded,) = load_examples(tmp_path / "t.parquet")
    assert loaded.extra == {"solution": None, "steps": None, "source_id": "x7"}


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "train.parquet"
    train, _ = generated()
    write_examples(path, train)
    before = path.read_bytes()

    def fail(table, where):
        with open(where, "wb") as f:
            f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(parquet_module.pq, "write_table", fail)
    with pytest.raises(OSError, match="disk full"):
        write_examples(path, train[:2])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.parquet"]  # no temp file left


def tinyzero_rows():
    # As TinyZero's countdown.py writes them: one user message, extra_info {split, index}.
    return [
        {
            "data_source": "countdown",
            "prompt": [{"role": "user", "content": TINYZERO_PROMPT}],
            "ability": "math",
            "reward_model": {
                "style": "rule",
                "ground_truth": {"target": 98, "numbers": [44, 19, 35]},
            },
            "extra_info": {"split": "train", "index": 17},
        },
        {
            "data_source": "countdown",
            "prompt": [{"role": "user", "content": "..."}],
            "ability": "math",
            "reward_model": {
                "style": "rule",
                "ground_truth": {"target": 64, "numbers": [63, 95, 96]},
            },
            "extra_info": {"split": "train", "index": 18},
        },
    ]


def test_reads_tinyzero_parquet(tmp_path):
    path = tmp_path / "tinyzero.parquet"
    pq.write_table(pa.Table.from_pylist(tinyzero_rows()), path)
    first, second = load_examples(path)
    assert first == TaskExample(
        "countdown",
        [{"role": "user", "content": TINYZERO_PROMPT}],
        {"target": 98, "numbers": [44, 19, 35]},
        index=17,
        split="train",
    )
    assert second.index == 18


RAW = [
    {"target": 98, "nums": [44, 19, 35]},
    {"target": 64, "nums": [63, 95, 96]},
    {"target": 98, "nums": [35, 44, 19]},
    {"target": 7, "nums": [1, 1, 1]},
]


def write_raw(path, rows=RAW):
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".parquet", ".json", ".jsonl"])
def test_reads_target_nums_rows(tmp_path, suffix):
    examples = load_examples(write_raw(tmp_path / f"raw{suffix}"))
    task = get_task("countdown")
    assert [e.ground_truth for e in examples] == [
        {"target": r["target"], "numbers": r["nums"]} for r in RAW
    ]
    assert [e.index for e in examples] == [0, 1, 2, 3]
    assert examples[0].messages == task.make_prompt({"target": 98, "numbers": [44, 19, 35]})
    assert all(e.data_source == "countdown" and e.split is None for e in examples)


def test_json_lines_in_a_json_file(tmp_path):
    path = tmp_path / "raw.json"  # `datasets.Dataset.to_json` writes JSON lines
    path.write_text("".join(json.dumps(r) + "\n" for r in RAW))
    assert len(load_examples(path)) == len(RAW)


def test_convert_drops_duplicates_and_unsolvable_and_splits(tmp_path):
    result = COUNTDOWN.convert_file(write_raw(tmp_path / "raw.jsonl"), test_size=1)
    assert (result.rows_read, result.duplicates, result.unsolvable) == (4, 1, 1)
    assert [e.ground_truth["target"] for e in result.test] == [98]
    assert [e.ground_truth["target"] for e in result.train] == [64]
    (example,) = result.train
    assert (example.split, example.index) == ("train", 0)
    assert (
        compute_score(f"<answer>{example.extra['solution']}</answer>", example.ground_truth) == 1.0
    )
    # without solving, the unsolvable row stays and no solution is attached
    kept = COUNTDOWN.convert_file(tmp_path / "raw.jsonl", test_size=0, solve=False)
    assert [e.ground_truth["target"] for e in kept.train] == [98, 64, 7]
    assert "solution" not in kept.train[0].extra


def test_convert_tinyzero_rebuilds_prompts_and_limits_rows(tmp_path):
    path = tmp_path / "tinyzero.parquet"
    pq.write_table(pa.Table.from_pylist(tinyzero_rows()), path)
    result = COUNTDOWN.convert_file(path, n=1, test_size=0)
    (example,) = result.train
    assert example.messages == get_task("countdown").make_prompt(example.ground_truth)
    with pytest.raises(UserError, match="2 usable rows, fewer than n=3"):
        COUNTDOWN.convert_file(path, n=3)
