"""Next-token sampling as pure tensor functions, with batch-invariant randomness.

Randomness does not come from a stateful generator: the uniform number that picks sample `s` of
context `c` at step `t` is a hash of `(seed, c, s, t)`. A sample therefore does not depend on
which other rows share its batch, how many rows were finished and dropped, or whether its prompt
was prefilled once and expanded or re-encoded: cache reuse, `max_batch_size` and ordering leave
the samples unchanged (up to float noise in the logits themselves).

Log-prob convention (the one a trainer recomputes as old log-probs, as TRL and verl do): the
log-prob of the sampled token under `softmax(logits / temperature)` *before* top-k / top-p
filtering. With `temperature == 0` (greedy) it is the log-prob under `softmax(logits)`.

Shapes: B = rows, V = vocabulary.
"""

from __future__ import annotations

import torch

_M32 = 0xFFFFFFFF
_MUL_A, _MUL_B = 0x7FEB352D, 0x846CA68B  # lowbias32 constants (Wellons' hash prospector)
# One constant per stage of `uniforms` (hex digits of pi): a key that equals the state it is
# mixed into gives a hashed constant, not the hash's fixed point 0.
_STAGE = (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """`(x * c) mod 2**32` for `0 <= x < 2**32`, without int64 overflow (split `c` in halves)."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32), elementwise on an int64 tensor of values in [0, 2**32)."""
    x = x & _M32
    x = _mul32(x ^ (x >> 16), _MUL_A)
    x = _mul32(x ^ (x >> 15), _MUL_B)
    return x ^ (x >> 16)


def mix32_int(x: int) -> int:
    """`mix32` on one Python int (the same function; used to derive per-request seeds)."""
    x &= _M32
    x = ((x ^ (x >> 16)) * _MUL_A) & _M32
    x = ((x ^ (x >> 15)) * _MUL_B) & _M32
    return x ^ (x >> 16)


def derive_seed(seed: int, *keys: int) -> int:
    """A 31-bit seed for `keys` (e.g. a prompt index) under `seed`; distinct keys look unrelated."""
    h = mix32_int(seed)
    for k in keys:
        h = mix32_int(h ^ mix32_int(k))
    return h & 0x7FFFFFFF


def step_seed(seed: int, step: int) -> int:
    """The sampling seed of training step `step`: `(seed * 1_000_003 + step) * 64`.

    Every process of a run uses it; samples are told apart by their random stream, numbered by
    their place in the global batch (`SamplingParams.first_stream`), not by the process. The
    stride of 64 keeps the values of earlier runs (whose process 0 used it), so they replay
    exactly. Different base seeds stay apart for the first 1_000_003 steps. (`uniforms` reads
    `2 * seed + turn` mod 2**32, one value per (step, turn) while `step * 64 < 2**31`.)
    """
    return (seed * 1_000_003 + step) * 64


def uniforms(seed: int, context: torch.Tensor, sample: torch.Tensor, step: int) -> torch.Tensor:
    """Uniform numbers in [0, 1), one per row, a pure function of `(seed, context, sample, step)`.

    Args:
        context: `[B]` int64, the index of each row's context within the call.
        sample: `[B]` int64, the index of each row among its context's samples.
    Returns:
        `[B]` float64 with 53 random bits.

    Each key enters the state at its own stage with its own odd constant, so equal keys do not
    cancel (`seed == context` once zeroed the state, and `mix32(0) == 0` fixed it for every
    seed) and swapped keys give another stream.
    """
    return uniforms_at(stream_state(seed, context, sample), step)


def stream_state(seed: int, context: torch.Tensor, sample: torch.Tensor) -> torch.Tensor:
    """The first three stages of `uniforms`, which do not depend on the step: `[B]` int64.

    A decoding loop computes it once per row and calls `uniforms_at` at every step (the same
    numbers as `uniforms`, with a third of the work)."""
    h = mix32(torch.full_like(context, (seed & _M32) ^ _STAGE[0]))
    h = mix32(h ^ ((context & _M32) + _STAGE[1]))
    return mix32(h ^ ((sample & _M32) + _STAGE[2]))


def uniforms_at(state: torch.Tensor, step: int | torch.Tensor) -> torch.Tensor:
    """`uniforms` at `step` from `stream_state`'s `[B]` state: `[B]` float64 in [0, 1).

    Broadcasts: `state[:, None]` and a `[T]` int64 tensor of steps give the `[B, T]` table of
    every step at once (the same numbers; integer arithmetic is exact)."""
    h = mix32(state ^ (((step & _M32) + _STAGE[3]) & _M32))
    h2 = mix32(h ^ _STAGE[4])
    bits = (h << 21) | (h2 >> 11)  # 32 + 21 = 53 bits
    return bits.to(torch.float64) / float(2**53)


def uniform_table(state: torch.Tensor, steps: int) -> torch.Tensor:
    """`[B, steps]`: column `t` is `uniforms_at(state, t)` (a decoding loop draws them once)."""
    return uniforms_at(state[:, None], torch.arange(steps, device=state.device)[None, :])


def sanitize_logits(logits: torch.Tensor) -> torch.Tensor:
    """`[B, V]` logits as float32 with NaN and infinities made finite, so no row is all -inf and a
    broken model cannot produce NaN log-probs (a NaN logit becomes an impossible token)."""
    return torch.nan_to_num(logits.float(), nan=-1e30, posinf=1e30, neginf=-1e30)


# How many of the most likely tokens `nucleus_drop` looks at before sorting the whole row. A
# chat model's top-p nucleus is a handful of tokens, while sorting a 49k vocabulary per row took
# 38 % of a decoding step of SmolLM2 on 2 cores; rows whose nucleus is not inside the candidates
# (or tie with a token outside them) fall back to the full sort, so the result is the same.
NUCLEUS_CANDIDATES = 256


def sorted_nucleus_drop(scaled: torch.Tensor, top_p: float) -> torch.Tensor:
    """`[B, V]` True where a token is outside the top-p nucleus: its better tokens (stable order:
    higher logit first, then lower index) already hold `top_p` of the mass. The most likely token
    is never dropped. The reference: a full sort of every row."""
    sorted_logits, order = torch.sort(scaled, dim=-1, descending=True, stable=True)  # [B, V]
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # probability of the better tokens
    drop_sorted = mass_before >= top_p
    drop_sorted[:, 0] = False
    return torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)


