"""Models: the tiny Countdown model family calibrl builds itself (CPU, no downloads), a GGUF
file converted to an ordinary folder, and loading any causal LM.

Names are resolved on first use so that importing the light parts (sizes, prompt texts) does
not load torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "TinyModelSizes": "calibrl.models.sizes",
    "CONFIDENCE_QUESTION": "calibrl.protocol.prompts",
    "CONFIDENCE_QUESTIONS": "calibrl.models.corpus",
    "TAGS": "calibrl.protocol.tags",
    "tokenizer_corpus": "calibrl.models.corpus",
    "CHAT_TEMPLATE": "calibrl.models.tokenizer",
    "IM_END": "calibrl.models.tokenizer",
    "IM_START": "calibrl.models.tokenizer",
    "PAD_TOKEN": "calibrl.models.tokenizer",
    "build_tokenizer": "calibrl.models.tokenizer",
    "build_tiny_model": "calibrl.models.tiny",
    "convert_gguf": "calibrl.models.gguf",
    "count_parameters": "calibrl.models.tiny",
    "create_tiny_model": "calibrl.models.tiny",
    "load_policy": "calibrl.models.loading",
    "packaged_gguf": "calibrl.models.gguf",
    "resolve_model_path": "calibrl.models.loading",
    "tiny_config": "calibrl.models.tiny",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
