"""Transformers generation engine (CPU or GPU): batched sampling with a KV cache.

`generate(prompts, params)` encodes each prompt once and repeats its cache for its `n` samples
(the expand step of `kv_cache`): turn 2 of the two-turn rollout encodes each (prompt, answer,
question) once rather than once per confidence sample. Contexts are sorted longest first and
packed into chunks of at most `max_batch_size` decoded rows (`plan_chunks`; a context whose
samples straddle two chunks is encoded in both). Rows are decoded by
`calibrl.rollout.decode.decode_rows` and leave the batch, and the cache, as soon as they stop.
For Llama-family models a decoding step skips `model(...)`'s per-call machinery
(`fast_forward.StepForward`) and writes into preallocated KV buffers (`_StaticRows`); the
logits are bit-identical to `model(...)`'s, so the samples are too. `decode="fused"` takes a
quicker step that rounds differently (`fused_forward`: equal in distribution, not bit for bit).

`generate_from_shared_prefix(prefix, branches, params)` encodes one sequence once and samples
after many contexts `prefix[:cut] + suffix` read from crops of its cache; its samples equal
those of `generate` on the concatenated contexts. (The faithfulness probe has its own sampler,
`calibrl.probe.sampler.CachedSampler`, which keeps a prefix once rather than once per row.)

Full-attention models only (sliding-window layers would need another cache layout). The engine
shares the training model object, so `update_weights` is a reference swap. Sampling is
batch-invariant (see `calibrl.rollout.sampling`): results do not depend on `max_batch_size`, on
cache reuse or on the order of contexts. `stats` counts the tokens encoded and generated and the
time spent on each (the rollout benchmark reads it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from calibrl.errors import UserError
from calibrl.rollout import fast_forward, fused_forward, kv_cache
from calibrl.rollout.decode import decode_rows
from calibrl.rollout.engine import Generation, SamplingParams, check_prompts
from calibrl.rollout.stopping import StopChecker
from calibrl.utils.eval_mode import eval_mode


@dataclass(frozen=True)
class Branch:
    """The context `prefix[:cut] + suffix` of `HFEngine.generate_from_shared_prefix`.

    `cut=None` keeps the whole prefix (e.g. turn 2: prompt + answer as prefix, the question as
    suffix); the probe uses one branch per truncation point of a chain of thought.
    """

    cut: int | None = None
    suffix: tuple[int, ...] = field(default_factory=tuple)


@dataclass
class EngineStats:
    """Work done since the last `reset`; the benchmark compares these across strategies."""

    prefill_tokens: int = 0  # real tokens encoded before the first sample (prefixes + blocks)
    prefill_slots: int = 0  # the same, padding included
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    def reset(self) -> None:
        self.__init__()


@dataclass(frozen=True)
class _Context:
    cut: int  # prefix tokens taken from the shared cache
    block: list[int]  # tokens encoded for this context alone (never empty)


def plan_chunks(n_contexts: int, n: int, max_rows: int) -> list[list[tuple[int, int, int]]]:
    """Pack `n` samples of each context into chunks of at most `max_rows` decoded rows.

    Returns chunks of `(context, first_sample, count)`; a context whose samples straddle a chunk
    boundary is encoded once per chunk it appears in (at most twice when `n <= max_rows`).
    """
    chunks: list[list[tuple[int, int, int]]] = []
    current: list[tuple[int, int, int]] = []
    room = max_rows
    for c in range(n_contexts):
        first = 0
        while first < n:
            take = min(room, n - first)
            current.append((c, first, take))
            first += take
            room -= take
            if room == 0:
                chunks.append(current)
                current, room = [], max_rows
    if current:
        chunks.append(current)
    return chunks


class HFEngine:
    """Batched sampling with a transformers causal LM and its KV cache.

    Args:
        model: a full-attention causal LM (shared with the trainer, not copied).
        tokenizer: its tokenizer (decoding and EOS).
        max_batch_size: sequences decoded at once; bounds memory.
        eos_token_ids: tokens that end a sample; default: the tokenizer's EOS plus the model's
            `generation_config.eos_token_id`.
        decode: how a decoding step is computed (`fused_forward.DECODE_PATHS`): "exact" (logits
            bit-identical to `model(...)`) or "fused" (quicker; rounds differently, so a sample
            may now and then differ). Models `fast_forward` does not support take `model(...)`
            either way.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_batch_size: int = 64,
                 eos_token_ids: Iterable[int] | None = None, decode: str = "exact") -> None:
        fused_forward.decode_path(decode)  # fail early on an unknown name
        if max_batch_size < 1:
            raise UserError(f"max_batch_size must be >= 1, got {max_batch_size}")
        layer_types = set(getattr(model.config, "layer_types", None) or ["full_attention"])
        if layer_types != {"full_attention"}:
            raise UserError(f"the 'hf' engine supports full-attention models only; this model "
                            f"has {sorted(layer_types)} layers")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.decode = decode
        self.eos_token_ids = frozenset(
            _default_eos(model, tokenizer) if eos_token_ids is None else eos_token_ids)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad if pad is not None else min(self.eos_token_ids, default=0))
        self.stats = EngineStats()

    def update_weights(self, model: Any) -> None:
        """Generate with `model` from now on (the trainer's own object: nothing to copy)."""
        self.model = model

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams
                 ) -> list[list[Generation]]:
        """`params.n` samples per prompt; each prompt is encoded once for all its samples."""
        contexts = [_Context(0, p) for p in check_prompts(prompts)]
        return self._run(None, contexts, params)

    def generate_from_shared_prefix(self, prefix: Sequence[int], branches: Sequence[Branch],
                                    params: SamplingParams) -> list[list[Generation]]:
        """`params.n` samples after each context `prefix[:cut] + suffix`; `prefix` is encoded once.

        The samples equal those of `generate` on the concatenated contexts, in the same order.
        """
        prefix = [int(t) for t in prefix]
        contexts = []
        for i, b in enumerate(branches):
            cut = len(prefix) if b.cut is None else b.cut
            if not 0 <= cut <= len(prefix):
                raise UserError(f"branch {i}: cut {cut} outside the prefix of {len(prefix)} tokens")
            block = [int(t) for t in b.suffix]
            if not block:  # the last context token must be fed to get the next-token logits
                if cut == 0:
                    raise UserError(f"branch {i} is empty; a context needs at least one token")
                cut, block = cut - 1, [prefix[cut - 1]]
            contexts.append(_Context(cut, block))
        return self._run(prefix, contexts, params)

    @torch.inference_mode()
    def _run(self, prefix: list[int] | None, contexts: list[_Context], params: SamplingParams
             ) -> list[list[Generation]]:
        if not contexts:
            return []
        self._check_lengths(contexts, params)
        seed = params.seed if params.seed is not None else int(torch.randint(0, 2**31, ()).item())
        # Long contexts first so a chunk holds contexts of similar length (less padding).
        order = sorted(range(len(contexts)),
                       key=lambda c: -(contexts[c].cut + len(contexts[c].block)))
        out: list[list[Generation | None]] = [[None] * params.n for _ in contexts]
        with eval_mode(self.model):
            prefix_kv = None
            max_cut = max(c.cut for c in contexts)
            if prefix and max_cut > 0:
                t0 = self._clock()
                prefix_kv = kv_cache.prefill(self.model, prefix[:max_cut])
                self.stats.prefill_tokens += max_cut
                self.stats.prefill_slots += max_cut
                self.stats.prefill_seconds += self._clock() - t0
            for chunk in plan_chunks(len(contexts), params.n, self.max_batch_size):
                chunk = [(order[c], first, count) for c, first, count in chunk]
                for (c, s), gen in self._sample_chunk(prefix_kv, contexts, chunk, params, seed):
                    out[c][s] = gen
        return out  # type: ignore[return-value]

    def _sample_chunk(self, prefix_kv: kv_cache.KV | None, contexts: list[_Context],
                      chunk: list[tuple[int, int, int]], params: SamplingParams, seed: int
                      ) -> list[tuple[tuple[int, int], Generation]]:
        device = kv_cache.model_device(self.model)
        chosen = [contexts[c] for c, _, _ in chunk]
        t0 = self._clock()
        cache, mask = kv_cache.rows_from_prefix(prefix_kv, [x.cut for x in chosen], device)
        next_pos = torch.tensor([x.cut for x in chosen], dtype=torch.long, device=device)
        logits, mask = kv_cache.extend(self.model, cache, mask, next_pos,
                                       [x.block for x in chosen], self.pad_id)
        self.stats.prefill_tokens += sum(len(x.block) for x in chosen)
        self.stats.prefill_slots += len(chosen) * max(len(x.block) for x in chosen)
        self.stats.prefill_seconds += self._clock() - t0

        # Expand: row r of the decode batch is sample `sample[r]` of context `ctx[r]`.
        counts = torch.tensor([count for _, _, count in chunk], device=device)
        rep = torch.repeat_interleave(torch.arange(len(chunk), device=device), counts)
        cache, mask = kv_cache.select_rows(cache, mask, rep)
        ctx = torch.tensor([c for c, _, count in chunk for _ in range(count)], device=device)
        sample = torch.tensor([first + j for _, first, count in chunk for j in range(count)],
                              device=device)
        pos = (next_pos + torch.tensor([len(x.block) for x in chosen], device=device))[rep]
        t0 = self._clock()
        results = self._decode(cache, mask, pos, logits[rep], ctx + params.first_stream, sample,
                               params, seed)
        self.stats.decode_seconds += self._clock() - t0
        keys = list(zip(ctx.tolist(), sample.tolist(), strict=True))  # ctx: index in this call
        return list(zip(keys, results, strict=True))

    def _decode(self, cache: Any, mask: torch.Tensor, pos: torch.Tensor, logits: torch.Tensor,
                ctx: torch.Tensor, sample: torch.Tensor, params: SamplingParams, seed: int
                ) -> list[Generation]:
        """Sample until every row stops; finished rows leave the batch (and the cache) at once."""
        checker = StopChecker(self.tokenizer, params.stop, self.eos_token_ids,
                              params.max_new_tokens)
        if fast_forward.supported(self.model):
            positions = int(pos.max()) + params.max_new_tokens
            path = fused_forward.decode_path(self.decode)
            rows: Any = _StaticRows(path.step(self.model, positions), path.attention, cache,
                                    mask, params.max_new_tokens)
        else:
            rows = _PaddedRows(self.model, cache, mask)
        out = decode_rows(rows, logits, pos, ctx, sample, params, seed, checker)
        self.stats.generated_tokens += sum(len(g.token_ids) for g in out)
        return out

    def _check_lengths(self, contexts: list[_Context], params: SamplingParams) -> None:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        longest = max(c.cut + len(c.block) for c in contexts)
        if limit is not None and longest + params.max_new_tokens > limit:
            raise UserError(f"a context of {longest} tokens plus max_new_tokens="
                            f"{params.max_new_tokens} exceeds the model's {limit} positions")

    def _clock(self) -> float:
        device = kv_cache.model_device(self.model)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()