def nucleus_drop(scaled: torch.Tensor, top_p: float,
                 candidates: int = NUCLEUS_CANDIDATES) -> torch.Tensor:
    """`sorted_nucleus_drop` computed on each row's `candidates` most likely tokens: exact
    wherever they hold at least `top_p` of the mass and no token outside them ties with the
    last (the rest are dropped whatever their order); other rows take the full sort.

    Args: scaled `[B, V]` logits (-inf allowed). Returns `[B, V]` bool."""
    vocab = scaled.shape[-1]
    if vocab <= 2 * candidates:
        return sorted_nucleus_drop(scaled, top_p)
    # One more than the candidates: whether the next token ties with the last candidate.
    values, index = torch.topk(scaled, candidates + 1, dim=-1)  # [B, C + 1], descending
    after = values[:, candidates]  # [B]
    values, index = values[:, :candidates], index[:, :candidates]
    # topk orders equal values arbitrarily: order candidates by index, then stably by value.
    by_index = torch.argsort(index, dim=-1)
    values, index = values.gather(-1, by_index), index.gather(-1, by_index)
    values, by_value = torch.sort(values, dim=-1, descending=True, stable=True)
    index = index.gather(-1, by_value)
    # The full row's softmax, as the sort computes it, so a mass that sits exactly on `top_p`
    # (equal tokens) rounds alike.
    probs = torch.softmax(scaled, dim=-1).gather(-1, index)  # [B, C]
    mass_before = torch.cumsum(probs, dim=-1) - probs
    drop_candidates = mass_before >= top_p
    drop_candidates[:, 0] = False
    drop = torch.ones_like(scaled, dtype=torch.bool).scatter(-1, index, drop_candidates)
    last = values[:, -1]  # [B]
    # A -inf outside the candidates stays -inf whether dropped or not.
    exact = (last == -torch.inf) | ((mass_before[:, -1] + probs[:, -1] >= top_p)
                                    & (after < last))
    if not bool(exact.all()):
        rows = ~exact
        drop[rows] = sorted_nucleus_drop(scaled[rows], top_p)
    return drop


