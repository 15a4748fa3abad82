"""The format tags of answers and confidences, spelled once.

Turn 1 (every mode): `<think>…</think>` then `<answer>…</answer>`. Confidence (two-turn turn 2,
or after the answer in single-turn RLCR): an optional `<analysis>…</analysis>` then
`<confidence>…</confidence>`. Masks, rewards, stop strings, SFT traces, the probe's forced text
and the tiny tokenizer's added tokens all read them from here.
"""

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
ANALYSIS_OPEN, ANALYSIS_CLOSE = "<analysis>", "</analysis>"
CONFIDENCE_OPEN, CONFIDENCE_CLOSE = "<confidence>", "</confidence>"

# How instructions name a pair of tags in prose: "... in <analysis> </analysis> tags".
THINK_PAIR = f"{THINK_OPEN} {THINK_CLOSE}"
ANSWER_PAIR = f"{ANSWER_OPEN} {ANSWER_CLOSE}"
ANALYSIS_PAIR = f"{ANALYSIS_OPEN} {ANALYSIS_CLOSE}"
CONFIDENCE_PAIR = f"{CONFIDENCE_OPEN} {CONFIDENCE_CLOSE}"

TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE,
        ANALYSIS_OPEN, ANALYSIS_CLOSE, CONFIDENCE_OPEN, CONFIDENCE_CLOSE)
