"""One decoding step of a Llama-family model without transformers' per-call machinery.

A decoding step feeds one token per row. On a small model on a CPU the arithmetic of that step
is a millisecond or two, and `model(...)` spends as much again around it: the 4-D mask, the
cache object's bookkeeping, keyword plumbing, output classes, and some sixty small tensor
operations per layer, each with its own dispatch cost. `StepForward` runs the same layers on the
same weights with the same arithmetic, element for element, in fewer operations:

- the rotary tables are computed once for every position (by the model's own rotary module),
  queries and keys are rotated together, and `rotate_half(x) * sin` is a swap of the two halves
  times a sine whose first half is negated (negation is exact);
- RMSNorm and the residual additions are the same operations, the intermediate ones in place;
- the attention is the SDPA call transformers makes, without its wrapper (`sdpa_decode`).

So the logits are those of `model(...)` bit for bit (tests/rollout/test_fast_forward.py), and
the samples do not depend on the speed-up. Quicker variants change the rounding, hence now and
then a sampled token: those worth having are the opt-in `fused_forward.FusedStepForward`
(`decode="fused"`), tested equal in distribution to this step, which stays the default and the
reference; the others measured are in benchmarks/rollout/README.md.

The caller owns the cache: `attend(module, q, k, v)` gets the layer's attention module
(`layer_idx`, `scaling`) and the new token's query `[R, Hq, D]`,
key and value `[R, Hk, D]` (rotary applied, not scaled) and returns `[R, Hq * D]`;
`sdpa_decode` is the attention `model(...)` would run.

Supported: the architectures whose decoder layer is exactly that block (`SUPPORTED`, full
attention, SiLU MLP, no forward hooks such as accelerate offloading or adapters). Anything else
takes the ordinary `model(...)` path (`supported` says which).

Shapes: R = rows, Hq / Hk = query / kv heads, D = head dim, h = hidden size, V = vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import use_gqa_in_sdpa

SUPPORTED = {"llama", "qwen2", "mistral"}  # model_type; their layers are the same block
LENGTH_DEPENDENT_ROPE = {"dynamic", "longrope"}  # rope types `dynamic_rope_update` rescales

Attend = Callable[[Any, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def supported(model: Any) -> bool:
    """Whether `StepForward` computes exactly what `model(...)` computes for this model."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in SUPPORTED:
        return False
    if not type(model).__module__.startswith("transformers.models."):
        return False  # a wrapper (adapters, compiled) may change what a layer computes
    if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return False
    if set(getattr(config, "layer_types", None) or ["full_attention"]) != {"full_attention"}:
        return False
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not all(hasattr(inner, n) for n in needed) or not hasattr(model, "lm_head"):
        return False
    if getattr(inner.rotary_emb, "rope_type", "default") in LENGTH_DEPENDENT_ROPE:
        return False  # its tables change with the sequence length: no table up front
    return not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


_linear = F.linear  # a module attribute so a benchmark can time the matrix products


class _Linear:
    """`x @ W.T + b` of one `torch.nn.Linear`, without the module call."""

    def __init__(self, module: torch.nn.Linear) -> None:
        self.weight, self.bias = module.weight, module.bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class _Layer:
    attn: Any  # the layer's attention module (`layer_idx`, `scaling`), handed to `attend`
    q: _Linear
    k: _Linear
    v: _Linear
    o: _Linear
    gate: _Linear
    up: _Linear
    down: _Linear
    norm_in: tuple[torch.Tensor, float]  # RMSNorm weight and epsilon
    norm_post: tuple[torch.Tensor, float]


