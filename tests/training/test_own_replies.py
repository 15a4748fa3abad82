"""The format warm-up's rows: the model's own replies rewritten into answer tags."""

from __future__ import annotations

from calibrl.data.example import TaskExample
from calibrl.models import build_tokenizer
from calibrl.rollout.engine import Generation
from calibrl.tasks import get_task
from calibrl.training.own_replies import own_reply_rows, question_messages, rewrite_replies

QUESTIONS = {
    "What is the capital of Peru?": (["Lima"], "capital", "The capital of Peru is Lima."),
    "What is the capital of Mexico?": (["Mexico City"], "capital",
                                       "The capital of Mexico is Lima, I think."),
    "Which country is Osaka in?": (["Japan"], "city_country", "Osaka is a city."),
    "Which country is Lyon in?": (["France"], "city_country", "Lyon is in Japan."),
}


def _examples() -> list[TaskExample]:
    task = get_task("short_answer")
    return [TaskExample(data_source="short_answer",
                        messages=task.make_prompt({"question": q}),
                        ground_truth={"question": q, "answers": answers, "difficulty": kind},
                        index=i, split="train", extra={"fact_type": kind, "solution": answers[0]})
            for i, (q, (answers, kind, _)) in enumerate(QUESTIONS.items())]


def test_replies_become_rows_answering_what_the_model_said():
    examples = _examples()
    rows, counts = rewrite_replies(examples, [reply for *_, reply in QUESTIONS.values()])
    assert counts == {"named right": 1, "named wrong": 2, "named none": 1}
    by_question = {r.ground_truth["question"]: r for r in rows}
    assert set(by_question) == {"What is the capital of Peru?", "What is the capital of Mexico?",
                                "Which country is Lyon in?"}
    mexico = by_question["What is the capital of Mexico?"]
    assert mexico.ground_truth["answers"] == ["Lima"]  # its own (wrong) answer, not the fact
    assert mexico.extra["solution"] == "Lima"
    assert mexico.extra["own_reply"] == "The capital of Mexico is Lima, I think."
    assert mexico.messages == examples[1].messages  # asked in the task's own prompt
    assert by_question["Which country is Lyon in?"].ground_truth["answers"] == ["Japan"]
    # Values only other questions ask about are named too when those questions are known.
    _, counts = rewrite_replies(examples[2:3], ["Osaka is in France."], known=examples[3:])
    assert counts == {"named wrong": 1}
    trace = get_task("short_answer").reference_trace(mexico)
    assert get_task("short_answer").check(trace, {"answers": ["Lima"]})


def test_with_think_the_reply_cut_after_its_value_is_the_think_step():
    examples = _examples()
    replies = [reply for *_, reply in QUESTIONS.values()]
    rows, counts = rewrite_replies(examples, replies, think=True)
    plain, plain_counts = rewrite_replies(examples, replies)
    assert counts == plain_counts
    assert [r.ground_truth for r in rows] == [r.ground_truth for r in plain]
    steps = {r.ground_truth["question"]: r.extra["steps"] for r in rows}
    assert steps["What is the capital of Mexico?"] == ["The capital of Mexico is Lima."]
    assert steps["Which country is Lyon in?"] == ["Lyon is in Japan."]
    task = get_task("short_answer")
    mexico = next(r for r in rows if "Mexico" in r.ground_truth["question"])
    trace = task.reference_trace(mexico)
    assert "The capital of Mexico is Lima." in trace and task.check(trace, {"answers": ["Lima"]})
    assert "Lima." not in task.reference_trace(plain[1])  # no think step without `think`


class _Replier:
    """Replies by the question in the prompt; records how it was asked."""

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, []

    def generate(self, prompts, params):
        self.seen.append(params)
        out = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            reply = next(r for q, (*_, r) in QUESTIONS.items() if q in text)
            out.append([Generation(token_ids=[1], text=reply, logprobs=[0.0],
                                   finish_reason="stop")])
        return out


def test_the_model_is_asked_the_question_alone_greedily():
    tokenizer = build_tokenizer()
    engine = _Replier(tokenizer)
    examples = _examples()
    rows, counts = own_reply_rows(engine, tokenizer, examples, max_new_tokens=20)
    assert sum(counts.values()) == len(examples) and len(rows) == 3
    (params,) = engine.seen
    assert params.temperature == 0.0 and params.max_new_tokens == 20
    assert question_messages(examples[0]) == [{"role": "user",
                                                "content": "What is the capital of Peru?"}]
