"""A quicker decoding step that rounds differently from `model(...)` (opt-in: `decode="fused"`).

`FusedStepForward` computes the function `fast_forward.StepForward` computes, with its
operations regrouped into fewer and larger ones. Each regrouping changes the order of float
additions, so logits differ from `model(...)`'s by float rounding (about 1e-6 of their size)
and a sampled token may, rarely, differ where a uniform falls that close to a boundary of the
inverse CDF; the tests check log-probs within a tolerance and sampled frequencies by a
chi-square test against the exact path, which stays the default and the reference:

- one matrix product for queries, keys and values and one for gate and up, with the RMSNorm
  weight before them folded into their weights (`(x * w) @ W.T == x @ (W * w).T` in exact
  arithmetic), and the final norm's weight folded into the LM head: fewer operations, and
  on a CPU these three wide products run through oneDNN with weights packed once per build,
  1.1-1.5x quicker than `torch.mm` on the project's AMD machine (`_Product`);
- the residual additions inside the products (`addmm`: `hidden + out @ W.T` in one call);
- the attention over the cache as a broadcast product and sum (`broadcast_attention`) instead
  of SDPA's CPU kernel, which has a fixed cost per row and head at one query and, on the AMD
  machine, reads a cache of a few MB (20+ rows of 100+ slots) more slowly (SDPA is the quicker
  one for smaller caches; choosing by size gained nothing measurable in the decoding loop).

The folded weights are a copy made when the step is built, i.e. once per decoding call of the
engine or the probe: it follows the trainer's in-place updates between calls, not during one.
A build takes ~3 ms on the demo's model (folding and packing; each folded weight is one
allocation scaled in place, as a second fresh copy cost 6 ms of page faults alone).

Shapes: R = rows, Hq / Hk = query / kv heads, g = Hq / Hk, D = head dim, h = hidden size,
I = MLP width, L = cached slots, V = vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from calibrl.errors import UserError
from calibrl.rollout import fast_forward


def _cat(parts: list[torch.Tensor | None]) -> torch.Tensor | None:
    return None if all(p is None for p in parts) else torch.cat(parts)  # type: ignore[arg-type]


def _fold(parts: list[torch.Tensor], norm_weight: torch.Tensor) -> torch.Tensor:
    """`cat(parts) * norm_weight` `[out, in]`: the norm's weight scales the product's inputs."""
    return torch.cat(parts).mul_(norm_weight)


PACKED_FROM = 4  # rows from which oneDNN's packed product is the quicker one (see `_Product`)


class _Product:
    """`x @ weight.T + bias` for `x [R, in]`. On a CPU (fp32) the weight is also packed once for
    oneDNN (`_reorder_linear_weight`), whose product from `PACKED_FROM` rows up is quicker than
    `torch.mm`'s for wide outputs on the project's AMD machine (1.1-1.5x for q/k/v, gate/up
    and the LM head at 4-236 rows; 0.7x at one row; no gain for the narrow o and down products,
    which keep `addmm` for the residual). Packing costs ~0.5 ms a weight, once per build."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        self.weight, self.bias = weight, bias
        packable = (weight.device.type == "cpu" and weight.dtype == torch.float32
                    and torch.backends.mkldnn.is_available() and _packed is not None
                    and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight) if packable else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and x.shape[0] >= PACKED_FROM:
            return _packed(x, self.packed, self.bias, "none", [], "")
        return _linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class _FusedLayer:
    attn: Any  # the layer's attention module, handed to `attend`
    qkv: _Product  # [(Hq + 2 Hk) D, h], the input norm's weight folded in
    o: torch.Tensor  # [h, Hq D]
    o_bias: torch.Tensor | None
    gate_up: _Product  # [2 I, h], the post-attention norm's weight folded in
    down: torch.Tensor  # [h, I]
    down_bias: torch.Tensor | None
    eps_in: float
    eps_post: float