class StepForward:
    """`forward(tokens, pos, attend)`: the next-token logits `[R, V]` after one token per row.

    `positions`: how many positions the rows reach (the size of the rotary tables). It reads
    the model's weights at every step, so it follows the trainer's in-place updates.
    """

    def __init__(self, model: Any, positions: int) -> None:
        inner, config = model.model, model.config
        self.head_dim = inner.layers[0].self_attn.head_dim
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.layers = [_Layer(
            layer.self_attn, *(_Linear(m) for m in (layer.self_attn.q_proj, layer.self_attn.k_proj,
                                   layer.self_attn.v_proj, layer.self_attn.o_proj,
                                   layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)),
            norm_in=_norm(layer.input_layernorm), norm_post=_norm(layer.post_attention_layernorm))
            for layer in inner.layers[:config.num_hidden_layers]]
        self.embed, self.norm, self.head = inner.embed_tokens, _norm(inner.norm), \
            _Linear(model.lm_head)
        with torch.no_grad():
            cos, sin = inner.rotary_emb(self.embed.weight[:1], torch.arange(
                positions, device=self.embed.weight.device)[None])
        half = self.head_dim // 2
        self.cos = cos[0]  # [P, D]
        self.sin = torch.cat([-sin[0, :, :half], sin[0, :, half:]], -1)  # signed: see docstring

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor, attend: Attend) -> torch.Tensor:
        """`tokens`, `pos`: `[R]`; `attend` as in the module docstring."""
        rows, dim, half = tokens.shape[0], self.head_dim, self.head_dim // 2
        hidden = F.embedding(tokens, self.embed.weight, self.embed.padding_idx)  # [R, h]
        cos = F.embedding(pos, self.cos)[:, None]  # [R, 1, D]
        sin = F.embedding(pos, self.sin)[:, None]
        for layer in self.layers:
            x = rms_norm(hidden, *layer.norm_in)
            qk = torch.cat([layer.q(x).view(rows, self.heads, dim),
                            layer.k(x).view(rows, self.kv_heads, dim)], 1)  # [R, Hq + Hk, D]
            swapped = torch.cat([qk[..., half:], qk[..., :half]], -1)
            qk = (qk * cos).add_(swapped.mul_(sin))  # q * cos + rotate_half(q) * sin
            v = layer.v(x).view(rows, self.kv_heads, dim)
            out = attend(layer.attn, qk[:, :self.heads], qk[:, self.heads:], v)  # [R, Hq D]
            hidden = hidden + layer.o(out)
            x = rms_norm(hidden, *layer.norm_post)
            hidden = hidden + layer.down(F.silu(layer.gate(x)).mul_(layer.up(x)))
        return self.head(rms_norm(hidden, *self.norm))  # [R, V]


def _norm(module: Any) -> tuple[torch.Tensor, float]:
    return module.weight, float(module.variance_epsilon)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`LlamaRMSNorm` on fp32 `x [R, h]` (Qwen2's and Mistral's are the same): its operations in
    its order, the intermediate ones in place."""
    scale = x.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()
    return weight * (x * scale)


def sdpa_decode(module: Any, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                visible: torch.Tensor | None) -> torch.Tensor:
    """The SDPA call transformers' `sdpa_attention_forward` makes for one new token per row.

    Args:
        query: `[R, Hq, D]`, not scaled (SDPA scales by `module.scaling`).
        keys, values: `[R, Hk, L, D]` (e.g. the filled part of a larger buffer).
        visible: `[R, 1, 1, L]` bool, True where a row sees a slot, or None (every slot).
    Returns:
        `[R, Hq * D]`.

    Grouped kv heads go the way transformers sends them (its own `use_gqa_in_sdpa` decides):
    `enable_gqa`, or the query heads of one kv head packed as that head's queries.
    """
    rows, q_heads, dim = query.shape
    groups = q_heads // keys.shape[1]
    q, gqa = query[:, :, None], False  # [R, Hq, 1, D]
    if groups > 1:
        if use_gqa_in_sdpa(visible, keys, values):
            gqa = True
        else:  # transformers' `pack_gqa`
            q = query.reshape(rows, keys.shape[1], groups, dim)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=visible, dropout_p=0.0,
                                         scale=module.scaling, is_causal=False, enable_gqa=gqa)
    return out.reshape(rows, q_heads * dim)
