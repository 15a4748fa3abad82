"""Rollout: generation engines and the single/two-turn rollouts.

Engines (`engine.py` has the interface and the conventions every engine follows):
- `hf_engine.HFEngine`: transformers, CPU or GPU, shared-prefix KV-cache reuse.
- `vllm_engine.VLLMEngine`: vLLM, the optional extra `calibrl[vllm]`, CUDA only.
Build either with `make_engine(kind, model, tokenizer, **options)` (`factory.py`).
"""

from calibrl.rollout.engine import Engine, Generation, SamplingParams
from calibrl.rollout.factory import make_engine

__all__ = ["Engine", "Generation", "SamplingParams", "make_engine"]
