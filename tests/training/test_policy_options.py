"""Training options that change the policy or what happens to it: gradient checkpointing, a
LoRA adapter (peft, optional) and pushing the final model to the Hub (never the network here)."""

from __future__ import annotations

import sys

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from calibrl.cli.main import main
from calibrl.errors import UserError
from calibrl.settings import TrainSettings, load_settings
from calibrl.training.trainer import Trainer
from training.test_trainer_e2e import _config, _data, _weights


def _trainer(tmp_path, model_dir, *extra):
    return Trainer(_config(tmp_path, model_dir, _data(tmp_path, "test_coin"), "rlvr",
                           "logging.tensorboard=false", *extra))


def _attention_calls(trainer) -> list[int]:
    """A counter of the first decoder layer's attention calls. transformers checkpoints a
    layer's `forward` (its own hooks stay outside), so a recomputation shows inside it; a
    pre-hook, since a recomputation stops once it has what the backward pass needs."""
    calls = [0]
    model = trainer._unwrapped()
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.model.layers[0].self_attn.register_forward_pre_hook(
        lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


# ---------------------------------------------------------------- gradient checkpointing
def test_gradient_checkpointing_recomputes_and_trains_the_same_weights(tmp_path, tiny_model_dir):
    runs = {}
    for flag in (False, True):
        trainer = _trainer(tmp_path / str(flag), tiny_model_dir, "optim.total_steps=1",
                           f"model.gradient_checkpointing={str(flag).lower()}")
        assert trainer._unwrapped().model.layers[0].gradient_checkpointing == flag
        calls = _attention_calls(trainer)
        trainer.train()
        runs[flag] = (calls[0], _weights(trainer._unwrapped()))
    (plain_calls, plain), (ckpt_calls, ckpt) = runs[False], runs[True]
    assert ckpt_calls > plain_calls  # the backward pass ran the layer again
    for key in plain:
        torch.testing.assert_close(ckpt[key], plain[key], rtol=0, atol=1e-6, msg=key)


# ---------------------------------------------------------------- LoRA
def test_lora_trains_only_the_adapter_and_saves_a_merged_model(tmp_path, tiny_model_dir):
    pytest.importorskip("peft")
    trainer = _trainer(tmp_path, tiny_model_dir, "optim.total_steps=2", "model.lora.r=4",
                       "model.lora.alpha=8")
    trained = {n for n, p in trainer._unwrapped().named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    initial = load_file(str(tiny_model_dir / "model.safetensors"))
    final = trainer.train()
    ckpt = tmp_path / "run/checkpoint-000002/model"
    assert (ckpt / "adapter_model.safetensors").is_file()
    assert not (ckpt / "model.safetensors").exists()
    merged = load_file(str(final / "model.safetensors"))
    assert set(merged) == set(initial)  # a plain model: no adapter keys
    changed = [k for k in initial if not torch.equal(initial[k], merged[k])]
    assert changed and all(k.endswith("proj.weight") for k in changed)
    AutoModelForCausalLM.from_pretrained(final)


def test_lora_run_resumes_to_identical_weights(tmp_path, tiny_model_dir):
    pytest.importorskip("peft")
    lora = ("model.lora.r=4", "optim.total_steps=2", "checkpoint.every=1")
    straight = _trainer(tmp_path / "a", tiny_model_dir, *lora).train()
    first = _trainer(tmp_path / "b", tiny_model_dir, *lora[:2], "optim.total_steps=1")
    first.train()
    (tmp_path / "b/run/final-model").rename(tmp_path / "b/final-of-step-1")
    resumed = _trainer(tmp_path / "b", tiny_model_dir, *lora, "checkpoint.resume=auto")
    assert resumed.resume_from is not None and resumed.resume_from.step == 1
    got = load_file(str(resumed.train() / "model.safetensors"))
    expected = load_file(str(straight / "model.safetensors"))
    after_one = load_file(str(tmp_path / "b/final-of-step-1/model.safetensors"))
    assert any(not torch.equal(after_one[k], expected[k]) for k in expected)  # not vacuous
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


def test_lora_without_peft_is_one_line_exit_2(tmp_path, tiny_model_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` raises ImportError
    data = _data(tmp_path, "test_coin")
    with pytest.raises(SystemExit) as info:
        main(["train", f"model.path={tiny_model_dir}", f"data.train_path={data}",
              f"logging.output_dir={tmp_path}/runs", "model.lora.r=8"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: model.lora.r > 0 needs peft: pip install 'calibrl[peft]'"


def test_lora_with_a_module_the_model_lacks_is_a_user_error(tmp_path, tiny_model_dir):
    pytest.importorskip("peft")
    with pytest.raises(UserError, match="model.lora"):
        _trainer(tmp_path, tiny_model_dir, "model.lora.r=4", "model.lora.target_modules=[nope]")


@pytest.mark.parametrize("overrides,expected", [
    (["model.lora.r=-1"], "config model.lora.r"),
    (["model.lora.r=4", "model.lora.dropout=1"], "config model.lora.dropout"),
    (["model.lora.rank=4"], "did you mean 'model.lora.r'"),
    (["model.lora.r=4", "rollout.engine=vllm", "model.path=org/m"], "not supported"),
    (["checkpoint.push_to_hub="], "config checkpoint.push_to_hub"),
])
def test_bad_policy_settings_are_refused(overrides, expected):
    with pytest.raises(UserError, match=expected):
        load_settings(TrainSettings, None, overrides)


# ---------------------------------------------------------------- push to the Hub
def _record_pushes(monkeypatch, fail: bool = False) -> list[tuple[str, object]]:
    pushed: list[tuple[str, object]] = []

    def push(self, repo_id, *args, **kwargs):
        if fail:
            raise RuntimeError("401 Client Error: not logged in")
        pushed.append((repo_id, self))

    monkeypatch.setattr(PreTrainedModel, "push_to_hub", push)
    monkeypatch.setattr(PreTrainedTokenizerBase, "push_to_hub", push)
    return pushed


def test_push_to_hub_pushes_the_final_model_and_tokenizer(tmp_path, tiny_model_dir, monkeypatch):
    pushed = _record_pushes(monkeypatch)
    trainer = _trainer(tmp_path, tiny_model_dir, "optim.total_steps=1",
                       "checkpoint.push_to_hub=me/calibrated")
    final = trainer.train()
    assert [repo for repo, _ in pushed] == ["me/calibrated", "me/calibrated"]
    model = next(obj for _, obj in pushed if isinstance(obj, PreTrainedModel))
    saved = load_file(str(final / "model.safetensors"))
    for key, value in model.state_dict().items():
        if key in saved:
            assert torch.equal(saved[key], value), key
    assert any(isinstance(obj, PreTrainedTokenizerBase) for _, obj in pushed)


def test_no_push_without_the_setting(tmp_path, tiny_model_dir, monkeypatch):
    pushed = _record_pushes(monkeypatch)
    _trainer(tmp_path, tiny_model_dir, "optim.total_steps=1").train()
    assert pushed == []


def test_a_failed_push_is_one_line_and_keeps_the_run(tmp_path, tiny_model_dir, monkeypatch):
    _record_pushes(monkeypatch, fail=True)
    trainer = _trainer(tmp_path, tiny_model_dir, "optim.total_steps=1",
                       "checkpoint.push_to_hub=me/calibrated")
    with pytest.raises(UserError, match="not logged in.*saved in") as info:
        trainer.train()
    assert "\n" not in str(info.value)
    assert (tmp_path / "run/final-model/model.safetensors").is_file()


# ---------------------------------------------------------------- the decoding step
def test_rollout_decode_reaches_the_engine(tmp_path, tiny_model_dir):
    assert _trainer(tmp_path / "a", tiny_model_dir).engine.decode == "exact"
    fused = _trainer(tmp_path / "b", tiny_model_dir, "rollout.decode=fused")
    assert fused.engine.decode == "fused"
    with pytest.raises(UserError, match="decode"):
        _trainer(tmp_path / "c", tiny_model_dir, "rollout.decode=fast")


# ---------------------------------------------------------------- top layers only
def test_train_layers_updates_only_the_top_block(tmp_path, tiny_model_dir):
    trainer = _trainer(tmp_path, tiny_model_dir, "optim.total_steps=1", "model.train_layers=1")
    model = trainer._unwrapped()
    top = model.config.num_hidden_layers - 1
    before = _weights(model)
    trainer.train()
    after = _weights(trainer._unwrapped())
    moved = {key for key in before if not torch.equal(before[key], after[key])}
    assert moved and all(f"layers.{top}." in key or key == "model.norm.weight" for key in moved)