class _PaddedRows:
    """Rows of a `DynamicCache` with a 2-D attention mask (`kv_cache`): the engine's layout."""

    def __init__(self, model: Any, cache: Any, mask: torch.Tensor) -> None:
        self.model, self.cache, self.mask = model, cache, mask

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        logits, self.mask = kv_cache.decode_step(self.model, self.cache, self.mask, pos, tokens)
        return logits

    def keep(self, live: torch.Tensor) -> torch.Tensor:
        index = live.nonzero()[:, 0]
        self.cache, self.mask = kv_cache.select_rows(self.cache, self.mask, index)
        return index


class _StaticRows:
    """The same rows in preallocated buffers, decoded by a step of `fused_forward.DECODE_PATHS`.

    The prefilled `DynamicCache` is copied once into per-layer buffers `[R, Hk, L + T, D]` with
    room for every token to come, and the mask into a boolean `[R, L + T]`; a step writes one
    slot in place instead of concatenating the whole cache, and attends through transformers'
    SDPA call over the filled slots, with the mask `model(...)` would build (so with the exact
    path the logits are those of `_PaddedRows`, bit for bit; `attention` is the path's).
    """

    def __init__(self, step: Any, attention: Callable[..., torch.Tensor], cache: Any,
                 mask: torch.Tensor, room: int) -> None:
        self.step, self.attention = step, attention
        self.length = mask.shape[1]
        self.keys, self.values = [], []
        for layer in cache.layers:
            for src, dst in ((layer.keys, self.keys), (layer.values, self.values)):
                buf = src.new_empty((*src.shape[:2], self.length + room, src.shape[3]))
                buf[:, :, :self.length] = src
                dst.append(buf)
        self.mask = torch.zeros((mask.shape[0], self.length + room), dtype=torch.bool,
                                device=mask.device)
        self.mask[:, :self.length] = mask.bool()
        self.padded = not bool(self.mask[:, :self.length].all())

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        slot = self.length
        self.mask[:, slot] = True
        # [R, 1, 1, L + 1], True = visible; none without padding, as transformers skips it
        # then (SDPA may pick another kernel with a mask, so this keeps the same one).
        visible = self.mask[:, None, None, :slot + 1] if self.padded else None

        def attend(module: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                   ) -> torch.Tensor:
            keys, values = self.keys[module.layer_idx], self.values[module.layer_idx]
            keys[:, :, slot] = k
            values[:, :, slot] = v
            return self.attention(module, q, keys[:, :, :slot + 1], values[:, :, :slot + 1],
                                  visible)

        logits = self.step.forward(tokens, pos, attend)
        self.length += 1
        return logits

    def keep(self, live: torch.Tensor) -> torch.Tensor:
        """Drop finished rows by moving the last live rows into their places: only as many
        rows are copied as have finished (their filled slots), not the whole batch."""
        kept = int(live.sum())
        holes = (~live[:kept]).nonzero()[:, 0]  # finished rows among the first `kept`
        movers = live[kept:].nonzero()[:, 0] + kept  # live rows past them, one per hole
        order = torch.arange(kept, device=live.device)
        order[holes] = movers
        for bufs in (self.keys, self.values):
            for i, buf in enumerate(bufs):
                if len(holes):
                    buf[holes, :, :self.length] = buf[movers, :, :self.length]
                bufs[i] = buf[:kept]
        self.mask = self.mask[order]
        self.padded = not bool(self.mask[:, :self.length].all())
        return order


def _default_eos(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if gen_eos is not None:
        ids.update(int(t) for t in ([gen_eos] if isinstance(gen_eos, int) else gen_eos))
    return ids


