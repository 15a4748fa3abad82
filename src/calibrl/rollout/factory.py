"""Building a generation engine by name: the one place that chooses between the engines.

Kept apart from the interface (`calibrl.rollout.engine`) because it imports every engine while
every engine imports the interface; together they would form an import circle.
"""

from __future__ import annotations

import os
from typing import Any

from calibrl.errors import UserError
from calibrl.rollout.engine import Engine

ENGINE_KINDS: tuple[str, ...] = ("hf", "vllm")


def make_engine(kind: str, model: Any, tokenizer: Any, **options: Any) -> Engine:
    """Build an engine by name.

    Args:
        kind: "hf" (transformers, CPU or GPU; shares `model` with the trainer) or "vllm" (needs
            the `calibrl[vllm]` extra and CUDA; loads `model`'s weights into its own copy).
        model: a transformers model; for "vllm" also a model directory, which vLLM loads
            itself (no transformers copy in memory, e.g. for the probe).
        options: passed to `HFEngine` / `VLLMEngine` (e.g. `max_batch_size`,
            `gpu_memory_utilization`; for "hf", `decode="fused"` takes the quicker decoding
            step that rounds differently, `calibrl.rollout.fused_forward`).
    """
    # Imported here: each engine pulls in torch, and vLLM is an optional extra.
    if kind == "hf":
        from calibrl.rollout.hf_engine import HFEngine

        return HFEngine(model, tokenizer, **options)
    if kind == "vllm":
        from calibrl.rollout.vllm_engine import VLLMEngine

        if isinstance(model, (str, os.PathLike)):
            return VLLMEngine(os.fspath(model), tokenizer, **options)
        return VLLMEngine.from_model(model, tokenizer, **options)
    raise UserError(f"unknown engine {kind!r}; choose one of {', '.join(ENGINE_KINDS)}")
