"""Multiple choice: the seeded shuffle (deterministic per row and seed, a permutation, the
correct letter following its choice), answers by letter or text, hostile answers, and
CommonsenseQA, GPQA and plain rows written locally in their public field names, converted and
round-tripped through the verl schema."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.protocol.completions import last_answer
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples, write_examples
from calibrl.tasks.multiple_choice import parse_choice, shuffle_choices, shuffled_order
from calibrl.tasks.multiple_choice.data import row_ground_truth

MC = get_task("multiple_choice")
GT = MC.check_ground_truth({"question": "Where do you keep a book?",
                            "choices": ["shelf ", "Library", "bag", "river", "bed"],
                            "answer": "b"})

CSQA = [
    {"id": "075e483d21c29a511267ef62bedc0461", "question": "The sanctions against the school "
     "were a punishing blow, and they seemed to what the efforts the school had made to change?",
     "question_concept": "punishing",
     "choices": {"label": ["A", "B", "C", "D", "E"],
                 "text": ["ignore", "enforce", "authoritarian", "yell at", "avoid"]},
     "answerKey": "A"},
    {"id": "61fe6e879ff18686d7552425a36344c8", "question": "Sammy wanted to go to where the "
     "people were.  Where might he go?", "question_concept": "people",
     "choices": {"label": ["A", "B", "C", "D", "E"],
                 "text": ["race track", "populated areas", "the desert", "apartment",
                          "roadblock"]},
     "answerKey": "B"},
]
GPQA = [
    {"Record ID": "rec1", "Question": "Two quantum states with energies E1 and E2 have a "
     "lifetime of 10^-9 sec and 10^-8 sec, respectively. Which energy difference lets us tell "
     "them apart?", "Correct Answer": "10^-4 eV\n", "Incorrect Answer 1": "10^-11 eV",
     "Incorrect Answer 2": "10^-8 eV\n", "Incorrect Answer 3": "10^-9 eV",
     "Writer's Difficulty Estimate": "Hard undergraduate level (could be a question on a hard "
     "undergraduate exam for students majoring in the subject)",
     "High-level domain": "Physics", "Subdomain": "Physics (general)"},
    {"Record ID": "rec2", "Question": "Which of these is a noble gas?", "Correct Answer": "Argon",
     "Incorrect Answer 1": "Nitrogen", "Incorrect Answer 2": "Oxygen",
     "Incorrect Answer 3": "Chlorine", "Writer's Difficulty Estimate": None,
     "High-level domain": "Chemistry"},
]
PLAIN = [  # MMLU's shape: the answer a 0-based index
    {"question": "What is 2 + 2?", "subject": "elementary_mathematics",
     "choices": ["3", "4", "5", "22"], "answer": 1},
    {"question": "Which is a mammal?", "choices": ["shark", "whale"], "answer": "B",
     "difficulty": "easy"},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --- the shuffle -------------------------------------------------------------------------------

@given(st.integers(1, 26), st.integers(0, 2**32), st.text(max_size=20))
def test_shuffled_order_is_a_deterministic_permutation(n, seed, key):
    order = shuffled_order(n, seed, key)
    assert sorted(order) == list(range(n))
    assert shuffled_order(n, seed, key) == order


@given(st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=8, unique=True),
       st.data(), st.integers(0, 1000))
def test_the_correct_letter_follows_its_choice(choices, data, seed):
    correct = data.draw(st.integers(0, len(choices) - 1))
    shown, at = shuffle_choices(choices, correct, seed, "row")
    assert shown[at] == choices[correct] and sorted(shown) == sorted(choices)


def test_the_shuffle_depends_on_seed_and_row_and_is_near_uniform():
    orders = {tuple(shuffled_order(4, seed, "q")) for seed in range(200)}
    assert len(orders) == 24  # every order of 4 turns up
    assert shuffled_order(5, 0, "q1") != shuffled_order(5, 0, "q2") or \
        shuffled_order(5, 0, "q3") != shuffled_order(5, 0, "q2")
    # Where the correct answer lands (GPQA's is always first before the shuffle): about even.
    landed = Counter(shuffled_order(4, 0, f"row {i}").index(0) for i in range(2000))
    assert all(430 < count < 570 for count in landed.values()) and len(landed) == 4


def hash_order(n, seed, key):
    """Fisher-Yates spelled out: step i swaps i with the SHA-256 draw of (seed, key, i)."""
    order = list(range(n))
    for i in reversed(range(1, n)):
        digest = hashlib.sha256(f"{seed}\x1f{key}\x1f{i}".encode()).digest()
        j = int.from_bytes(digest[:8], "big") % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def test_the_order_is_pinned_to_sha256_not_to_random():
    # `random.shuffle` may change between Python versions; a data set must not.
    assert all(shuffled_order(n, s, k) == hash_order(n, s, k)
               for n in (1, 2, 5, 26) for s in (0, 7) for k in ("", "pinned", "é"))
    assert shuffled_order(6, 7, "pinned") == [0, 1, 5, 3, 4, 2]


def test_row_order_depends_on_the_row_not_its_position(tmp_path):
    rows = GPQA + CSQA
    forward = MC.convert_file(write_jsonl(tmp_path / "f.jsonl", rows), test_size=0).train
    backward = MC.convert_file(write_jsonl(tmp_path / "b.jsonl", rows[::-1]), test_size=0).train
    assert [e.ground_truth for e in forward] == [e.ground_truth for e in backward][::-1]
    again = MC.convert_file(tmp_path / "f.jsonl", test_size=0).train
    assert [e.ground_truth for e in again] == [e.ground_truth for e in forward]


def test_seed_and_no_shuffle():
    orders = {tuple(row_ground_truth(GPQA[0], seed=s)["choices"]) for s in range(20)}
    assert len(orders) > 1
    kept = row_ground_truth(GPQA[0], shuffle=False)
    assert kept["choices"] == ["10^-4 eV", "10^-11 eV", "10^-8 eV", "10^-9 eV"]
    assert kept["answer"] == "A"
    for seed in range(20):
        truth = row_ground_truth(GPQA[0], seed=seed)
        assert truth["choices"][ord(truth["answer"]) - ord("A")] == "10^-4 eV"


# --- answers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", ["B", "(B)", "B)", "b", "B.", " (b). ", "Library",
                                    "  library ", "B) Library", "(B) library", "b. LIBRARY"])
def test_right_answers_by_letter_or_text(answer):
    assert MC.verify(f"<think>hm</think>\n<answer>{answer}</answer>", GT)
    assert MC.score(f"User: q Assistant: <answer>{answer}</answer>", GT) == 1.0


@pytest.mark.parametrize("answer", ["A", "(C)", "shelf", "F", "Z", "B) shelf", "A) Library",
                                    "Library or shelf", "BB", "B C", "1", "the library", ""])
def test_wrong_answers(answer):
    assert not MC.verify(f"<answer>{answer}</answer>", GT)
    assert MC.score(f"<answer>{answer}</answer>", GT) == MC.format_score


def test_parse_choice():
    choices = ["A. Lincoln", "Washington", "B"]
    assert parse_choice("A. Lincoln", choices) == 0  # a choice's own text before letter + text
    assert parse_choice("B", choices) == 1  # a lone letter is a letter
    assert parse_choice("C) B", choices) == 2 and parse_choice("(c)", choices) == 2
    assert parse_choice("D", choices) is None and parse_choice(None, choices) is None
    assert parse_choice("a) Washington", choices) is None  # letter and text disagree


HOSTILE = [
    "", "no block", "<answer></answer>", "<answer>" * 10_000, "</answer>" * 10_000,
    "<answer><answer>B</answer></answer>", "<answer>B</answer", "<answer>B)" + " " * 100_000,
    "<answer>" + "(" * 50_000 + "B</answer>", "<answer>" + "B) " * 300_000 + "</answer>",
    "<answer>" + "x" * 1_000_000 + "</answer>",
    "<answer>" + bytes(range(256)).decode("latin-1") + "\ud800\x00</answer>",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_answers_never_raise_and_score_nothing(text):
    start = time.monotonic()
    assert not MC.verify(text, GT)
    assert MC.score(text, GT) == (0.0 if last_answer(text) is None else MC.format_score)
    assert MC.extra_scores(text, GT) == {}
    assert time.monotonic() - start < 2.0


def test_non_text_and_broken_truth_never_raise():
    for junk in (None, 42, b"<answer>B</answer>"):
        assert not MC.verify(junk, GT)
    assert not MC.verify("<answer>B</answer>", {"choices": None, "answer": "B"})


def test_traces():
    example = TaskExample("multiple_choice", MC.make_prompt(GT), GT, 0)
    assert MC.verify(MC.reference_trace(example), GT)
    rng = random.Random(0)
    wrong = {MC.wrong_trace(example, rng) for _ in range(50)}
    assert len(wrong) == 4 and not any(MC.verify(t, GT) for t in wrong)


def test_prompt_shows_the_lettered_choices():
    content = MC.make_prompt(GT)[0]["content"]
    assert "\nA) shelf\nB) Library\nC) bag\nD) river\nE) bed\n" in content
    assert "<answer>A</answer>" in content
    assert MC.make_prompt(GT, "compact")[0]["content"] == (
        "Where do you keep a book?\nA) shelf\nB) Library\nC) bag\nD) river\nE) bed")
    assert set("ABCDE") <= set(MC.corpus_texts(random.Random(0)))


# --- public rows -------------------------------------------------------------------------------

def test_commonsense_qa_parquet_rows(tmp_path):
    path = tmp_path / "csqa.parquet"
    pq.write_table(pa.Table.from_pylist(CSQA), path)
    result = MC.convert_file(path, test_size=1)
    assert (result.rows_read, result.duplicates) == (2, 0)
    first, second = result.test[0].ground_truth, result.train[0].ground_truth
    assert sorted(first["choices"]) == sorted(CSQA[0]["choices"]["text"])
    assert first["choices"][ord(first["answer"]) - 65] == "ignore"
    assert second["choices"][ord(second["answer"]) - 65] == "populated areas"
    assert MC.verify("<answer>populated areas</answer>", second)
    assert MC.difficulty(first) == "5 choices"
    assert result.train[0].ability == "qa" and result.train[0].data_source == "multiple_choice"


def test_gpqa_rows_group_by_the_writers_estimate(tmp_path):
    result = MC.convert_file(write_jsonl(tmp_path / "gpqa.jsonl", GPQA), test_size=0)
    physics, chemistry = (e.ground_truth for e in result.train)
    assert MC.difficulty(physics) == "Hard undergraduate level"
    assert MC.difficulty(chemistry) == "4 choices"  # no estimate
    assert "10^-4 eV" in physics["choices"]  # stripped of GPQA's trailing line breaks
    assert MC.verify("<answer>10^-4 eV</answer>", physics)
    assert MC.verify(f"<answer>({physics['answer'].lower()})</answer>", physics)


def test_plain_rows_with_index_or_letter(tmp_path):
    path = tmp_path / "mmlu.json"
    path.write_text(json.dumps(PLAIN), encoding="utf-8")
    four, mammal = (e.ground_truth for e in
                    MC.convert_file(path, test_size=0).train)
    assert four["choices"][ord(four["answer"]) - 65] == "4"
    assert mammal["choices"][ord(mammal["answer"]) - 65] == "whale"
    assert MC.difficulty(mammal) == "easy"


def test_a_shuffled_duplicate_is_dropped(tmp_path):
    again = {**CSQA[0], "choices": {"label": list("ABCDE"),
                                    "text": ["avoid", "enforce", "authoritarian", "yell at",
                                             "ignore"]}, "answerKey": "E"}
    result = MC.convert_file(write_jsonl(tmp_path / "d.jsonl", [CSQA[0], again]), test_size=0)
    assert (len(result.train), result.duplicates) == (1, 1)


def test_conversions_round_trip_through_the_verl_schema(tmp_path):
    examples = []
    for name, rows in (("c", CSQA), ("g", GPQA), ("p", PLAIN)):
        examples += MC.convert_file(write_jsonl(tmp_path / f"{name}.jsonl", rows),
                                    test_size=0).train
    examples = [TaskExample(e.data_source, e.messages, e.ground_truth, i, e.split, e.extra,
                            e.ability) for i, e in enumerate(examples)]
    path = write_examples(tmp_path / "out.parquet", examples)
    assert pq.read_schema(path) == MC.arrow_schema()
    assert load_examples(path) == examples
    row = pq.read_table(path).to_pylist()[0]
    assert set(row["reward_model"]["ground_truth"]) == {"question", "choices", "answer",
                                                         "difficulty"}
    assert row["extra_info"]["solution"] == row["reward_model"]["ground_truth"]["answer"]


@pytest.mark.parametrize(("row", "message"), [
    ({**CSQA[0], "answerKey": ""}, "unlabelled test split"),
    ({**CSQA[0], "choices": {"label": ["A"], "text": ["x", "y"]}}, "of one length"),
    ({"question": "q", "choices": ["x"], "answer": 0}, "1 choices, expected 2 to 26"),
    ({"question": "q", "choices": ["x", "X "], "answer": 0}, "is given twice"),
    ({"question": "q", "choices": ["x", ""], "answer": 0}, "not a non-empty string"),
    ({"question": "q", "choices": ["x", "y"], "answer": 2}, "answer is 'C'"),
    ({"question": "q", "choices": ["x", "y"], "answer": -1}, "answer is '-1'"),
    ({"question": "q", "choices": ["x", "y"]}, "missing 'answer'"),
    ({"question": "q", "choices": [f"c{i}" for i in range(30)], "answer": 28}, "30 choices"),
    ({**GPQA[0], "Correct Answer": None}, "not a non-empty string"),
    ({"question": "q", "answer": "A"}, "expected a CommonsenseQA"),
    ({"question": "", "choices": ["x", "y"], "answer": 0}, "non-empty string"),
])
def test_malformed_rows_name_the_row(tmp_path, row, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [PLAIN[0], row])
    with pytest.raises(UserError, match=f"bad.jsonl row 1: .*{message}"):
        MC.convert_file(path)


def test_ground_truth_checks():
    assert MC.check_ground_truth(GT) == GT  # normalising twice changes nothing
    with pytest.raises(UserError, match="one of the letters A..B"):
        MC.check_ground_truth({"question": "q", "choices": ["x", "y"], "answer": "C"})
    with pytest.raises(UserError, match="ground_truth has no 'choices'"):
        MC.check_ground_truth({"question": "q", "answer": "A"})
