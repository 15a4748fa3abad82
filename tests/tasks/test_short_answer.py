"""Short answer: SQuAD's normalisation, exact match and token F1 against slow references and
SQuAD's own examples; the verifier on hostile text; TriviaQA, HotpotQA and plain rows written
locally in their public field names, converted and round-tripped through the verl schema."""

from __future__ import annotations

import json
import string
import time
import unicodedata

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples, write_examples
from calibrl.tasks.short_answer import exact_match, max_token_f1, normalize_answer, token_f1

SA = get_task("short_answer")
GT = SA.check_ground_truth({"question": "Which team won Super Bowl 50?",
                            "answers": ["Denver Broncos", "The Broncos"]})

# Text that exercises every rule: articles inside and across words, punctuation between them,
# every kind of space, letters whose lower case is special, and accents to fold: precomposed,
# as a combining mark, in a ligature, full width, and a letter that does not decompose.
ANSWER_TEXT = st.text(alphabet=st.sampled_from(
    list("aAnNtThHeEs _-'.,!?\t\n\u00a0\u3000") +
    ["ß", "İ", "Σ", "é", "É", "\u0301", "ﬁ", "Ｔ", "ℌ", "’", "«", "ø", "1", "x"]), max_size=40)


def slow_fold(text: str) -> str:
    """Accents folded by hand: unless the text is ASCII, each character of its decomposition
    that is a combining mark or punctuation of the Basic Multilingual Plane is left out."""
    if all(ord(ch) < 128 for ch in text):
        return text
    kept = ""
    for ch in unicodedata.normalize("NFKD", text):
        category = unicodedata.category(ch)
        if 0x80 <= ord(ch) <= 0xFFFF and (category == "Mn" or category[0] == "P"):
            continue
        kept += ch
    return kept


def slow_normalize(text: str) -> str:
    """SQuAD's normalisation written out by hand, accents folded first: lower case, fold, lower
    case again, drop each punctuation mark, cut the text into word-character runs and others,
    blank the runs that are articles, collapse spaces."""
    folded = slow_fold(text.lower()).lower()
    kept = "".join(ch for ch in folded if ch not in string.punctuation)
    pieces, run = [], ""
    for ch in kept:
        if ch.isalnum() or ch == "_":
            run += ch
            continue
        pieces += [run, ch] if run else [ch]
        run = ""
    pieces += [run] if run else []
    blanked = "".join(" " if piece in ("a", "an", "the") else piece for piece in pieces)
    words, word = [], ""
    for ch in blanked:
        if ch.isspace():
            words += [word] if word else []
            word = ""
        else:
            word += ch
    words += [word] if word else []
    return " ".join(words)


def slow_f1(prediction: str, truth: str) -> float:
    """Token F1 counting shared words by crossing each one off a copy of the truth's words."""
    predicted, left = slow_normalize(prediction).split(), slow_normalize(truth).split()
    shared = 0
    for word in predicted:
        if word in left:
            left.remove(word)
            shared += 1
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(slow_normalize(truth).split())
    return 2 * precision * recall / (precision + recall)


@given(ANSWER_TEXT)
def test_normalisation_matches_the_slow_reference_and_is_idempotent(text):
    assert normalize_answer(text) == slow_normalize(text)
    assert normalize_answer(normalize_answer(text)) == normalize_answer(text)


@given(ANSWER_TEXT, ANSWER_TEXT)
def test_f1_matches_the_slow_reference(prediction, truth):
    assert token_f1(prediction, truth) == pytest.approx(slow_f1(prediction, truth))
    assert token_f1(prediction, truth) == pytest.approx(token_f1(truth, prediction))


@pytest.mark.parametrize(("text", "normalised"), [
    ("The Denver Broncos", "denver broncos"),
    ("Denver Broncos!", "denver broncos"),
    ("  an  apple a day ", "apple day"),
    ("theatre", "theatre"),  # articles only as whole words
    ("the-end", "theend"),  # punctuation goes first, so no word boundary is left
    ("A. Lincoln", "lincoln"),
    ("Levi's Stadium", "levis stadium"),
    ("", ""),
    # accents folded (a departure from SQuAD, which keeps them)
    ("Brasília", "brasilia"),
    ("São Tomé", "sao tome"),
    ("Xi’an", "xian"),  # punctuation beyond ASCII goes too
    ("İstanbul", "istanbul"),
    ("Ｐａｒｉｓ", "paris"),  # full width
    ("Łódź", "łodz"),  # "ł" does not decompose
])
def test_normalisation_examples(text, normalised):
    assert normalize_answer(text) == normalised


