"""vLLM generation engine: the optional extra `calibrl[vllm]`, CUDA only, imported lazily.

Colocated with the trainer, as TRL's "colocate" mode: vLLM runs in the training process on the
same GPU, with its own copy of the weights; `update_weights(model)` copies the training model's
tensors into it in place after each optimiser step and clears the prefix cache (cached prefixes
were computed with the old weights). Prefix caching is on, so the `n` samples of a prompt, and
prompts sharing a prefix, reuse its KV blocks.

Conventions match `calibrl.rollout.engine`:
- log-probs: vLLM runs with `logprobs_mode="processed_logprobs"`, i.e. log-probs of the sampled
  token after temperature *and* after top-k / top-p (vLLM applies them in one step). Without
  filtering that is exactly our convention (`softmax(logits / T)`; greedy: `softmax(logits)`);
  with filtering it is the renormalised filtered distribution, so `generate` refuses top-k / top-p
  unless the engine was built with `allow_filtered_logprobs=True` (e.g. for evaluation, where
  log-probs are not used).
- text: recomputed as `decode(token_ids)` (vLLM would cut the text right after a stop string
  even when the completing token runs past it); the stop string is kept.
- seeds: prompt `i` gets `derive_seed(seed, first_stream + i)` and vLLM gives its `n` samples seeds `+0..n-1`.
  Deterministic for a fixed batch, but not the same samples as `HFEngine` (another RNG).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

import torch

from calibrl.errors import UserError
from calibrl.rollout.engine import Generation, SamplingParams, check_prompts
from calibrl.rollout.sampling import derive_seed
from calibrl.rollout.stopping import decode

MIN_VLLM = "0.10.2"  # the first release with `logprobs_mode`


def import_vllm() -> Any:
    """The `vllm` module, or a UserError that says how to get it."""
    try:
        import vllm
    except ImportError as e:
        raise UserError("the vLLM engine needs the optional extra: "
                        "pip install 'calibrl[vllm]' (on a CUDA machine)") from e
    from packaging.version import Version

    if Version(metadata.version("vllm")) < Version(MIN_VLLM):
        raise UserError(f"the vLLM engine needs vllm>={MIN_VLLM}, found {metadata.version('vllm')}")
    return vllm


class VLLMEngine:
    """Generation with an in-process vLLM `LLM`.

    Args:
        model_path: a local directory (or hub name) with the model's config, weights and
            tokenizer; vLLM builds its own copy from it.
        tokenizer: the trainer's tokenizer (decoding `text`).
        gpu_memory_utilization: share of the GPU vLLM may take (weights and KV cache); the rest
            stays for training.
        max_model_len: context length vLLM plans for (prompt + completion); default the model's.
        dtype: vLLM's dtype ("auto", "bfloat16", ...).
        eos_token_ids: extra tokens that end a sample (vLLM already stops on the model's EOS).
        allow_filtered_logprobs: accept top-k / top-p (log-probs then follow vLLM's filtered
            distribution; see the module docstring).
        llm_kwargs: any other `vllm.LLM` argument (e.g. `enforce_eager`, `max_num_seqs`).
    """

    def __init__(self, model_path: str, tokenizer: Any, *, gpu_memory_utilization: float = 0.3,
                 max_model_len: int | None = None, dtype: str = "auto",
                 eos_token_ids: Iterable[int] | None = None, allow_filtered_logprobs: bool = False,
                 llm_kwargs: dict[str, Any] | None = None) -> None:
        vllm = import_vllm()
        if not torch.cuda.is_available():
            raise UserError("the vLLM engine needs a CUDA GPU; use the 'hf' engine here")
        # The engine core must live in this process so `update_weights` can reach its model.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.tokenizer = tokenizer
        self.allow_filtered_logprobs = allow_filtered_logprobs
        self.stop_token_ids = None if eos_token_ids is None else [int(t) for t in eos_token_ids]
        self.llm = vllm.LLM(model=model_path, dtype=dtype, max_model_len=max_model_len,
                            gpu_memory_utilization=gpu_memory_utilization,
                            enable_prefix_caching=True, logprobs_mode="processed_logprobs",
                            **(llm_kwargs or {}))

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, model_path: str | None = None,
                   **options: Any) -> VLLMEngine:
        """An engine for a transformers model: built from its path, then given its weights."""
        import_vllm()
        path = model_path or getattr(model, "name_or_path", "")
        if not path:
            raise UserError("the vLLM engine needs the model's directory: save the model and "
                            "tokenizer with save_pretrained and pass model_path")
        options.setdefault("dtype", str(model.dtype).removeprefix("torch."))
        engine = cls(path, tokenizer, **options)
        engine.update_weights(model)
        return engine

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams
                 ) -> list[list[Generation]]:
        prompts = check_prompts(prompts)
        if not prompts:
            return []
        if params.filtered and not self.allow_filtered_logprobs:
            raise UserError("with vLLM, top_k/top_p change the returned log-probs; use "
                            "top_k=0 and top_p=1, the 'hf' engine, or allow_filtered_logprobs")
        vllm = import_vllm()
        seed = params.seed if params.seed is not None else int(torch.randint(0, 2**31, ()).item())
        per_prompt = [vllm.SamplingParams(
            n=params.n, temperature=params.temperature, top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1, max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None, stop_token_ids=self.stop_token_ids,
            include_stop_str_in_output=True, skip_special_tokens=True, logprobs=0,
            seed=derive_seed(seed, params.first_stream + i)) for i in range(len(prompts))]
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], per_prompt,
                                    use_tqdm=False)
        return [[self._generation(c) for c in sorted(out.outputs, key=lambda c: c.index)]
                for out in outputs]

    def update_weights(self, model: Any) -> None:
        """Copy `model`'s current tensors into vLLM's model, in place (after each optimiser step)."""
        weights = ((name, t.detach()) for name, t in model.state_dict().items())
        executor = getattr(self.llm.llm_engine, "model_executor", None)
        if executor is not None:  # in-process engine core: what TRL's colocate mode does
            executor.driver_worker.model_runner.model.load_weights(weights)
        else:
            self.llm.collective_rpc(_load_weights_on_worker, args=(list(weights),))
        self.llm.reset_prefix_cache()

    def _generation(self, c: Any) -> Generation:
        ids = [int(t) for t in c.token_ids]
        if c.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended a sample with {c.finish_reason!r}")
        logprobs = [_finite(c.logprobs[i][t].logprob) for i, t in enumerate(ids)]
        return Generation(ids, decode(self.tokenizer, ids), logprobs, c.finish_reason)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -1e30


def _load_weights_on_worker(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Runs on a vLLM worker through `collective_rpc` (engine core in another process)."""
    worker.model_runner.model.load_weights(iter(weights))