def filter_top_k_top_p(scaled: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set to -inf the logits outside the top-k, then outside the top-p nucleus (of what is left).

    Args:
        scaled: `[B, V]` temperature-scaled logits. `top_k == 0` and `top_p == 1` disable a filter.
    Returns:
        `[B, V]`; the most likely token always survives. Ties at the k-th value all survive.
    """
    out = scaled
    if 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(out, top_k, dim=-1).values[:, -1:]  # [B, 1]
        out = out.masked_fill(out < kth, -torch.inf)
    if top_p < 1.0:
        out = out.masked_fill(nucleus_drop(out, top_p), -torch.inf)
    return out


def sample_tokens(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float, u: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row by inverse CDF on the filtered distribution.

    Args:
        logits: `[B, V]` raw next-token logits.
        u: `[B]` uniforms in [0, 1) (from `uniforms`); ignored when `temperature == 0`.
    Returns:
        tokens `[B]` int64 and their log-probs `[B]` float32 (convention in the module docstring).
    """
    logits = sanitize_logits(logits)
    if temperature == 0:
        tokens = logits.argmax(dim=-1)
        logp = torch.log_softmax(logits, dim=-1)
        return tokens, logp.gather(-1, tokens[:, None])[:, 0]
    scaled = logits if temperature == 1 else logits / temperature  # [B, V]; x / 1 == x
    logp = torch.log_softmax(scaled, dim=-1)
    probs = torch.softmax(filter_top_k_top_p(scaled, top_k, top_p), dim=-1)
    tokens = inverse_cdf(probs, u.to(probs.device))
    # Rounding could only land on a zero-probability token at the very end; fall back to argmax.
    bad = probs.gather(-1, tokens[:, None])[:, 0] <= 0
    if bool(bad.any()):
        tokens = torch.where(bad, probs.argmax(dim=-1), tokens)
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]


_BLOCK = 64  # tokens per block of `inverse_cdf` (or a divisor of the vocabulary near it)
_SMALL = 1 << 17  # rows x vocabulary up to which `inverse_cdf` runs the sequential reference


def _block_size(vocab: int) -> int:
    """A divisor of `vocab` in [_BLOCK / 2, _BLOCK] when there is one (no padding copy)."""
    return next((b for b in range(_BLOCK, _BLOCK // 2 - 1, -1) if vocab % b == 0), _BLOCK)


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The first token whose cumulative probability exceeds `u` times the total, per row.

    Args:
        probs: `[B, V]` float32, non-negative (zeros for filtered tokens).
        u: `[B]` float64 in [0, 1).
    Returns:
        `[B]` int64.

    The cumulative sums are float64 sums of the float32 probabilities, found in two steps
    rather than with a running sum over the whole vocabulary: the sums of blocks of about
    `_BLOCK` tokens locate the block, a running sum inside that one block the token. The float64 sums
    differ from a sequential `cumsum` only by rounding (about 1e-13 of the total), so a token
    differs only when `u` falls that close to a boundary between two tokens: about once in
    1e13 draws (`inverse_cdf_reference` is the sequential version; the tests compare them).
    """
    rows, vocab = probs.shape
    if rows * vocab <= _SMALL:  # a few rows: the plain running sum is quicker (fewer operations)
        return inverse_cdf_reference(probs, u)
    size = _block_size(vocab)
    nb = -(-vocab // size)
    if nb * size != vocab:
        probs = torch.nn.functional.pad(probs, (0, nb * size - vocab))
    blocks = probs.view(rows, nb, size)
    block_cdf = blocks.sum(-1, dtype=torch.float64).cumsum_(-1)  # [B, nb]
    target = u * block_cdf[:, -1]  # [B], strictly below the total
    b = (block_cdf <= target[:, None]).sum(-1).clamp_(max=nb - 1)  # [B] the token's block
    before = block_cdf.gather(-1, (b - 1).clamp(min=0)[:, None])[:, 0].masked_fill_(b == 0, 0)
    inner = blocks.gather(1, b[:, None, None].expand(rows, 1, size))[:, 0]  # [B, size]
    inner_cdf = inner.double().cumsum_(-1) + before[:, None]
    j = (inner_cdf <= target[:, None]).sum(-1).clamp_(max=size - 1)
    return (b * size + j).clamp_(max=vocab - 1)


def inverse_cdf_reference(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """`inverse_cdf` with one sequential running sum over the vocabulary (the slow reference)."""
    cdf = torch.cumsum(probs.double(), dim=-1)  # [B, V]
    target = (u * cdf[:, -1])[:, None]  # [B, 1]
    return torch.searchsorted(cdf, target, right=True)[:, 0].clamp_(max=probs.shape[-1] - 1)
