"""Loading a causal LM and its tokenizer for any command: training, SFT, evaluation, the probe.

It sits with the models (below training, evaluation and the probe) so that each of those can
load a model without importing another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from calibrl.errors import UserError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_model_path(path: str, run_dir: Path) -> str:
    """'tiny' -> a freshly built tiny model in `run_dir/init-model`; a local path must exist."""
    if path == "tiny":
        target = run_dir / "init-model"
        if not (target / "config.json").is_file():
            from calibrl.models.tiny import create_tiny_model

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
