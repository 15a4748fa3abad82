"""`calibrl train` on bad configs and data: one readable line on stderr, exit code 2."""

import json

import pytest

from calibrl.cli.main import main


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("cli")
    model = tiny_model_dir
    good = {"target": 3, "nums": [1, 2]}
    (root / "good.jsonl").write_text(json.dumps(good) + "\n")
    (root / "bad_row.jsonl").write_text(json.dumps(good) + "\n" + json.dumps({"target": 3}) + "\n")
    (root / "bad_numbers.jsonl").write_text(json.dumps({"target": 3, "nums": ["x", 2]}) + "\n")
    verl_row = {"data_source": "gsm8k", "prompt": [{"role": "user", "content": "q"}],
                "reward_model": {"style": "rule", "ground_truth": "4"}}
    (root / "unknown_source.jsonl").write_text(json.dumps(verl_row) + "\n")
    (root / "bad.yaml").write_text("optim: [1,\n")
    (root / "list.yaml").write_text("- a\n- b\n")
    return root, model


CASES = {
    "unknown key": (["optim.learning_rate=1"], "unknown config key 'optim.learning_rate'"),
    "wrong type": (["rollout.num_generations_answer=many"], "config rollout.num_generations_answer"),
    "bad value": (["optim.lr=-3"], "config optim.lr"),
    "G_c=1 per answer": (["rollout.num_generations_confidence=1"], "nothing to normalise per answer"),
    "bad override": (["optim.lr"], "is not key=value"),
    "missing data": (["data.train_path={root}/nope.parquet"], "nope.parquet"),
    "malformed row": (["data.train_path={root}/bad_row.jsonl"], "row 1"),
    "non-int numbers": (["data.train_path={root}/bad_numbers.jsonl"], "row 0"),
    "unknown data_source": (["data.train_path={root}/unknown_source.jsonl"], "gsm8k"),
    "missing model": (["model.path={root}/no-such-model"], "model path not found"),
    "vllm with tiny": (["rollout.engine=vllm", "model.path=tiny"], "vllm engine needs"),
    "unknown task module": (["data.task_modules=[no_such_module_xyz]"], "cannot import task module"),
    "bad resume": (["checkpoint.resume={root}/checkpoint-000001"], "not a complete calibrl checkpoint"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_train_input_is_one_line_exit_2(files, capsys, name):
    root, model = files
    overrides, expected = CASES[name]
    base = [f"model.path={model}", f"data.train_path={root}/good.jsonl",
            f"logging.output_dir={root}/runs", "logging.tensorboard=false"]
    argv = ["train", *base, *[o.format(root=root) for o in overrides]]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err
    assert expected in err


@pytest.mark.parametrize("config,expected", [("bad.yaml", "not valid YAML"),
                                             ("list.yaml", "must hold a mapping"),
                                             ("missing.yaml", "missing.yaml: no such file")])
def test_bad_config_files(files, capsys, config, expected):
    root, _ = files
    with pytest.raises(SystemExit) as info:
        main(["train", "--config", str(root / config)])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err
