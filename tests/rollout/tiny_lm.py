"""A tiny byte-level BPE tokenizer and a random-weight Qwen2 model, built in code (no downloads).

Shared by the rollout tests and `benchmarks/rollout/bench_rollout.py`.
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

CORPUS = [
    "Using the numbers [3, 5, 7], create an equation that equals 8.",
    "<think> 3 + 5 = 8, so 3 + 5 works. </think> <answer> 3 + 5 </answer>",
    "<think> 7 - 3 = 4 and 4 * 2 = 8 </think> <answer> (7 - 3) * 2 </answer>",
    "How confident are you? <analysis> the check passed </analysis> <confidence> 0.9 </confidence>",
    "The quick brown fox jumps over the lazy dog. Assistant: Let me think step by step.",
]
EOS, PAD = "<|endoftext|>", "<|pad|>"


def build_tokenizer(vocab_size: int = 320) -> PreTrainedTokenizerFast:
    """Byte-level BPE: any text encodes, and tags like `</answer>` span several tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)


def build_model(vocab_size: int, seed: int = 0, hidden: int = 64, layers: int = 2,
                heads: int = 4, kv_heads: int = 2) -> Qwen2ForCausalLM:
    """A random Qwen2 with logits scaled up so samples are not uniform noise."""
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=512,
                         tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)  # peaked next-token distributions, like a trained model
    return model.eval()
