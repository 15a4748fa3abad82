"""SFT conversations: formats per kind, wrong traces, uninformative confidences, exclusion."""

from __future__ import annotations

import functools
import random
import re
from collections import Counter

import pytest

from calibrl.data.example import TaskExample
from calibrl.errors import UserError
from calibrl.protocol.completions import EARLY_ANSWER_TEXT, answer_part, trace_parts
from calibrl.protocol.modes import get_mode
from calibrl.protocol.prompts import CONFIDENCE_QUESTION, confidence_messages
from calibrl.protocol.reanswer import reanswers_in
from calibrl.rewards import parse_confidence, rlcr_format_ok
from calibrl.settings.sft import SFTMix, parse_mix
from calibrl.tasks import get_task
from calibrl.tasks.countdown import verify_equation_strict
from calibrl.tasks.countdown.data import examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.tasks.countdown.traces import trace_steps, wrong_trace
from calibrl.training.sft_data import (
    CONFIDENCE_GRID,
    build_conversations,
    exclude_problems,
    reference_trace,
)

TRACE = re.compile(r"<think>\n(.*)\n</think>\n<answer>(.+)</answer>", re.S)
CONFIDENCE_REPLY = re.compile(r"<analysis>(.+)</analysis>\n<confidence>(.+)</confidence>")


@functools.cache
def problems(n: int = 120) -> list[TaskExample]:
    train, _ = generate_countdown(n, num_numbers=(3, 4), max_number=20, seed=1, test_size=0)
    return examples_from_instances(train, "train")


def verifies(text: str, ex: TaskExample) -> bool:
    gt = ex.ground_truth
    return verify_equation_strict(answer_part(text), gt["target"], gt["numbers"])


def test_trace_steps_match_the_solver_steps():
    for ex in problems():
        assert trace_steps(ex.extra["solution"]) == list(ex.extra["steps"])
    assert trace_steps("6 / 4 * 2") == ["6 / 4 = 3/2", "(3/2) * 2 = 3"]
    assert trace_steps("2 - 5 * 3") == ["5 * 3 = 15", "2 - 15 = -13"]
    assert trace_steps("1 / (2 - 2)") is None
    assert trace_steps("2 ** 3") is None and trace_steps("2 +") is None


def test_wrong_traces_fail_the_verifier_and_agree_with_their_steps():
    rng = random.Random(0)
    for ex in problems():
        text = wrong_trace(ex.extra["solution"], ex.ground_truth, rng)
        assert text is not None
        think, equation = TRACE.fullmatch(text).groups()
        assert not verifies(text, ex)
        assert think.split("\n") == trace_steps(equation)


def test_each_kind_has_its_format_and_the_prompts_of_its_mode():
    rng = random.Random(0)
    seen = Counter()
    for conv in build_conversations(problems(), SFTMix(), rng):
        ex = next(e for e in problems() if e.index == conv.index)
        *context, last = conv.messages
        assert last["role"] == "assistant"
        seen[conv.kind] += 1
        if conv.kind == "answer":
            assert context == get_mode("two_turn").answer_prompt(ex.messages)
            assert TRACE.fullmatch(last["content"]) and verifies(last["content"], ex)
            assert conv.confidence is None
        elif conv.kind == "confidence":
            answer = context[-2]["content"]
            assert context == confidence_messages(ex.messages, answer, CONFIDENCE_QUESTION)
            assert TRACE.fullmatch(answer)
            assert verifies(answer, ex) == conv.context_correct
            analysis, value = CONFIDENCE_REPLY.fullmatch(last["content"]).groups()
            assert analysis in get_task("countdown").neutral_analyses
            assert parse_confidence(last["content"]) == conv.confidence == float(value)
        else:
            assert context == get_mode("rlcr").answer_prompt(ex.messages)
            assert rlcr_format_ok(last["content"]) and verifies(last["content"], ex)
            trace, _, reply = last["content"].partition("\n<analysis>")
            assert TRACE.fullmatch(trace) and CONFIDENCE_REPLY.fullmatch("<analysis>" + reply)
            assert parse_confidence(last["content"]) == conv.confidence
        if conv.confidence is not None:
            assert conv.confidence in CONFIDENCE_GRID
    assert set(seen) == {"answer", "confidence", "rlcr"}


