"""The tiny model: sizes, seeded init, save/load round trip, generation."""

from __future__ import annotations

import functools
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from calibrl.errors import UserError
from calibrl.models.sizes import TinyModelSizes
from calibrl.models.tiny import build_tiny_model, count_parameters, create_tiny_model, tiny_config
from calibrl.models.tokenizer import build_tokenizer
from calibrl.tasks.countdown import COUNTDOWN

SMALL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_position_embeddings": 256}


@functools.cache
def tok():
    return build_tokenizer()


def test_default_shape_and_parameter_count():
    config = tiny_config(tok(), TinyModelSizes())
    assert (config.hidden_size, config.num_hidden_layers) == (256, 4)
    assert config.num_key_value_heads == config.num_attention_heads == 4
    assert config.intermediate_size == 768 and config.tie_word_embeddings
    assert config.vocab_size == len(tok())
    assert (config.eos_token_id, config.pad_token_id) == (tok().eos_token_id, tok().pad_token_id)
    model = build_tiny_model(tok(), **SMALL)
    # Slow reference: embeddings (tied) + per layer 4 attention + 3 MLP matrices + 2 norms.
    h, v, m = 32, len(tok()), 96
    expected = v * h + 2 * (4 * h * h + 3 * h * m + 2 * h) + h
    assert count_parameters(model) == expected


@pytest.mark.parametrize(
    "sizes, message",
    [
        ({"hidden_size": 0}, "hidden_size must be at least 1"),
        ({"hidden_size": 30, "num_heads": 4}, "not divisible by num_heads"),
        ({"hidden_size": 12, "num_heads": 4}, "must be even"),
        ({"num_heads": 4, "num_kv_heads": 3}, "not divisible by num_kv_heads"),
        ({"intermediate_size": -1}, "intermediate_size must be at least 1"),
        ({"rope_theta": 0.0}, "rope_theta must be positive"),
    ],
)
def test_bad_sizes_are_user_errors(sizes, message):
    with pytest.raises(UserError, match=message):
        TinyModelSizes(**sizes)


def test_init_is_deterministic_by_seed_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = build_tiny_model(tok(), seed=1, **SMALL).state_dict()
    assert torch.equal(torch.get_rng_state(), before)
    b = build_tiny_model(tok(), seed=1, **SMALL).state_dict()
    c = build_tiny_model(tok(), seed=2, **SMALL).state_dict()
    name = "model.layers.0.self_attn.q_proj.weight"
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a[name], c[name])


def test_save_load_round_trip(tmp_path):
    out = create_tiny_model(tmp_path / "tiny", seed=3, **SMALL)
    model = build_tiny_model(tok(), seed=3, **SMALL).eval()
    loaded = AutoModelForCausalLM.from_pretrained(out).eval()
    loaded_tok = AutoTokenizer.from_pretrained(out)
    # AutoTokenizer must keep our pre-tokenizer (transformers would swap in Qwen2's for qwen2).
    saved = json.loads(loaded_tok.backend_tokenizer.to_str())
    built = json.loads(tok().backend_tokenizer.to_str())
    for part in ("model", "pre_tokenizer", "normalizer", "decoder", "added_tokens"):
        assert saved[part] == built[part]
    assert loaded_tok.chat_template == tok().chat_template
    assert loaded_tok.model_max_length == 256
    ids = loaded_tok("<think>\n12 + 5 = 17\n</think>", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    assert loaded.generation_config.eos_token_id == tok().eos_token_id


def test_refuses_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("keep me")
    with pytest.raises(UserError, match="not empty"):
        create_tiny_model(tmp_path, **SMALL)
    create_tiny_model(tmp_path, overwrite=True, **SMALL)
    assert (tmp_path / "config.json").exists()


def test_generate_from_loaded_model(tmp_path):
    out = create_tiny_model(tmp_path, seed=0, **SMALL)
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    messages = COUNTDOWN.make_prompt({"target": 51, "numbers": [12, 5, 3]})
    batch = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    prompt_len = batch["input_ids"].shape[1]
    torch.manual_seed(0)
    out_ids = model.generate(**batch, max_new_tokens=8, do_sample=True, top_k=0)
    assert prompt_len < out_ids.shape[1] <= prompt_len + 8
    text = tokenizer.decode(out_ids[0])
    assert "<|im_start|>assistant\n" in text
    assert isinstance(tokenizer.decode(out_ids[0, prompt_len:], skip_special_tokens=True), str)
