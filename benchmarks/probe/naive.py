"""The seed's probe sampling, for comparison: per trace and truncation point, one
`model.generate(num_return_sequences=samples)` call on the whole re-encoded prefix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from calibrl.probe.sampler import ProbeJob, Results
from calibrl.rollout.engine import Generation, SamplingParams
from calibrl.rollout.stopping import decode


class NaiveSampler:
    """The `Sampler` interface over transformers' `generate`, one call per point."""

    def __init__(self, model: Any, tokenizer: Any, eos_token_ids: Sequence[int]) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.eos = [int(t) for t in eos_token_ids]
        self.pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0])
        self.calls = 0
        self.prefill_tokens = 0

    @torch.inference_mode()
    def sample(self, jobs: Sequence[ProbeJob], suffix: Sequence[int], params: SamplingParams
               ) -> Results:
        device = next(self.model.parameters()).device
        out = []
        for job in jobs:
            per_job = []
            for cut in job.cuts:
                ids = torch.tensor([list(job.prefix[:cut]) + list(suffix)], device=device)
                generated = self.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                    temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                    num_return_sequences=params.n, max_new_tokens=params.max_new_tokens,
                    stop_strings=list(params.stop), tokenizer=self.tokenizer,
                    pad_token_id=self.pad, eos_token_id=self.eos)
                self.calls += 1
                self.prefill_tokens += ids.shape[1] * params.n
                per_job.append([self._generation(row, params)
                                for row in generated[:, ids.shape[1]:].tolist()])
            out.append(per_job)
        return out

    def _generation(self, row: list[int], params: SamplingParams) -> Generation:
        tokens = []
        for t in row:
            tokens.append(t)
            if t in self.eos:
                break
        while tokens and tokens[-1] == self.pad and self.pad not in self.eos:
            tokens.pop()
        text = decode(self.tokenizer, tokens)
        stopped = bool(tokens) and (tokens[-1] in self.eos or any(s in text for s in params.stop))
        return Generation(tokens, text, [0.0] * len(tokens), "stop" if stopped else "length")