def test_confidence_conversations_ask_the_given_question():
    mix = SFTMix(answer=0, confidence=1, rlcr=0)
    convs = build_conversations(problems(), mix, random.Random(0), question="How sure?")
    assert convs and all(c.messages[-2] == {"role": "user", "content": "How sure?"}
                         for c in convs)


def test_confidence_targets_carry_no_information_about_correctness():
    mix = SFTMix(answer=0, confidence=1, rlcr=0, wrong_share=0.5)
    convs = [c for seed in range(30) for c in build_conversations(problems(), mix,
                                                                  random.Random(seed))]
    right = [c for c in convs if c.context_correct]
    wrong = [c for c in convs if c.context_correct is False]
    assert abs(len(right) - len(wrong)) < 0.1 * len(convs)
    grid_mean = sum(CONFIDENCE_GRID) / len(CONFIDENCE_GRID)
    for group in (right, wrong):
        mean = sum(c.confidence for c in group) / len(group)
        assert abs(mean - grid_mean) < 0.02
        assert {c.confidence for c in group} == set(CONFIDENCE_GRID)
        analyses = Counter(CONFIDENCE_REPLY.fullmatch(c.messages[-1]["content"]).group(1)
                           for c in group)
        assert set(analyses) == set(get_task("countdown").neutral_analyses)
        assert max(analyses.values()) / min(analyses.values()) < 1.25


def test_mix_shares_and_missing_solutions():
    only_answers = build_conversations(problems(), SFTMix(1, 0, 0), random.Random(0))
    assert {c.kind for c in only_answers} == {"answer"} and len(only_answers) == len(problems())
    counts = Counter(c.kind for seed in range(10)
                     for c in build_conversations(problems(), SFTMix(), random.Random(seed)))
    total = sum(counts.values())
    assert abs(counts["answer"] / total - 0.5) < 0.05
    assert abs(counts["rlcr"] / total - 0.25) < 0.05
    unsolved = TaskExample("countdown", problems()[0].messages, problems()[0].ground_truth, 7)
    assert reference_trace(unsolved) is None
    assert build_conversations([unsolved], SFTMix(), random.Random(0)) == []


def test_early_answers_cut_the_reference_trace_and_train_only_the_answer():
    keeps = Counter()
    for seed in range(5):
        for conv in build_conversations(problems(), SFTMix(0, 0, 0, early=1), random.Random(seed)):
            ex = next(e for e in problems() if e.index == conv.index)
            assert conv.kind == "early"
            assert conv.messages[:-1] == get_mode("two_turn").answer_prompt(ex.messages)
            content = conv.messages[-1]["content"]
            assert content.startswith(conv.reply_prefix)
            assert conv.reply_prefix.endswith(EARLY_ANSWER_TEXT) and verifies(content, ex)
            trace = reference_trace(ex)
            steps, answer = trace_parts(trace)
            kept = conv.reply_prefix[len("<think>"):-len(EARLY_ANSWER_TEXT)]
            n_words, keep = len("\n".join(steps).split()), len(kept.split())
            assert keep < n_words and trace.startswith("<think>" + kept)
            assert content[len(conv.reply_prefix):] == answer + "</answer>"
            keeps[keep] += 1
    assert set(keeps) == set(range(max(keeps) + 1))  # every cut, from no chain on


def test_parse_mix():
    assert parse_mix("answer=1, rlcr=0.5") == SFTMix(answer=1, confidence=0.25, rlcr=0.5)
    assert parse_mix("") == SFTMix()
    assert parse_mix("answer=0,confidence=0,rlcr=0,early=1").weights == (0, 0, 0, 1)
    for bad in ("answer", "answers=1", "rlcr=x", "answer=-1", "wrong_share=2",
                "answer=0,confidence=0,rlcr=0", "answer=nan", "early=-1"):
        with pytest.raises(UserError):
            parse_mix(bad)


def test_exclusion_drops_problems_with_the_same_sorted_numbers_and_target():
    train = problems()[:10]
    shuffled = []
    for ex in train[:3]:
        gt = {"target": ex.ground_truth["target"], "numbers": ex.ground_truth["numbers"][::-1]}
        shuffled.append(TaskExample("countdown", ex.messages, gt, 0, "test"))
    other = TaskExample("countdown", train[3].messages,
                        {"target": train[3].ground_truth["target"] + 1000,
                         "numbers": train[3].ground_truth["numbers"]}, 1, "test")
    kept, dropped = exclude_problems(train, shuffled + [other])
    assert dropped == 3 and kept == train[3:]
    assert exclude_problems(train, []) == (train, 0)


