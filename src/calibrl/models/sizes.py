"""Sizes of the tiny model, kept free of torch/transformers so the CLI can read the defaults."""

from __future__ import annotations

from dataclasses import dataclass

from calibrl.errors import UserError

# The tiny family is built and trained on a CPU; 1e9 parameters are 4 GB of fp32 weights (plus as
# much again for gradients and twice that for Adam). Beyond it, building would exhaust memory or
# spend minutes initialising instead of failing, so such a config is refused up front.
MAX_PARAMETERS = 1_000_000_000
MAX_POSITIONS = 1 << 20
# The built tokenizer has ~2k tokens; its exact size needs the tokenizer, which this file avoids.
VOCABULARY_ALLOWANCE = 4096


@dataclass(frozen=True)
class TinyModelSizes:
    """Shape of the tiny model; the defaults give about 3.9M parameters (vocabulary ~2k).

    Embeddings are tied because at hidden 256 a separate output matrix would be a large share
    of the parameters.
    """

    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4  # head size 64
    num_kv_heads: int | None = None  # None: = num_heads (grouping saves nothing at this size)
    intermediate_size: int | None = None  # None: 3 * hidden_size
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "max_position_embeddings"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("num_kv_heads", "intermediate_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{name} must be at least 1, got {value}")
        if self.rope_theta <= 0:
            raise UserError(f"rope_theta must be positive, got {self.rope_theta}")
        if self.hidden_size % self.num_heads:
            raise UserError(
                f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        if (self.hidden_size // self.num_heads) % 2:
            raise UserError(
                f"head size {self.hidden_size // self.num_heads} must be even for rotary embeddings"
            )
        if self.num_heads % self.kv_heads:
            raise UserError(
                f"num_heads {self.num_heads} is not divisible by num_kv_heads {self.kv_heads}"
            )
        if self.max_position_embeddings > MAX_POSITIONS:
            raise UserError(f"max_position_embeddings {self.max_position_embeddings:,} is over "
                            f"the tiny model's limit of {MAX_POSITIONS:,}")
        if self.parameters() > MAX_PARAMETERS:
            raise UserError(f"these sizes give about {self.parameters():,} parameters, over the "
                            f"tiny model's limit of {MAX_PARAMETERS:,}")

    def parameters(self, vocab_size: int = VOCABULARY_ALLOWANCE) -> int:
        """Number of parameters of a model of these sizes with `vocab_size` tokens."""
        head = self.hidden_size // self.num_heads
        width = self.hidden_size
        attention = 2 * width * width + 2 * width * head * self.kv_heads  # q, o; k, v
        per_layer = attention + 3 * width * self.mlp_size + 2 * width  # + SwiGLU MLP, 2 norms
        embeddings = vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)
        return self.num_layers * per_layer + embeddings + self.hidden_size

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def mlp_size(self) -> int:
        return 3 * self.hidden_size if self.intermediate_size is None else self.intermediate_size
