"""The readout reference: folds keep a problem's answers together, the probe is the L2 logistic
regression's optimum, and an answer is never scored by a probe that saw its problem."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calibrl.algo.readout import (
    READOUT_L2,
    fit_logistic,
    last_states,
    out_of_fold_readout,
    state_position,
)
from calibrl.algo.self_estimates import cluster_folds as fold_of
from calibrl.evaluation.metrics import auroc
from calibrl.models import build_tiny_model, build_tokenizer


def test_folds_keep_each_cluster_whole_and_spread_clusters():
    clusters = [i // 3 for i in range(60)]
    fold = fold_of(clusters, 5)
    for c in set(clusters):
        assert len({int(f) for f, k in zip(fold, clusters, strict=True) if k == c}) == 1
    assert sorted(np.bincount(fold).tolist()) == [12] * 5


def test_fit_logistic_reaches_the_regularised_optimum():
    rng = np.random.default_rng(0)
    x = torch.as_tensor(rng.normal(size=(200, 4)))
    y = torch.as_tensor((rng.random(200) < 1 / (1 + np.exp(-x[:, 0].numpy()))).astype(float))
    w, b = fit_logistic(x, y)
    w, b = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
    (loss + READOUT_L2 * (w * w).sum()).backward()
    assert float(w.grad.abs().max()) < 1e-4 and abs(float(b.grad)) < 1e-4  # a stationary point
    w = w.detach()
    assert float(w[0]) > 0.5 and int(w.abs().argmax()) == 0  # the one informative feature


def test_a_feature_that_predicts_correctness_is_read_out_of_fold():
    rng = np.random.default_rng(1)
    correct = rng.random(300) < 0.4
    features = rng.normal(size=(300, 8))
    features[:, 2] += 2.0 * correct
    scores = out_of_fold_readout(features, correct, clusters=range(300))
    assert auroc(scores, correct) > 0.85
    assert ((scores >= 0) & (scores <= 1)).all()


def test_what_only_names_a_problem_does_not_leak_into_its_own_score():
    # Each problem has a one-hot identity feature and one grade for all its answers: in sample
    # the identity predicts perfectly, out of fold it says nothing.
    problems, per = 40, 4
    rng = np.random.default_rng(2)
    grade = rng.random(problems) < 0.5
    clusters = np.repeat(np.arange(problems), per)
    features = np.eye(problems)[clusters] + rng.normal(scale=0.01, size=(problems * per, problems))
    scores = out_of_fold_readout(features, grade[clusters], clusters)
    assert 0.3 < auroc(scores, grade[clusters]) < 0.7


def test_one_class_in_a_training_part_predicts_its_rate():
    scores = out_of_fold_readout(np.zeros((10, 3)), [True] * 10, clusters=range(10))
    assert scores.tolist() == [1.0] * 10


def test_the_state_is_read_at_the_token_that_opens_confidence():
    tokenizer = build_tokenizer()
    ids = tokenizer("<analysis>ok</analysis>\n<confidence>0.4</confidence>",
                    add_special_tokens=False)["input_ids"]
    keep = state_position(tokenizer, ids)
    assert tokenizer.decode(ids[:keep]).endswith("<confidence>")
    assert state_position(tokenizer, ids[:3]) == 3  # never opened: the whole sample


def test_last_states_are_those_of_each_unpadded_sequence():
    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2).eval()
    seqs = [[5, 6, 7, 8, 9], [5, 6]]
    got = last_states(model, seqs)
    with torch.no_grad():
        for i, seq in enumerate(seqs):
            alone = model(input_ids=torch.tensor([seq]),
                          output_hidden_states=True).hidden_states[-1][0, -1]
            assert got[i] == pytest.approx(alone.numpy(), abs=1e-5)
