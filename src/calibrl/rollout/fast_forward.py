"""One decoding step of a Llama-family model without transformers' per-call machinery.

A decoding step feeds one token per row. On a small model on a CPU the arithmetic of that step
is a few milliseconds, and `model(...)` spends several times as much around it: building the
4-D mask, the cache object's bookkeeping, keyword plumbing and output classes through every
layer. `StepForward` runs the same layers on the same weights with the same operations in the
same order (`F.embedding`, the model's own rotary module and `apply_rotary_pos_emb`, RMSNorm
written as transformers writes it, `F.linear`, SiLU), so its logits are those of `model(...)`
bit for bit (tests/rollout/test_fast_forward.py checks it); only the attention is handed to the
caller, who owns the cache: `attend(module, query, key, value)` gets the new token's query,
key and value `[R, H, 1, D]` (rotary applied) and returns `[R, 1, Hq, D]`, the shape every
transformers attention function returns.

Supported: the architectures whose decoder layer is exactly that (`SUPPORTED`, full attention,
SiLU MLP, no forward hooks such as accelerate offloading or adapters). Anything else takes
the ordinary `model(...)` path (`supported` says which).

Shapes: R = rows, Hq / Hk = query / kv heads, D = head dim, V = vocabulary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

SUPPORTED = {"llama", "qwen2", "mistral"}  # model_type; their layers are the same block

Attend = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

_linear = F.linear  # a module attribute so a benchmark can time the matrix products


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
    return not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def _rms_norm(hidden: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    """`LlamaRMSNorm.forward` (Qwen2's and Mistral's are the same), operation for operation."""
    dtype = hidden.dtype
    hidden = hidden.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + norm.variance_epsilon)
    return norm.weight * hidden.to(dtype)


class StepForward:
    """`forward(tokens, pos, attend)`: the next-token logits `[R, V]` after one token per row."""

    def __init__(self, model: Any) -> None:
        inner = model.model
        self.model = model
        self.layers = list(inner.layers[:model.config.num_hidden_layers])
        self.embed, self.norm, self.rotary = inner.embed_tokens, inner.norm, inner.rotary_emb
        self.head = model.lm_head
        self.rope = sys.modules[type(self.layers[0].self_attn).__module__].apply_rotary_pos_emb

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor, attend: Attend) -> torch.Tensor:
        """`tokens`, `pos`: `[R]`. The layers' order of operations is transformers'."""
        rows = tokens.shape[0]
        hidden = F.embedding(tokens[:, None], self.embed.weight, self.embed.padding_idx)  # [R,1,h]
        cos, sin = self.rotary(hidden, pos[:, None])
        for layer in self.layers:
            attn, mlp = layer.self_attn, layer.mlp
            x = _rms_norm(hidden, layer.input_layernorm)
            shape = (rows, 1, -1, attn.head_dim)
            q = _linear(x, attn.q_proj.weight, attn.q_proj.bias).view(shape).transpose(1, 2)
            k = _linear(x, attn.k_proj.weight, attn.k_proj.bias).view(shape).transpose(1, 2)
            v = _linear(x, attn.v_proj.weight, attn.v_proj.bias).view(shape).transpose(1, 2)
            q, k = self.rope(q, k, cos, sin)
            out = attend(attn, q, k, v).reshape(rows, 1, -1).contiguous()  # [R, 1, Hq*D]
            hidden = hidden + _linear(out, attn.o_proj.weight, attn.o_proj.bias)
            x = _rms_norm(hidden, layer.post_attention_layernorm)
            gate = F.silu(_linear(x, mlp.gate_proj.weight, mlp.gate_proj.bias))
            up = _linear(x, mlp.up_proj.weight, mlp.up_proj.bias)
            hidden = hidden + _linear(gate * up, mlp.down_proj.weight, mlp.down_proj.bias)
        hidden = _rms_norm(hidden, self.norm)
        return _linear(hidden, self.head.weight, self.head.bias)[:, -1]  # [R, V]
