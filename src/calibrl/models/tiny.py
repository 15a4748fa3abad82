"""A tiny causal LM built from a config, saved and loaded like any Hugging Face model.

The block is the Qwen2 one (RMSNorm, SwiGLU MLP, rotary attention) written as a stock
`LlamaConfig`, i.e. Qwen2 without its q/k/v biases. Why not `Qwen2Config` itself: transformers
5 forces `AutoTokenizer` to rebuild any tokenizer saved next to a `qwen2` config with Qwen2's
own pre-tokenizer (single digits, NFC), silently discarding ours; for `llama` it keeps the
saved `tokenizer.json`. Nothing is custom code at load time, so
`AutoModelForCausalLM.from_pretrained(dir)` and `AutoTokenizer.from_pretrained(dir)` load it
anywhere transformers is installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from calibrl.errors import UserError
from calibrl.models.sizes import TinyModelSizes
from calibrl.models.tokenizer import build_tokenizer
from calibrl.tasks import DEFAULT_TASK
from calibrl.utils.files import check_output_dir


def tiny_config(tokenizer: PreTrainedTokenizerBase, sizes: TinyModelSizes) -> LlamaConfig:
    """A `LlamaConfig` of the given sizes whose vocabulary is exactly the tokenizer's."""
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise UserError("the tokenizer needs an eos and a pad token")
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=sizes.hidden_size,
        intermediate_size=sizes.mlp_size,
        num_hidden_layers=sizes.num_layers,
        num_attention_heads=sizes.num_heads,
        num_key_value_heads=sizes.kv_heads,
        max_position_embeddings=sizes.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": float(sizes.rope_theta)},
        tie_word_embeddings=sizes.tie_embeddings,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerBase, *, seed: int = 0, **sizes: Any
) -> PreTrainedModel:
    """A freshly initialised fp32 model; the same seed gives the same weights.

    `sizes` are `TinyModelSizes` fields. The global torch RNG is left as it was.
    """
    config = tiny_config(tokenizer, TinyModelSizes(**sizes))
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
    out_dir: str | Path, *, seed: int = 0, overwrite: bool = False, task: str = DEFAULT_TASK,
    **sizes: Any,
) -> Path:
    """Build tokenizer + model and `save_pretrained` both into `out_dir`; returns the path.

    The tokenizer is fitted to `task`'s prompts (`build_tokenizer`). Refuses a folder that
    already has files in it unless `overwrite`.
    """
    out = Path(out_dir)
    check_output_dir(out, "model folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise UserError(f"{out} is not empty (pass overwrite to replace its model)")
    shape = TinyModelSizes(**sizes)
    tokenizer = build_tokenizer(model_max_length=shape.max_position_embeddings, task=task)
    model = build_tiny_model(tokenizer, seed=seed, **sizes)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return out
