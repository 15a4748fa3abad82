"""A small byte-level BPE tokenizer for a task's conversations (Countdown unless told otherwise),
built in code with `tokenizers`.

Design (why, in short):
- Byte-level BPE (the GPT-2 / Qwen2 scheme): every string encodes, and decode(encode(text)) ==
  text for any text, whitespace included, because bytes map one-to-one onto symbols. A
  word-level vocabulary would need an unknown token and lose text; its default decoder also
  joins tokens with spaces.
- One pre-tokenizer regex decides the units; BPE merges are then learned from
  `corpus.tokenizer_corpus()` until no pair is left, so each unit seen there is one token:
  * digit runs are cut into pieces of at most three digits (as Llama 3 does) and every 1-3
    digit string is in the corpus, so numbers 0-999 are single tokens and never carry a space;
  * an arithmetic operator takes one space on either side (" + ", " = "), which keeps the
    number tokens bare and makes "12 + 5 = 17" five tokens;
  * a word takes one leading space (" the"); other punctuation is one character; whitespace
    runs are their own tokens.
- The eight answer/confidence tags are added tokens (matched before the regex, never split)
  but not special ones, so `skip_special_tokens=True` keeps them.
- ChatML turns (`<|im_start|>role\\n...<|im_end|>\\n`), as Qwen2 writes them; eos is
  `<|im_end|>` and `<|endoftext|>` pads.
A saved model folder carries its tokenizer: load that one, not a rebuilt one, because a change
to the corpus (or to Python's `random`) changes the token ids.
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from calibrl.models.corpus import tokenizer_corpus
from calibrl.protocol.tags import TAGS
from calibrl.tasks import DEFAULT_TASK

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, IM_END)

SPLIT_PATTERN = r"\d{1,3}| ?[+\-*/=] ?| ?\p{L}+|[^\s\p{L}\p{N}]|\s+(?!\S)|\s+"

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Larger than the corpus can ever produce: training stops when no pair is left to merge.
_VOCAB_CEILING = 1 << 16


def build_core_tokenizer(task: str = DEFAULT_TASK) -> Tokenizer:
    """The raw `tokenizers.Tokenizer`: pre-tokenizer, merges learned from the corpus of `task`
    (`tokenizer_corpus`), tags."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_CEILING,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(tokenizer_corpus(task=task), trainer=trainer)
    core.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAGS])
    return core


def build_tokenizer(model_max_length: int = 2048, task: str = DEFAULT_TASK
                    ) -> PreTrainedTokenizerFast:
    """The transformers fast tokenizer with the ChatML template, fitted to `task`'s prompts;
    same output on every call."""
    return PreTrainedTokenizerFast(
        tokenizer_object=build_core_tokenizer(task),
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