@pytest.mark.parametrize(("prediction", "truth", "f1"), [
    ("Denver Broncos", "the Denver Broncos!", 1.0),
    ("Denver", "Denver Broncos", 2 / 3),  # precision 1, recall 1/2
    ("the Broncos of Denver", "Denver Broncos", 0.8),  # precision 2/3, recall 1
    # SQuAD dev, Super Bowl 50's venue: 11 predicted words, the 3 true ones among them.
    ("Levi's Stadium in the San Francisco Bay Area at Santa Clara, California",
     "Santa Clara, California", 3 / 7),  # precision 3/11, recall 1
    ("Carolina Panthers", "Denver Broncos", 0.0),
    ("", "Denver Broncos", 0.0),
    ("the", "The", 0.0),  # both empty once normalised: nothing shared, as in SQuAD v1.1
    ("broncos broncos", "broncos", 2 / 3),  # repeats count: precision 1/2, recall 1
])
def test_f1_examples(prediction, truth, f1):
    assert token_f1(prediction, truth) == pytest.approx(f1)


def test_best_over_accepted_answers():
    assert max_token_f1("Denver", ["Carolina Panthers", "Denver Broncos"]) == pytest.approx(2 / 3)
    assert max_token_f1("Denver", []) == 0.0
    assert exact_match("the  denver broncos.", ["Carolina", "Denver Broncos"])
    assert not exact_match("Denver", ["Denver Broncos"])
    assert not exact_match("", [""]) and not exact_match("The", ["a"])  # saying nothing is wrong


def test_an_answer_without_its_accents_is_right():
    gt = SA.check_ground_truth({"question": "What is the capital of Brazil?",
                                "answers": ["Brasília"]})
    assert SA.verify("<answer>Brasilia</answer>", gt)
    assert SA.verify("<answer>BRASÍLIA</answer>", gt)
    assert not SA.verify("<answer>Brasil</answer>", gt)
    # An accepted answer that differs from an earlier one only by accents adds nothing.
    assert SA.check_ground_truth({"question": "q", "answers": ["Bogotá", "Bogota"]}
                                 )["answers"] == ["Bogotá"]


def test_verify_score_and_f1_through_the_task():
    right, partial = "<think>x</think>\n<answer>the Broncos.</answer>", "<answer>Denver</answer>"
    assert SA.verify(right, GT) and SA.score("User: q Assistant: " + right, GT) == 1.0
    assert not SA.verify(partial, GT) and SA.score(partial, GT) == SA.format_score
    assert SA.extra_scores(right, GT) == {"token_f1": 1.0, "lenient_accuracy": 1.0}
    assert SA.extra_scores(partial, GT)["token_f1"] == pytest.approx(2 / 3)
    assert SA.extra_scores("no answer block", GT) == {"token_f1": 0.0, "lenient_accuracy": 0.0}
    # The lenient reading: an accepted answer named in a sentence, without the tags.
    assert SA.extra_scores("It was the Denver Broncos.", GT)["lenient_accuracy"] == 1.0
    assert SA.extra_scores(partial, GT)["lenient_accuracy"] == 0.0
    # A prompt that names the tags is not the model's answer.
    prompt = SA.make_prompt(GT)[0]["content"]
    assert "<answer>Paris</answer>" in prompt
    assert SA.score(f"User: {prompt} Assistant: I do not know", GT) == 0.0
    assert SA.difficulty(GT) == "all"


