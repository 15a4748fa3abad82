"""`Task.readout_cluster`: what the readout reference keeps in one fold. The facts task's four
questions about one made-up country form one cluster; every other task's default is the
problem (`problem_key`), Countdown's included."""

from __future__ import annotations

from collections import defaultdict

from calibrl.algo.self_estimates import cluster_folds as fold_of
from calibrl.tasks import get_task
from calibrl.tasks.short_answer.facts import ATTRIBUTES, country_of, generate_facts

SHORT_ANSWER = get_task("short_answer")
COUNTDOWN = get_task("countdown")


def _facts_rows(n: int = 200):
    train, test = SHORT_ANSWER.generate(n, seed=1, test_size=40)
    return [ex.ground_truth for ex in test + train]


def test_a_generated_country_is_one_cluster_of_its_four_questions():
    train, test = generate_facts(80, seed=0, test_size=20)
    clusters = defaultdict(set)
    for fact in test + train:
        gt = {"question": fact.question, "answers": [fact.answer], "difficulty": fact.group}
        clusters[SHORT_ANSWER.readout_cluster(gt)].add(fact.question)
        assert country_of(fact.question) == fact.country
    assert len(clusters) == 20 and all(len(q) == len(ATTRIBUTES) for q in clusters.values())


def test_a_country_is_never_in_two_readout_folds():
    rows = _facts_rows()
    clusters = [str(SHORT_ANSWER.readout_cluster(gt)) for gt in rows]
    folds = defaultdict(set)
    for gt, fold in zip(rows, fold_of(clusters), strict=True):
        folds[country_of(gt["question"])].add(int(fold))
    assert len(folds) == 50 and all(len(f) == 1 for f in folds.values())
    # Folding by question, as before, spreads countries over folds: the leak this closes.
    by_question = defaultdict(set)
    for gt, fold in zip(rows, fold_of([SHORT_ANSWER.problem_key(gt) for gt in rows]),
                        strict=True):
        by_question[country_of(gt["question"])].add(int(fold))
    assert any(len(f) > 1 for f in by_question.values())


def test_other_questions_are_their_own_cluster():
    gt = {"question": "Who  wrote Hamlet?", "answers": ["Shakespeare"], "difficulty": None}
    assert country_of(gt["question"]) is None
    assert SHORT_ANSWER.readout_cluster(gt) == SHORT_ANSWER.problem_key(gt)


def test_countdown_clusters_by_problem():
    problems = [{"target": 3 + i, "numbers": [1, 2, i]} for i in range(6)]
    clusters = [COUNTDOWN.readout_cluster(gt) for gt in problems]
    assert clusters == [COUNTDOWN.problem_key(gt) for gt in problems]
    assert len(set(clusters)) == len(problems)
