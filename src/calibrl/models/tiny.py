"""A tiny Qwen2-style causal LM built from a config, saved and loaded like any Hugging Face model.

Nothing here is custom code at load time: the saved folder holds a stock `Qwen2Config`, the
weights and the tokenizer, so `AutoModelForCausalLM.from_pretrained(dir)` and
`AutoTokenizer.from_pretrained(dir)` load it anywhere transformers is installed.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
)

from calibrl.errors import UserError
from calibrl.models.tokenizer import build_tokenizer


def tiny_config(
    tokenizer: PreTrainedTokenizerBase,
    *,
    hidden_size: int = 256,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int | None = None,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    rope_theta: float = 10000.0,
    tie_embeddings: bool = True,
) -> Qwen2Config:
    """A `Qwen2Config` sized for CPU work; the vocabulary is exactly the tokenizer's.

    `num_kv_heads` defaults to `num_heads` (plain multi-head attention: grouping saves nothing
    worth having at this size); `intermediate_size` defaults to 3 * hidden_size. Embeddings
    are tied because at hidden 256 a separate output matrix would be a large share of the
    parameters.
    """
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    intermediate_size = 3 * hidden_size if intermediate_size is None else intermediate_size
    for name, value in (
        ("hidden_size", hidden_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("num_kv_heads", num_kv_heads),
        ("intermediate_size", intermediate_size),
        ("max_position_embeddings", max_position_embeddings),
    ):
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")
    if hidden_size % num_heads:
        raise UserError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
    if (hidden_size // num_heads) % 2:
        raise UserError(f"head size {hidden_size // num_heads} must be even for rotary embeddings")
    if num_heads % num_kv_heads:
        raise UserError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise UserError("the tokenizer needs an eos and a pad token")
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        tie_word_embeddings=tie_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerBase, *, seed: int = 0, **sizes: int | float | bool | None
) -> PreTrainedModel:
    """A freshly initialised fp32 model; the same seed gives the same weights.

    `sizes` are the keyword arguments of `tiny_config`. The global torch RNG is left as it was.
    """
    config = tiny_config(tokenizer, **sizes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def count_parameters(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def create_tiny_model(
    out_dir: str | Path, *, seed: int = 0, overwrite: bool = False, **sizes: int | float | bool | None
) -> Path:
    """Build tokenizer + model and `save_pretrained` both into `out_dir`; returns the path.

    Refuses a folder that already has files in it unless `overwrite`.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise UserError(f"{out} is not empty (pass overwrite to replace its model)")
    max_len = int(sizes.get("max_position_embeddings") or 2048)
    tokenizer = build_tokenizer(model_max_length=max_len)
    model = build_tiny_model(tokenizer, seed=seed, **sizes)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return out