def test_the_confidence_grid_is_a_setting_of_probabilities():
    from pydantic import ValidationError

    from calibrl.settings.sft import SFTSection

    mix = SFTMix(answer=0, confidence=1, rlcr=0)
    grid = SFTSection(steps=1, confidence_grid=(0.0, 0.05, 1.0)).confidence_grid
    convs = build_conversations(problems(), mix, random.Random(0), grid=grid)
    assert {c.confidence for c in convs} == {0.0, 0.05, 1.0}
    assert {CONFIDENCE_REPLY.fullmatch(c.messages[-1]["content"]).group(2) for c in convs} == {
        "0", "0.05", "1"}
    assert SFTSection(steps=1).confidence_grid == CONFIDENCE_GRID
    for bad in ((), (1.5,), (float("nan"),)):
        with pytest.raises(ValidationError):
            SFTSection(steps=1, confidence_grid=bad)


def test_task_analysis_examines_the_context_answer_and_changes_nothing_else():
    mix = SFTMix(answer=0.2, confidence=0.6, rlcr=0.2, wrong_share=0.5)
    neutral = build_conversations(problems(), mix, random.Random(3))
    checked = build_conversations(problems(), mix, random.Random(3), analysis="task")
    assert [c.kind for c in neutral] == [c.kind for c in checked]
    flagged = Counter()
    for plain, check in zip(neutral, checked, strict=True):
        assert plain.messages[:-1] == check.messages[:-1]
        assert plain.confidence == check.confidence
        if check.kind not in ("confidence", "rlcr"):
            assert plain.messages == check.messages
            continue
        reply = check.messages[-1]["content"]
        analysis = re.search(r"<analysis>(.+)</analysis>", reply, re.S).group(1)
        context = check.messages[-3]["content"] if check.kind == "confidence" else reply
        equation = re.search(r"<answer>(.+?)</answer>", context).group(1)
        used = sorted(int(n) for n in re.findall(r"\d+", equation))
        ex = next(e for e in problems() if e.index == check.index)
        numbers_right = used == sorted(ex.ground_truth["numbers"])
        assert ("not" in analysis or "again" in analysis) is (not numbers_right)
        if check.kind == "confidence":
            flagged[(check.context_correct, numbers_right)] += 1
    # wrong contexts with right and with wrong numbers both occur; right ones are never flagged
    assert flagged[(False, True)] > 0 and flagged[(False, False)] > 0
    assert flagged[(True, False)] == 0


def test_a_tasks_neutral_analyses_speak_of_its_own_task():
    train, _ = get_task("short_answer").generate(40, seed=0, test_size=0)
    mix = SFTMix(answer=0, confidence=1, rlcr=0)
    convs = build_conversations(train, mix, random.Random(0))
    analyses = {CONFIDENCE_REPLY.fullmatch(c.messages[-1]["content"]).group(1) for c in convs}
    assert analyses and analyses <= set(get_task("short_answer").neutral_analyses)
    assert not analyses & set(get_task("countdown").neutral_analyses)
    assert not any("equation" in a or "number" in a for a in analyses)


def test_reanswer_analyses_recall_the_answer_and_some_contexts_are_decoys():
    train, _ = get_task("short_answer").generate(60, seed=0, test_size=0)
    task = get_task("short_answer")
    mix = SFTMix(answer=0, confidence=1, rlcr=0, wrong_share=0.5)
    convs = build_conversations(train, mix, random.Random(0), analysis="reanswer", reanswers=2)
    by_index = {ex.index: ex for ex in train}
    decoys = 0
    for conv in convs:
        ex = by_index[conv.index]
        truth = ex.ground_truth["answers"][0]
        analysis = CONFIDENCE_REPLY.fullmatch(conv.messages[-1]["content"]).group(1)
        assert reanswers_in(analysis) == [truth, truth]
        context = answer_part(conv.messages[-3]["content"])
        assert task.verify(context, ex.ground_truth) == conv.context_correct
        if not conv.context_correct:  # another question's real answer, never made up
            decoys += 1
            assert task.extract_answer(context) in {
                e.ground_truth["answers"][0] for e in train if e.index != ex.index}
    assert 0.3 * len(convs) < decoys < 0.7 * len(convs)
