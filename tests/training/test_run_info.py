"""A run says what it was launched as: world size, distributed type and mixed precision are
printed at start-up and kept in `run_info.json` beside config.yaml (which stays loadable as a
config); a resumed run keeps the launches before it. The 2-process launch is checked in
test_multi_process.py (world size 2)."""

import json
from types import SimpleNamespace

from accelerate import Accelerator
from accelerate.utils import DistributedType

from calibrl.settings import TrainSettings, load_settings
from calibrl.training.distributed import RUN_INFO_FILE, record_launch


def test_one_process_is_printed_and_recorded_as_world_size_1(tmp_path, capsys):
    accelerator = Accelerator()  # this test process: one plain process
    info = record_launch(accelerator, tmp_path)
    expected = {"world_size": 1, "distributed_type": "NO",
                "mixed_precision": str(accelerator.mixed_precision),
                "device": str(accelerator.device)}
    assert {k: info[k] for k in expected} == expected
    assert json.loads((tmp_path / RUN_INFO_FILE).read_text()) == info
    out = capsys.readouterr().out
    assert f"launch: world size 1 (NO), mixed precision {accelerator.mixed_precision}" in out


def test_a_resumed_run_keeps_its_earlier_launches(tmp_path, capsys):
    def launch(n: int, precision: str) -> SimpleNamespace:
        return SimpleNamespace(num_processes=n, distributed_type=DistributedType.MULTI_CPU,
                               mixed_precision=precision, device="cpu", is_main_process=True)

    record_launch(launch(2, "no"), tmp_path)
    record_launch(launch(4, "bf16"), tmp_path)
    info = record_launch(launch(1, "no"), tmp_path)
    assert info["world_size"] == 1
    assert [(e["world_size"], e["mixed_precision"]) for e in info["earlier_launches"]] == [
        (2, "no"), (4, "bf16")]
    assert all("earlier_launches" not in e for e in info["earlier_launches"])
    assert json.loads((tmp_path / RUN_INFO_FILE).read_text()) == info
    assert capsys.readouterr().out.count("launch: world size") == 3


def test_other_processes_write_and_print_nothing(tmp_path, capsys):
    other = SimpleNamespace(num_processes=2, distributed_type=DistributedType.MULTI_CPU,
                            mixed_precision="no", device="cpu", is_main_process=False)
    assert record_launch(other, tmp_path)["world_size"] == 2
    assert not (tmp_path / RUN_INFO_FILE).exists()
    assert capsys.readouterr().out == ""


def test_a_train_run_records_its_launch_beside_its_config(tmp_path, capsys):
    from calibrl.training.trainer import Trainer
    from training.coin_runs import coin_run, run_settings

    model, train = coin_run(tmp_path)
    out = tmp_path / "out"
    cfg = load_settings(TrainSettings, None, run_settings(
        model, train, out, "optim.total_steps=1", "rollout.prompts_per_step=2"))
    Trainer(cfg).train()
    run = out / "run"
    info = json.loads((run / RUN_INFO_FILE).read_text())
    assert (info["world_size"], info["distributed_type"]) == (1, "NO")
    assert info["mixed_precision"] == "no"  # no launcher, no optim.mixed_precision
    assert "launch: world size 1 (NO), mixed precision no" in capsys.readouterr().out
    again = load_settings(TrainSettings, run / "config.yaml")
    assert again.model_dump() == cfg.model_dump()