HOSTILE = [
    "", "<answer></answer>", "<answer>   </answer>", "<answer>the a an</answer>",
    "<answer>?!.,;</answer>", "<answer>" * 10_000, "</answer>" * 10_000,
    "<answer>Denver Broncos</answer", "<answer>" + "x" * 1_000_000 + "</answer>",
    "<answer>" + "the " * 250_000 + "</answer>",
    "<answer>" + bytes(range(256)).decode("latin-1") + "\ud800\x00</answer>",
    "<answer>" + "Denver Broncos " * 50_000 + "</answer>",
    "<answer>" + "é" * 1_000_000 + "</answer>",  # a megabyte of accents to fold
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_answers_never_raise_and_score_nothing(text):
    start = time.monotonic()
    assert not SA.verify(text, GT)
    assert SA.score(text, GT) in (0.0, SA.format_score)
    assert SA.extra_scores(text, GT)["token_f1"] < 1e-3  # a long repeat shares only a sliver
    assert time.monotonic() - start < 2.0


def test_nested_tags_are_read_as_the_last_block_says():
    # The last block runs from the inner <answer> to the outer </answer>: its text carries the
    # tag's letters, so it is not the answer, though "denver" earns partial credit.
    nested = "<answer><answer>Denver Broncos</answer></answer>"
    assert not SA.verify(nested, GT) and SA.score(nested, GT) == SA.format_score
    assert SA.extra_scores(nested, GT)["token_f1"] == pytest.approx(0.5)


def test_non_text_never_raises():
    for junk in (None, 42, b"<answer>Denver Broncos</answer>", ["<answer>x</answer>"]):
        assert not SA.verify(junk, GT)
        assert SA.extra_scores(junk, GT) == {"token_f1": 0.0, "lenient_accuracy": 0.0}
    assert SA.extra_scores("<answer>x</answer>", {"answers": None}) == {"token_f1": 0.0,
                                                                        "lenient_accuracy": 0.0}


# --- public rows -------------------------------------------------------------------------------

TRIVIAQA = [
    {"question": "Which Lloyd Webber musical premiered in the US on 10th December 1993?",
     "question_id": "tc_33", "question_source": "http://www.triviacountry.com/",
     "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
     "answer": {"aliases": ["Sunset Blvd", "West Sunset Boulevard", "Sunset Boulevard"],
                "normalized_aliases": ["sunset boulevard", "sunset blvd",
                                       "west sunset boulevard"],
                "matched_wiki_entity_name": "", "normalized_matched_wiki_entity_name": "",
                "normalized_value": "sunset boulevard", "type": "WikipediaEntity",
                "value": "Sunset Boulevard"}},
    {"question": "Who was the man behind The Chipmunks?", "question_id": "tc_40",
     "answer": {"aliases": ["David Seville"], "normalized_aliases": ["david seville"],
                "value": "David Seville", "type": "WikipediaEntity"}},
]
HOTPOTQA = [
    {"id": "5a8b57f25542995d1e6f1371", "question": "Were Scott Derrickson and Ed Wood of the "
     "same nationality?", "answer": "yes", "type": "comparison", "level": "hard",
     "supporting_facts": {"title": ["Scott Derrickson"], "sent_id": [0]}},
    {"id": "5a8c7595554299585d9e36b6", "question": "What government position was held by the "
     "woman who portrayed Corliss Archer in the film Kiss and Tell?", "answer": "Chief of "
     "Protocol", "type": "bridge", "level": "medium"},
    {"id": "x1", "question": "Were Scott  Derrickson and Ed Wood of the same nationality?",
     "answer": "yes", "type": "comparison", "level": "hard"},  # the first, spaced otherwise
    {"id": "x2", "question": "Which country is Ed Wood from?", "answer": "the United States",
     "type": "bridge", "level": "easy"},
]
PLAIN = [
    {"question": "What is the capital of France?", "answers": ["Paris", "paris", "City of Paris"]},
    {"question": "Who wrote Hamlet?", "answers": "William Shakespeare", "difficulty": "easy"},
    {"question": "Where is the Eiffel Tower?", "answers": {"text": ["Paris", "in Paris"],
                                                           "answer_start": [0, 0]}},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_triviaqa_rows_accept_every_alias(tmp_path):
    result = SA.convert_file(write_jsonl(tmp_path / "trivia.jsonl", TRIVIAQA), test_size=0)
    first = result.train[0].ground_truth
    # value first (the reference answer), then the aliases; repeats up to normalisation dropped
    assert first["answers"] == ["Sunset Boulevard", "Sunset Blvd", "West Sunset Boulevard"]
    assert first["difficulty"] is None and SA.difficulty(first) == "all"
    for alias in ("sunset blvd", "SUNSET BOULEVARD!", "West Sunset Boulevard"):
        assert SA.verify(f"<answer>{alias}</answer>", first)
    assert not SA.verify("<answer>Sunset</answer>", first)
    assert SA.verify(SA.reference_trace(result.train[1]), result.train[1].ground_truth)
    assert SA.wrong_trace(result.train[1], None) is None  # no plausible wrong answer to hand


def test_hotpotqa_parquet_rows_group_by_level(tmp_path):
    path = tmp_path / "hotpot.parquet"
    pq.write_table(pa.Table.from_pylist(HOTPOTQA), path)
    result = SA.convert_file(path, test_size=1)
    assert (result.rows_read, result.duplicates, result.unsolvable) == (4, 1, 0)
    examples = result.test + result.train
    assert [SA.difficulty(e.ground_truth) for e in examples] == ["hard", "medium", "easy"]
    assert [e.ground_truth["answers"] for e in examples] == [
        ["yes"], ["Chief of Protocol"], ["the United States"]]
    assert SA.verify("<answer>United States</answer>", examples[2].ground_truth)
    assert all(e.data_source == "short_answer" and e.ability == "qa" for e in examples)
    assert examples[0].messages[0]["content"].startswith("Were Scott Derrickson")


def test_plain_rows_and_simpleqa_rows(tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(PLAIN), encoding="utf-8")
    result = SA.convert_file(path, test_size=0)
    assert [e.ground_truth["answers"] for e in result.train] == [
        ["Paris", "City of Paris"], ["William Shakespeare"], ["Paris", "in Paris"]]
    assert SA.difficulty(result.train[1].ground_truth) == "easy"
    simpleqa = write_jsonl(tmp_path / "simple.jsonl", [
        {"metadata": "{'topic': 'Art'}", "problem": "Who received the IEEE Frank Rosenblatt "
         "Award in 2010?", "answer": "Michio Sugeno"}])
    (example,) = SA.convert_file(simpleqa, test_size=0).train
    assert example.ground_truth["answers"] == ["Michio Sugeno"]


def test_conversions_round_trip_through_the_verl_schema(tmp_path):
    examples = []
    for name, rows in (("t", TRIVIAQA), ("h", HOTPOTQA), ("p", PLAIN)):
        examples += SA.convert_file(write_jsonl(tmp_path / f"{name}.jsonl", rows),
                                    test_size=0).train
    examples = [TaskExample(e.data_source, e.messages, e.ground_truth, i, e.split, e.extra,
                            e.ability) for i, e in enumerate(examples)]
    path = write_examples(tmp_path / "out.parquet", examples)
    assert pq.read_schema(path) == SA.arrow_schema()
    assert load_examples(path) == examples
    row = pq.read_table(path).to_pylist()[0]
    assert row["reward_model"]["ground_truth"] == {
        "question": TRIVIAQA[0]["question"], "difficulty": None,
        "answers": ["Sunset Boulevard", "Sunset Blvd", "West Sunset Boulevard"]}
    assert row["extra_info"]["solution"] == "Sunset Boulevard"  # what `calibrl sft` looks for
    assert write_examples(tmp_path / "again.parquet", load_examples(path)).read_bytes() == \
        path.read_bytes()


@pytest.mark.parametrize(("row", "message"), [
    ({"answer": "yes"}, "missing 'question'"),
    ({"question": "q"}, "missing 'answer'"),
    ({"question": "q", "answer": {"type": "x"}}, "expected TriviaQA"),
    ({"question": "q", "answers": ["the", "?"]}, "no usable answer"),
    ({"question": "q", "answers": [3]}, "is not a string"),
    ({"question": " ", "answers": ["x"]}, "non-empty string"),
    ({"question": "q", "answers": ["x"], "level": 2.5}, "difficulty is 2.5"),
    ([1, 2], "expected an object"),
])
def test_malformed_rows_name_the_row(tmp_path, row, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [PLAIN[0], row])
    with pytest.raises(UserError, match=f"bad.jsonl row 1: .*{message}"):
        SA.convert_file(path)


def test_file_level_errors(tmp_path):
    with pytest.raises(UserError, match="fewer than n=5"):
        SA.convert_file(write_jsonl(tmp_path / "p.jsonl", PLAIN), n=5)
    with pytest.raises(UserError, match="no such file"):
        SA.convert_file(tmp_path / "missing.jsonl")
    with pytest.raises(UserError, match="ground_truth has no 'answers'"):
        SA.check_ground_truth({"question": "q"})


def test_prompt_styles_and_corpus():
    assert SA.make_prompt(GT, "compact") == [{"role": "user", "content": GT["question"]}]
    with pytest.raises(UserError, match="unknown prompt style"):
        SA.make_prompt(GT, "shout")
    assert any("<answer>" in text for text in SA.corpus_texts(None))
