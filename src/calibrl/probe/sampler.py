"""Answer sampling after many truncation points of many chains of thought.

Both samplers answer `sample(jobs, suffix, params)` with `[job][cut][sample]` generations (the
conventions of `calibrl.rollout.engine`), where job `j` asks for `params.n` continuations of
`jobs[j].prefix[:cut] + suffix` for each of its cuts:

- `CachedSampler` (a transformers model, CPU or GPU). Each job's prefix (prompt and whole chain)
  is encoded once (`kv_cache.prefill`) and kept once: a truncation point is a row that reads the
  first `cut` slots of that single copy (`calibrl.probe.shared_prefix`), so neither points nor
  samples re-encode or copy the chain. The forced text of every point is encoded in one forward
  pass, each point's row is repeated for its samples, and the rows of many points and many
  chains are decoded together: on a small model, where a decoding step costs about the same for
  50 rows as for 500, the step count is paid once per batch rather than once per point.
- `EngineSampler` (any `Engine`, e.g. vLLM): one prompt per point, the full context with the
  forced text, `n` samples each; the engine's prefix caching shares the chain between points.

Randomness of `CachedSampler`: sample `s` of the point at `cut` of the job keyed `key` draws its
token at step `t` from `uniforms(seed, derive_seed(key, cut), s, t)`, a pure function of what it
samples; batching, the other jobs of a call and resuming leave the samples unchanged. The
token-by-token loop is `calibrl.rollout.decode.decode_rows`, the one `HFEngine` runs too, and
its steps go through `calibrl.rollout.fast_forward.StepForward` where the model allows
(bit-identical to `model(...)`), or with `decode="fused"` through the quicker
`fused_forward.FusedStepForward` (equal up to float rounding; the attention over the shared
prefix is the same either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch

from calibrl.errors import UserError
from calibrl.probe.growable_cache import GrowableCache
from calibrl.probe.shared_prefix import (
    SharedPrefix,
    attention,
    shared_prefix_attention,
    supported,
)
from calibrl.rollout import fast_forward, fused_forward, kv_cache
from calibrl.rollout.decode import decode_rows
from calibrl.rollout.engine import Engine, Generation, SamplingParams
from calibrl.rollout.hf_engine import HFEngine, plan_chunks
from calibrl.rollout.sampling import derive_seed
from calibrl.rollout.stopping import StopChecker
from calibrl.utils.eval_mode import eval_mode

Results = list[list[list[Generation]]]  # [job][cut][sample]


@dataclass(frozen=True)
class ProbeJob:
    """One chain to probe: `prefix` = context + chain; each cut is a context length to keep."""

    key: int
    prefix: list[int]
    cuts: list[int]


class Sampler(Protocol):
    def sample(self, jobs: Sequence[ProbeJob], suffix: Sequence[int], params: SamplingParams
               ) -> Results:
        """`params.n` continuations of `job.prefix[:cut] + suffix` for every job and cut."""
        ...


@dataclass
class SamplerStats:
    """Work done since creation; the benchmark reports it."""

    forward_passes: int = 0
    prefill_tokens: int = 0  # tokens encoded before sampling (prefixes and forced blocks)
    generated_tokens: int = 0


@dataclass(frozen=True)
class _Context:
    job: int
    slot: int  # index of the cut within its job
    key: int  # the random stream of its samples
    cut: int  # prefix tokens it reads
    block: list[int]  # tokens encoded for this context alone (never empty)


class CachedSampler:
    """Probe sampling with a transformers model and one cached copy of each prefix (see the
    module docstring).

    Args:
        engine: supplies the model, tokenizer, EOS tokens and pad id (and checks the model is a
            full-attention one); also usable to generate the traces.
        max_rows: sequences decoded at once; bounds memory (each holds its forced text and
            answer; prefixes are stored once per job).
        decode: the decoding step, "exact" or "fused" (as `HFEngine`'s); default: the engine's.
    """

    def __init__(self, engine: HFEngine, max_rows: int = 512, decode: str | None = None
                 ) -> None:
        self.decode = engine.decode if decode is None else decode
        fused_forward.decode_path(self.decode)  # fail early on an unknown name
        if max_rows < 1:
            raise UserError(f"max_rows must be >= 1, got {max_rows}")
        if not supported(engine.model):
            raise UserError(f"{type(engine.model).__name__} does not route attention through "
                            "transformers' attention interface; probe it with EngineSampler")
        self.engine = engine
        self.max_rows = max_rows
        self.stats = SamplerStats()
        self._spare: GrowableCache | None = None  # a finished chunk's cache, to reuse

    @torch.inference_mode()
    def sample(self, jobs: Sequence[ProbeJob], suffix: Sequence[int], params: SamplingParams
               ) -> Results:
        if params.seed is None:
            raise UserError("the probe needs a seeded SamplingParams")
        contexts = _contexts(jobs, [int(t) for t in suffix])
        out: list[list[list[Any]]] = [[[None] * params.n for _ in job.cuts] for job in jobs]
        if not contexts:
            return out
        self._check_lengths(contexts, params)
        model = self.engine.model
        # A chunk holds few jobs, so its rows read few prefixes.
        order = sorted(range(len(contexts)), key=lambda c: (contexts[c].job, -contexts[c].cut))
        with eval_mode(model):
            kvs: list[kv_cache.KV] = []
            for j, job in enumerate(jobs):
                longest = max((c.cut for c in contexts if c.job == j), default=0)
                # A prefix never read still needs its layers' shapes: encode one token.
                kvs.append(kv_cache.prefill(model, job.prefix[:max(longest, 1)] or [0]))
                self.stats.forward_passes += 1
                self.stats.prefill_tokens += longest
            with shared_prefix_attention(model):
                for chunk in plan_chunks(len(contexts), params.n, self.max_rows):
                    chunk = [(order[c], first, count) for c, first, count in chunk]
                    for (c, s), gen in self._sample_chunk(kvs, contexts, chunk, params):
                        out[contexts[c].job][contexts[c].slot][s] = gen
        return out

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, cache: GrowableCache,
                 prefix: SharedPrefix) -> torch.Tensor:
        """Feed `ids` `[R, Q]` at `positions` `[R, Q]`; next-token logits `[R, V]`."""
        # The attention function appends to `cache` itself (`shared_prefix.attention`).
        out = self.engine.model(input_ids=ids, position_ids=positions, use_cache=False,
                                logits_to_keep=1, probe_prefix=prefix, probe_cache=cache)
        self.stats.forward_passes += 1
        return out.logits[:, -1]

    def _sample_chunk(self, kvs: list[kv_cache.KV], contexts: list[_Context],
                      chunk: list[tuple[int, int, int]], params: SamplingParams
                      ) -> list[tuple[tuple[int, int], Generation]]:
        device = kv_cache.model_device(self.engine.model)
        chosen = [contexts[c] for c, _, _ in chunk]
        block = len(chosen[0].block)  # every context appends the same forced text
        cuts = torch.tensor([x.cut for x in chosen], dtype=torch.long, device=device)
        prefix = SharedPrefix(kvs, torch.tensor([x.job for x in chosen], device=device), cuts)
        keys0 = kvs[0][0][0]  # [1, Hk, L, D]
        cache = GrowableCache.zeros(len(kvs[0]), len(chosen), keys0.shape[1],
                                    block + params.max_new_tokens, keys0.shape[3], 0, keys0)
        ids = torch.tensor([x.block for x in chosen], dtype=torch.long, device=device)
        positions = cuts[:, None] + torch.arange(block, device=device)[None, :]
        logits = self._forward(ids, positions, cache, prefix)
        self.stats.prefill_tokens += block * len(chosen)

        # Expand: row r of the decode batch is sample `sample[r]` of context `chunk[rep[r]]`.
        counts = torch.tensor([count for _, _, count in chunk], device=device)
        rep = torch.repeat_interleave(torch.arange(len(chunk), device=device), counts)
        cache.batch_select_indices(rep, spare=self._spare)  # the last chunk's buffers
        self._spare = cache
        streams = torch.tensor([x.key for x in chosen], dtype=torch.long, device=device)[rep]
        sample = torch.tensor([first + i for _, first, count in chunk for i in range(count)],
                              dtype=torch.long, device=device)
        results = self._decode(cache, prefix.select(rep), cuts[rep] + block, logits[rep],
                               streams, sample, params)
        ids_out = [(c, first + i) for c, first, count in chunk for i in range(count)]
        return list(zip(ids_out, results, strict=True))

    def _decode(self, cache: GrowableCache, prefix: SharedPrefix, pos: torch.Tensor,
                logits: torch.Tensor, streams: torch.Tensor, sample: torch.Tensor,
                params: SamplingParams) -> list[Generation]:
        """Sample until every row stops; row `r` draws from the random stream
        `(streams[r], sample[r])`.

        Finished rows leave the batch (a copy of every row's cache) once they are an eighth of
        it; until then they ride along and their tokens are ignored, which costs less than
        copying the batch at every step in which some row finishes.
        """
        checker = StopChecker(self.engine.tokenizer, params.stop, self.engine.eos_token_ids,
                              params.max_new_tokens)
        rows = _SharedPrefixRows(self, cache, prefix, int(pos.max()) + params.max_new_tokens)
        out = decode_rows(rows, logits, pos, streams, sample, params, params.seed or 0, checker,
                          drop_share=1 / 8)
        self.stats.generated_tokens += sum(len(g.token_ids) for g in out)
        return out

    def _check_lengths(self, contexts: list[_Context], params: SamplingParams) -> None:
        limit = getattr(self.engine.model.config, "max_position_embeddings", None)
        longest = max(c.cut + len(c.block) for c in contexts)
        if limit is not None and longest + params.max_new_tokens > limit:
            raise UserError(f"a context of {longest} tokens plus {params.max_new_tokens} answer "
                            f"tokens exceeds the model's {limit} positions")


class _SharedPrefixRows:
    """Rows that read a `SharedPrefix` and keep their own tokens in a `GrowableCache`."""

    def __init__(self, sampler: CachedSampler, cache: GrowableCache, prefix: SharedPrefix,
                 positions: int) -> None:
        self.sampler, self.cache, self.prefix = sampler, cache, prefix
        model = sampler.engine.model
        # The same layers without transformers' per-call work, where the model allows.
        self.step = (fused_forward.decode_path(sampler.decode).step(model, positions)
                     if fast_forward.supported(model) else None)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if self.step is None:
            return self.sampler._forward(tokens[:, None], pos[:, None], self.cache, self.prefix)
        self.sampler.stats.forward_passes += 1
        return self.step.forward(tokens, pos, self._attend)

    def _attend(self, module: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                ) -> torch.Tensor:
        """`StepForward`'s attention: `q` `[R, Hq, D]`, `k`, `v` `[R, Hk, D]`."""
        out = attention(module, q[:, :, None], k[:, :, None], v[:, :, None], None,
                        scaling=module.scaling, probe_prefix=self.prefix,
                        probe_cache=self.cache)[0]
        return out.reshape(len(q), -1)  # [R, Hq * D]

    def keep(self, live: torch.Tensor) -> torch.Tensor:
        # In order: rows of one prefix stay side by side (`SharedPrefix` groups them).
        index = live.nonzero()[:, 0]
        self.cache.batch_select_indices(index)
        self.prefix = self.prefix.select(index)
        return index


def _contexts(jobs: Sequence[ProbeJob], suffix: list[int]) -> list[_Context]:
    contexts = []
    for j, job in enumerate(jobs):
        for slot, cut in enumerate(job.cuts):
            if not 0 <= cut <= len(job.prefix):
                raise UserError(f"cut {cut} outside a prefix of {len(job.prefix)} tokens")
            key = derive_seed(job.key, cut)
            if suffix:
                contexts.append(_Context(j, slot, key, cut, suffix))
            elif cut > 0:  # the last context token must be fed to get next-token logits
                contexts.append(_Context(j, slot, key, cut - 1, [job.prefix[cut - 1]]))
            else:
                raise UserError("an empty context (no prompt, no chain, no forced text)")
    return contexts


class EngineSampler:
    """Probe sampling through any `Engine` (e.g. vLLM, whose prefix caching shares the chain).

    One prompt per point, `prefix[:cut] + suffix`, `params.n` samples each, all jobs in one
    call. The engine's seed is derived from the first job's key, so a run is reproducible for
    the same batching.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def sample(self, jobs: Sequence[ProbeJob], suffix: Sequence[int], params: SamplingParams
               ) -> Results:
        prompts = [list(job.prefix[:cut]) + list(suffix) for job in jobs for cut in job.cuts]
        if not prompts:
            return [[] for _ in jobs]
        seed = derive_seed(params.seed or 0, jobs[0].key)
        flat = iter(self.engine.generate(prompts, replace(params, seed=seed)))
        return [[next(flat) for _ in job.cuts] for job in jobs]
