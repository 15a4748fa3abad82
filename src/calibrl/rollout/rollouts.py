"""Rollouts: sample a batch of problems in a mode's format, producing a rollout tree.

Turn 1 (every mode): G_a completions per prompt, with the mode's turn-1 prompt and stop strings
(`ModeSpec.answer_prompt`, `answer_stop`: RLVR and two-turn answers stop at `</answer>`, a
single-turn RLCR completion, which carries `RLCR_INSTRUCTION`, at `</confidence>`). Turn 2 (modes
with a confidence turn): for every answer the conversation prompt -> answer -> confidence
question, G_c confidence completions each, all answers batched in one engine call. Answers cut at
the length limit still get their confidence turn and are scored as they are.

Rollouts only generate; `calibrl.algo.scoring.score_tree` writes rewards afterwards.

`first_prompt`: the position of `examples[0]` in the whole batch when several processes each
roll out a shard of it; the random streams are numbered from there (turn 2: from its first
answer), so a shard's samples are those of the whole batch rolled out at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from calibrl.algo.rollout_tree import AnswerNode, PromptNode, RolloutTree, Sample
from calibrl.data import TaskExample
from calibrl.protocol.completions import answer_part
from calibrl.protocol.modes import get_mode
from calibrl.protocol.prompts import CONFIDENCE_QUESTION
from calibrl.protocol.reanswer import others_for_each, reanswer_prefill
from calibrl.rollout.engine import Engine, Generation, SamplingParams
from calibrl.tasks import get_task


@dataclass(frozen=True)
class RolloutSettings:
    """What a rollout samples (mirrors `calibrl.settings.sections.RolloutSection`; see its field help)."""

    num_generations_answer: int = 4
    num_generations_confidence: int = 2
    temperature: float = 1.0
    confidence_temperature: float | None = None  # turn 2's; None: `temperature`
    top_p: float = 1.0
    top_k: int = 0
    max_answer_tokens: int = 128
    max_confidence_tokens: int = 48
    confidence_question: str = CONFIDENCE_QUESTION
    max_prompt_tokens: int = 256
    chat_template: Literal["auto", "plain"] = "auto"
    reanswers_shown: int = 0  # turn 2 starts with this many of the prompt's other answers

    @classmethod
    def from_config(cls, rollout: Any, model: Any, data: Any) -> RolloutSettings:
        return cls(
            num_generations_answer=rollout.num_generations_answer,
            num_generations_confidence=rollout.num_generations_confidence,
            temperature=rollout.temperature, top_p=rollout.top_p, top_k=rollout.top_k,
            max_answer_tokens=rollout.max_answer_tokens,
            max_confidence_tokens=rollout.max_confidence_tokens,
            confidence_question=rollout.confidence_question,
            max_prompt_tokens=data.max_prompt_tokens, chat_template=model.chat_template,
            reanswers_shown=rollout.reanswers_shown,
        )

    def max_response_tokens(self, mode: str) -> int:
        """The longest completion a mode can produce (Dr. GRPO's constant normaliser)."""
        return get_mode(mode).max_response_tokens(self.max_answer_tokens,
                                                  self.max_confidence_tokens)

    def params(self, n: int, max_new_tokens: int, stop: tuple[str, ...], seed: int | None,
               first_stream: int = 0, temperature: float | None = None) -> SamplingParams:
        temperature = self.temperature if temperature is None else temperature
        return SamplingParams(n=n, temperature=temperature, top_p=self.top_p,
                              top_k=self.top_k, max_new_tokens=max_new_tokens, stop=stop,
                              seed=seed, first_stream=first_stream)


def plain_template(messages: Sequence[dict[str, str]]) -> str:
    """'System: ...\\nUser: ...\\nAssistant: ...' with an open assistant turn (base models)."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n".join(lines) + "\nAssistant:"


def encode_messages(tokenizer: Any, messages: Sequence[dict[str, str]],
                    chat_template: str = "auto", max_tokens: int | None = None) -> list[int]:
    """Token ids of `messages` with an open assistant turn, left-truncated to `max_tokens`."""
    if chat_template == "auto" and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                            tokenize=True, return_dict=False)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # some versions return an encoding
            ids = ids["input_ids"]
    else:
        ids = tokenizer(plain_template(messages), add_special_tokens=True)["input_ids"]
    ids = [int(i) for i in ids]
    return ids if max_tokens is None else ids[-max_tokens:]


def _sample(context: list[int], gen: Generation) -> Sample:
    return Sample(context_ids=context, token_ids=list(gen.token_ids), text=gen.text,
                  logprobs=list(gen.logprobs), finish_reason=gen.finish_reason)


def _seed(seed: int | None, turn: int) -> int | None:
    return None if seed is None else seed * 2 + turn


def sample_answers(engine: Engine, tokenizer: Any, examples: Sequence[TaskExample],
                   settings: RolloutSettings, mode: str, seed: int | None = None,
                   first_prompt: int = 0) -> RolloutTree:
    """Turn 1 for every mode: G_a completions per prompt, as an unscored tree."""
    spec = get_mode(mode)
    contexts = [encode_messages(tokenizer, spec.answer_prompt(ex.messages),
                                settings.chat_template, settings.max_prompt_tokens)
                for ex in examples]
    params = settings.params(
        settings.num_generations_answer,
        spec.answer_token_budget(settings.max_answer_tokens, settings.max_confidence_tokens),
        spec.answer_stop,
        _seed(seed, 0),
        first_prompt,
    )
    generations = engine.generate(contexts, params)
    tree = RolloutTree(mode=spec.name)
    for ex, context, gens in zip(examples, contexts, generations, strict=True):
        tree.prompts.append(PromptNode(index=ex.index, data_source=ex.data_source,
                                       ground_truth=ex.ground_truth,
                                       answers=[AnswerNode(_sample(context, g)) for g in gens]))
    return tree


def sample_confidences(engine: Engine, tokenizer: Any, tree: RolloutTree,
                       examples: Sequence[TaskExample], settings: RolloutSettings,
                       n: int | None = None, seed: int | None = None, first_answer: int = 0
                       ) -> RolloutTree:
    """Turn 2: for every answer, `n` (default G_c) confidence completions, in one engine call.

    The tree's mode must have a confidence turn (`ModeSpec.has_confidence_turn`); `first_answer`
    numbers the random streams (see the module docstring)."""
    spec = tree.spec
    if spec.confidence_prompt is None:
        raise ValueError(f"mode {spec.name!r} has no confidence turn")
    answers, contexts = [], []
    for ex, prompt in zip(examples, tree.prompts, strict=True):
        for answer, prefill in zip(prompt.answers, _prefills(tokenizer, prompt, settings),
                                   strict=True):
            messages = spec.confidence_prompt(ex.messages, answer.sample.text,
                                              settings.confidence_question)
            answers.append(answer)
            # Not truncated: the turn-1 prompt is already bounded and the answer is too.
            contexts.append(encode_messages(tokenizer, messages, settings.chat_template)
                            + prefill)
    params = settings.params(n or settings.num_generations_confidence,
                             settings.max_confidence_tokens, spec.confidence_stop,
                             _seed(seed, 1), first_answer, settings.confidence_temperature)
    for answer, context, gens in zip(answers, contexts, engine.generate(contexts, params),
                                     strict=True):
        answer.confidences = [_sample(context, g) for g in gens]
    return tree


def _prefills(tokenizer: Any, prompt: PromptNode, settings: RolloutSettings
              ) -> list[list[int]]:
    """Per answer of `prompt`, the token ids the rollout writes at the start of its turn-2
    reply: none, or an analysis of `settings.reanswers_shown` of the prompt's other answers
    (`calibrl.protocol.reanswer`). They end the context, so they are never trained on."""
    if not settings.reanswers_shown:
        return [[] for _ in prompt.answers]
    return [tokenizer.encode(reanswer_prefill(others), add_special_tokens=False)
            for others in others_for_each(answer_keys(prompt), settings.reanswers_shown)]


def answer_keys(prompt: PromptNode) -> list[str | None]:
    """What the prompt's task extracts from each of its answers, stripped (None: nothing): the
    keys re-answers show and agreement compares."""
    task = get_task(prompt.data_source)
    keys = [task.extract_answer(answer_part(a.sample.text)) for a in prompt.answers]
    return [None if k is None else str(k).strip() for k in keys]


def run_rollout(engine: Engine, tokenizer: Any, examples: Sequence[TaskExample],
                settings: RolloutSettings, mode: str, seed: int | None = None,
                first_prompt: int = 0) -> RolloutTree:
    """A whole rollout of `mode`: turn 1, then turn 2 if the mode has one. Unscored."""
    tree = sample_answers(engine, tokenizer, examples, settings, mode, seed, first_prompt)
    if tree.spec.has_confidence_turn:
        sample_confidences(engine, tokenizer, tree, examples, settings, seed=seed,
                           first_answer=first_prompt * settings.num_generations_answer)
    return tree