class FusedStepForward:
    """`forward(tokens, pos, attend)` as `fast_forward.StepForward`: the next-token logits `[R, V]`
    after one token per row, up to float rounding (see the module docstring)."""

    def __init__(self, model: Any, positions: int) -> None:
        exact = fast_forward.StepForward(model, positions)  # rotary tables, shapes, embedding
        self.head_dim, self.heads, self.kv_heads = exact.head_dim, exact.heads, exact.kv_heads
        self.cos, self.sin, self.embed = exact.cos, exact.sin, exact.embed
        with torch.no_grad():
            self.layers = [self._fuse(layer) for layer in exact.layers]
            weight, self.eps = exact.norm
            self.head = _Product(_fold([exact.head.weight], weight), exact.head.bias)  # [V, h]

    @staticmethod
    def _fuse(layer: Any) -> _FusedLayer:
        w_in, eps_in = layer.norm_in
        w_post, eps_post = layer.norm_post
        qkv = (layer.q, layer.k, layer.v)
        return _FusedLayer(
            layer.attn, _Product(_fold([m.weight for m in qkv], w_in), _cat([m.bias for m in qkv])),
            layer.o.weight, layer.o.bias,
            _Product(_fold([layer.gate.weight, layer.up.weight], w_post),
                     _cat([layer.gate.bias, layer.up.bias])),  # Llama's `mlp_bias`
            layer.down.weight, layer.down.bias, eps_in, eps_post)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor, attend: fast_forward.Attend
                ) -> torch.Tensor:
        """`tokens`, `pos`: `[R]`; `attend` as in `fast_forward`'s docstring."""
        rows, dim, half = tokens.shape[0], self.head_dim, self.head_dim // 2
        hq, hk = self.heads, self.kv_heads
        hidden = F.embedding(tokens, self.embed.weight, self.embed.padding_idx)  # [R, h]
        cos = F.embedding(pos, self.cos)[:, None]  # [R, 1, D]
        sin = F.embedding(pos, self.sin)[:, None]
        for layer in self.layers:
            qkv = layer.qkv(_unit_rms(hidden, layer.eps_in))
            qkv = qkv.view(rows, hq + 2 * hk, dim)  # [R, Hq + 2 Hk, D]
            qk = qkv[:, :hq + hk]
            swapped = torch.cat([qk[..., half:], qk[..., :half]], -1)
            qk = (qk * cos).add_(swapped.mul_(sin))  # rotary, as in `StepForward`
            out = attend(layer.attn, qk[:, :hq], qk[:, hq:], qkv[:, hq + hk:])  # [R, Hq D]
            hidden = _residual(hidden, out, layer.o, layer.o_bias)
            gate_up = layer.gate_up(_unit_rms(hidden, layer.eps_post))  # [R, 2 I]
            width = gate_up.shape[1] // 2
            act = F.silu(gate_up[:, :width]).mul_(gate_up[:, width:])  # [R, I]
            hidden = _residual(hidden, act, layer.down, layer.down_bias)
        return self.head(_unit_rms(hidden, self.eps))  # [R, V]


def _unit_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of `x [R, h]` without its weight (folded into the next product)."""
    return x * x.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return _mm(x, weight.T) if bias is None else _addmm(bias, x, weight.T)


def _residual(hidden: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None) -> torch.Tensor:
    """`hidden + x @ weight.T (+ bias)`, the addition inside the product."""
    out = _addmm(hidden, x, weight.T)
    return out if bias is None else out.add_(bias)


# Module attributes so a benchmark can time the matrix products.
_mm, _addmm = torch.mm, torch.addmm
_packed = getattr(torch.ops.mkldnn, "_linear_pointwise", None)  # None in builds without it


def broadcast_attention(module: Any, query: torch.Tensor, keys: torch.Tensor,
                        values: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
    """`fast_forward.sdpa_decode`'s attention (same arguments) as elementwise products and sums.

    Args:
        query: `[R, Hq, D]`, not scaled.
        keys, values: `[R, Hk, L, D]`.
        visible: `[R, 1, 1, L]` bool, True where a row sees a slot, or None (every slot).
    Returns:
        `[R, Hq * D]`.

    With one query per row, SDPA and `matmul` run one small product per row and head, each with
    a fixed cost of microseconds; a broadcast product and a sum over the whole batch have none.
    """
    rows, q_heads, dim = query.shape
    kv_heads = keys.shape[1]
    q = (query * module.scaling).view(rows, kv_heads, q_heads // kv_heads, 1, dim)
    scores = (q * keys[:, :, None]).sum(-1)  # [R, Hk, g, L]
    if visible is not None:
        scores.masked_fill_(~visible, -torch.inf)  # every row sees at least its new token
    probs = torch.softmax(scores, -1)[..., None]  # [R, Hk, g, L, 1]
    return (probs * values[:, :, None]).sum(-2).reshape(rows, q_heads * dim)


@dataclass(frozen=True)
class DecodePath:
    """How a decoding step is computed: `step(model, positions)` builds it (its `forward` as
    `StepForward.forward`), `attention` attends over a padded cache (as `sdpa_decode`)."""

    step: Callable[[Any, int], Any]
    attention: Callable[..., torch.Tensor]


DECODE_PATHS: dict[str, DecodePath] = {
    "exact": DecodePath(fast_forward.StepForward, fast_forward.sdpa_decode),  # bit-exact
    "fused": DecodePath(FusedStepForward, broadcast_attention),  # quicker, rounds differently
}


def decode_path(name: str) -> DecodePath:
    """The path called `name`, or a `UserError` naming the choices."""
    if name not in DECODE_PATHS:
        raise UserError(f"unknown decode path {name!r}; choose one of {', '.join(DECODE_PATHS)}")
    return DECODE_PATHS[name]
