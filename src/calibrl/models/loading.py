"""Loading a causal LM and its tokenizer for any command: training, SFT, evaluation, the probe.

It sits with the models (below training, evaluation and the probe) so that each of those can
load a model without importing another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from calibrl.errors import UserError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_model_path(path: str, run_dir: Path) -> str:
    """'tiny' -> a freshly built tiny model in `run_dir/init-model`; a local path must exist.

    A name that is no local folder is looked up on the Hugging Face Hub once, without retries,
    so a mistyped local path fails at once instead of after a minute of download retries.
    """
    if path == "tiny":
        target = run_dir / "init-model"
        if not (target / "config.json").is_file():
            from calibrl.models.tiny import create_tiny_model

            create_tiny_model(target)
        return str(target)
    local = Path(path).expanduser()
    if _looks_local(path, local) and not (local / "config.json").is_file():
        raise UserError(f"model path not found (no config.json): {path}")
    if local.exists():
        return str(local)
    _check_hub_model(path)
    return path


def _looks_local(path: str, local: Path) -> bool:
    # "org/name" is a Hub id unless its first part is a local folder ("models/nope").
    return (path.startswith((".", "/", "~")) or local.exists() or path.count("/") != 1
            or Path(path.split("/")[0]).expanduser().is_dir())


def _check_hub_model(repo_id: str) -> None:
    """`UserError` unless `repo_id` is in the local Hub cache or the Hub answers that it exists."""
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(huggingface_hub.try_to_load_from_cache(repo_id, "config.json"), str):
        return
    if constants.HF_HUB_OFFLINE:
        raise UserError(f"model {repo_id!r}: no such local folder, and not in the Hub cache "
                        "(HF_HUB_OFFLINE is set)")
    try:
        huggingface_hub.HfApi().model_info(repo_id, timeout=10)
    except GatedRepoError:
        return  # exists; from_pretrained says what access it needs
    except RepositoryNotFoundError:
        raise UserError(f"model {repo_id!r}: no such local folder, nor a model on the "
                        "Hugging Face Hub") from None
    except Exception as err:  # network errors come from the HTTP client, whichever it is
        raise UserError(f"model {repo_id!r}: no such local folder, and the Hugging Face Hub "
                        f"cannot be reached to look for it ({str(err).splitlines()[0]})") from None


def load_policy(path: str, *, dtype: str = "float32", trust_remote_code: bool = False
                ) -> tuple[Any, Any]:
    """(model, tokenizer) from a local directory or hub name; one-line `UserError` on failure."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=_DTYPES[dtype],
                                                     trust_remote_code=trust_remote_code)
    except (OSError, ValueError, SafetensorError) as err:  # missing, unreadable or truncated files
        raise UserError(f"cannot load model {path!r}: {str(err).splitlines()[0]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # right-padding only: never attended to
    return model, tokenizer
