"""The instruction texts calibrl adds to a task's conversation, spelled once.

- `RLCR_INSTRUCTION` is appended to the last user message in single-turn RLCR, so one completion
  holds think, answer, analysis and confidence;
- `CONFIDENCE_QUESTION` is the default turn-2 user message of the two-turn mode (configurable:
  `rollout.confidence_question`, `sft --confidence-question`, `eval --confidence-question`).

Rollout, SFT data, evaluation and the tiny tokenizer's corpus all read them from here; how they
are put into messages is `calibrl.rollout.prompts`.
"""

from calibrl.protocol.tags import ANALYSIS_PAIR, CONFIDENCE_PAIR

CONFIDENCE_QUESTION = (
    "How confident are you that your answer above is correct? Briefly analyse it in "
    f"{ANALYSIS_PAIR} tags, then give a probability between 0 and 1 in "
    f"{CONFIDENCE_PAIR} tags."
)

RLCR_INSTRUCTION = (
    f" After the answer, briefly analyse how sure you are in {ANALYSIS_PAIR} tags and give "
    "the probability that your answer is correct, a number between 0 and 1, in "
    f"{CONFIDENCE_PAIR} tags."
)
