"""Loading the policy and computing per-token log-probs of a training batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from calibrl.algo.batch import TrainBatch, gather_logprobs
from calibrl.errors import UserError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_model_path(path: str, run_dir: Path) -> str:
    """'tiny' -> a freshly built tiny model in `run_dir/init-model`; a local path must exist."""
    if path == "tiny":
        target = run_dir / "init-model"
        if not (target / "config.json").is_file():
            from calibrl.models import create_tiny_model

            create_tiny_model(target)
        return str(target)
    local = Path(path).expanduser()
    looks_local = path.startswith((".", "/", "~")) or local.exists() or path.count("/") != 1
    if looks_local and not (local / "config.json").is_file():
        raise UserError(f"model path not found (no config.json): {path}")
    return str(local) if local.exists() else path


def load_policy(path: str, *, dtype: str = "float32", trust_remote_code: bool = False
                ) -> tuple[Any, Any]:
    """(model, tokenizer) from a local directory or hub name; one-line `UserError` on failure."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=_DTYPES[dtype],
                                                     trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot load model {path!r}: {str(err).splitlines()[0]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # right-padding only: never attended to
    return model, tokenizer


def token_logprobs(model: Any, batch: TrainBatch, temperature: float = 1.0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs `[B, R]` of the response tokens under `softmax(logits / temperature)`, and
    optionally the entropy `[B, R]` of that distribution (no grad).

    Responses are right-padded after a left-padded context, so the last R + 1 positions hold
    every logit needed; `logits_to_keep` skips the rest of the vocabulary projection.
    """
    num_resp = batch.response_ids.shape[1]
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                position_ids=batch.position_ids, use_cache=False, logits_to_keep=num_resp + 1)
    return gather_logprobs(out.logits[:, :-1], batch.response_ids, temperature, with_entropy)
