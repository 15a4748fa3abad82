"""Tokenizers built in code (no hub downloads) for the mask and batch tests."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = [
    "<think> I add the numbers first. </think> <answer> 1 + 2 </answer>",
    "<think>Try 3 * 4 then subtract.</think>\n<answer>(3 * 4) - 2</answer>",
    "<analysis> The answer looks right. </analysis> <confidence> 0.8 </confidence>",
    "<confidence>0.25</confidence> Using the numbers, create an equation that equals the target.",
    "café naïve 置信度 – done.",
]


def _train(tok: Tokenizer, trainer) -> Tokenizer:
    tok.train_from_iterator(CORPUS * 3, trainer)
    return tok


@pytest.fixture(scope="session")
def byte_tok() -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2 / Qwen scheme): tags end up split into pieces and glued to text."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    _train(
        tok,
        trainers.BpeTrainer(
            vocab_size=320,
            special_tokens=["<|endoftext|>"],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )


@pytest.fixture(scope="session")
def metaspace_tok() -> PreTrainedTokenizerFast:
    """SentencePiece-like BPE (Llama 2 scheme): `▁` spaces, byte fallback, leading space stripped."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    bytes_ = [f"<0x{i:02X}>" for i in range(256)]
    _train(
        tok,
        trainers.BpeTrainer(
            vocab_size=420,
            special_tokens=["<unk>", "</s>", *bytes_],
            show_progress=False,
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>")


@pytest.fixture(scope="session")
def glued_tok() -> PreTrainedTokenizerFast:
    """A byte-level vocabulary chosen by hand so that tags are split and glued to neighbours.

    Only decoding is used, so the tokens need no merges: ids are written directly.
    """
    pieces = [
        "Ok",
        ".<th",
        "ink>",
        "Ġ2",
        "</",
        "think><ans",
        "wer>",
        "1+1",
        "</answer>Ċ",
        "Ċ",
        "<analysis",
        ">Ġhmm</analysis><",
        "confidence>0.",
        "9</confidence>",
        "<|eos|>",
    ]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|eos|>", pad_token="<|eos|>")
