"""Builders shared by the algo tests (tokenised samples and a small two-turn tree)."""

from __future__ import annotations

from calibrl.algo.rollout_tree import AnswerNode, PromptNode, RolloutTree, Sample


def encode(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def make_sample(
    tok,
    context: str,
    completion: str,
    reward: float = 0.0,
    *,
    eos: bool = True,
    logprob: float = -1.0,
    finish_reason: str = "stop",
) -> Sample:
    ids = encode(tok, completion) + ([tok.eos_token_id] if eos else [])
    return Sample(
        context_ids=encode(tok, context),
        token_ids=ids,
        text=completion,
        logprobs=[logprob] * len(ids),
        finish_reason=finish_reason,
        reward=reward,
    )


def two_turn_tree(tok) -> RolloutTree:
    """2 prompts; prompt 0 has 2 answers with 2 confidences each, prompt 1 one answer with 3."""
    prompts = []
    specs = [
        [(1.0, [0.96, 0.36]), (0.0, [1.0, 0.0])],
        [(1.0, [0.0, 0.75, 0.75])],
    ]
    for j, answers in enumerate(specs):
        prompt_text = f"Question {j}: make 3 from 1 and 2. Use <think> and <answer> tags."
        nodes = []
        for k, (acc, conf_rewards) in enumerate(answers):
            answer_text = f"<think> try {k} </think> <answer> 1 + 2 </answer>"
            answer = make_sample(tok, prompt_text, answer_text, reward=acc)
            turn2_context = prompt_text + answer_text + " How sure are you? Reply in <confidence>."
            confs = [
                make_sample(
                    tok,
                    turn2_context,
                    f"<analysis> ok </analysis> <confidence> 0.{h} </confidence>",
                    reward=r,
                )
                for h, r in enumerate(conf_rewards)
            ]
            nodes.append(AnswerNode(sample=answer, correct=bool(acc), confidences=confs))
        prompts.append(
            PromptNode(
                index=10 + j,
                data_source="countdown",
                ground_truth={"target": 3, "numbers": [1, 2]},
                answers=nodes,
            )
        )
    return RolloutTree(mode="two_turn", prompts=prompts)


# Turn-2 replies a model may sample, each with the text its stated value is read after
# (`calibrl.algo.stated_value.value_context_ids`): the reply up to its first <confidence>, or
# all of it with its analysis closed and a line break, then "<confidence>0.".
HOSTILE_REPLIES = [
    ("<analysis>ok</analysis>\n<confidence>0.4</confidence>",
     "<analysis>ok</analysis>\n<confidence>0."),
    ("<analysis>ok", "<analysis>ok</analysis>\n<confidence>0."),
    ("", "<confidence>0."),
    ("<confidence>1.0</confidence>", "<confidence>0."),
    ("<analysis>a</analysis><confidence><confidence>0.5", "<analysis>a</analysis><confidence>0."),
    ("<analysis>a<confidence>0.3<analysis>", "<analysis>a<confidence>0."),
    ("junk café \x00\x7f 12 + 5", "junk café \x00\x7f 12 + 5\n<confidence>0."),
    ("<analysis>a</analysis>\n", "<analysis>a</analysis>\n<confidence>0."),
    ("<analysis>x</analysis><analysis>y", "<analysis>x</analysis><analysis>y</analysis>\n"
                                          "<confidence>0."),
    ("I am sure. <confidence>high</confidence>", "I am sure. <confidence>0."),
    ("<confidence", "<confidence\n<confidence>0."),
]
