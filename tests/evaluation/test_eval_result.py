"""`compute_evaluation`: one walk over the records, the same numbers as the separate summaries,
and nothing written or drawn until `write_evaluation`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from calibrl.evaluation.baselines import baseline_metrics, reading_reference, within_group_auroc
from calibrl.evaluation.records import EXPECTED, NO_GROUP, SAMPLED, record_arrays
from calibrl.evaluation.report import METRICS_FILE, load_bins, load_risk_coverage, write_evaluation
from calibrl.evaluation.result import compute_evaluation
from calibrl.evaluation.summary import mean_extra_scores, summarize, summarize_by_group

FIELDS = ("correct", "confidence", "format_ok", "answer_len", "conf_len", "group",
          "answer_likelihood", "extra_scores", "readout", "stated_expected",
          "stated_expected_unavailable")


class CountingRecord(Mapping):
    """A record dict that counts, per field, how often it is read."""

    def __init__(self, values: dict[str, Any], reads: Counter) -> None:
        self._values, self._reads = values, reads

    def __getitem__(self, key: str) -> Any:
        self._reads[key] += 1
        return self._values[key]

    def __contains__(self, key: object) -> bool:  # asking whether a field exists is no read
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class CountingList(list):
    """A list of records that counts the walks over it."""

    walks = 0

    def __iter__(self) -> Iterator[Any]:
        self.walks += 1
        return super().__iter__()


def _values(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Grouped records with confidences (some unparsable), likelihoods, readouts, expected
    values, extra scores."""
    rng = np.random.default_rng(seed)
    labels = ["2 numbers", "3 numbers", "10 numbers", None]
    return [dict(correct=bool(rng.random() < 0.5),
                 confidence=None if rng.random() < 0.1 else float(rng.integers(0, 11) / 10),
                 format_ok=bool(rng.random() < 0.9), answer_len=int(rng.integers(1, 50)),
                 conf_len=int(rng.integers(1, 9)), group=labels[i % 4],
                 answer_likelihood=float(rng.random()), readout=float(rng.random()),
                 stated_expected=float(rng.random() * 0.9), stated_expected_unavailable=None,
                 extra_scores={"token_f1": float(rng.random())} if i % 5 else {})
            for i in range(n)]


def _counting(n: int) -> tuple[CountingList, list[Counter]]:
    reads = [Counter() for _ in range(n)]
    records = CountingList(CountingRecord(v, r) for v, r in zip(_values(n), reads, strict=True))
    return records, reads


def test_one_evaluation_reads_each_field_of_each_record_once():
    n = 300
    records, reads = _counting(n)
    result = compute_evaluation(records, name="x", mode="two_turn", with_confidence=True,
                                clusters=[i // 3 for i in range(n)], bootstrap=20)
    assert result.baselines["readout"] is not None and result.by_group is not None
    assert records.walks == 1
    assert all(r == Counter(dict.fromkeys(FIELDS, 1)) for r in reads)
    # Before the records were converted once, the whole, each group, the extra scores and the
    # references each walked them: every field was read 2 or 3 times (18 reads per record).


def test_the_counter_sees_a_second_walk():
    # The instrument above can fail: summarising the records twice reads every field twice.
    records, reads = _counting(40)
    summarize(records)
    summarize_by_group(records)
    assert records.walks == 2
    assert {r["confidence"] for r in reads} == {2}


def test_the_result_holds_what_the_separate_summaries_compute():
    values = _values(200, seed=3)
    clusters = [i // 2 for i in range(200)]
    result = compute_evaluation(values, name="x", mode="two_turn", with_confidence=True,
                                n_bins=5, clusters=clusters)
    assert dict(result.metrics) == summarize(values, n_bins=5)
    by_group = summarize_by_group(values, n_bins=5)
    assert list(result.by_group) == ["2 numbers", "3 numbers", "10 numbers", NO_GROUP]
    for label, metrics in result.by_group.items():
        subset = [v for v in values if (v["group"] or NO_GROUP) == label]
        assert metrics == {**by_group[label], "extra_scores": mean_extra_scores(subset)}
    arrays = record_arrays(values)
    assert result.baselines == {
        **baseline_metrics(arrays.correct, arrays.groups, clusters,
                           [v["answer_likelihood"] for v in values], 5,
                           [v["readout"] for v in values]),
        "stated_expected": reading_reference(
            [v["stated_expected"] for v in values], None, arrays.correct, arrays.groups,
            EXPECTED, 5)}
    assert result.confidences.shape == result.correct.shape == (200,)
    assert result.unparsable == sum(v["confidence"] is None for v in values)
    assert sum(b.count for b in result.bins) == 200 and result.curve[0][-1] == 1.0
    assert result.bootstrap is None  # no draws asked for


def test_the_expected_reading_heads_and_the_sampled_one_stands_beside():
    values = _values(200, seed=4)
    result = compute_evaluation(values, name="x", mode="two_turn", with_confidence=True,
                                reading=EXPECTED)
    assert result.to_metrics()["confidence_reading"] == EXPECTED
    assert dict(result.metrics) == summarize(values, reading=EXPECTED)
    assert result.metrics["mean_confidence"] == pytest.approx(
        np.mean([v["stated_expected"] for v in values]))
    # The parse status stays the sampled text's, whichever reading heads.
    assert result.metrics["unparsable_confidence_rate"] == summarize(values)[
        "unparsable_confidence_rate"] > 0
    assert result.confidences.tolist() == [v["stated_expected"] for v in values]
    sampled, headline_sampled = result.baselines["stated_sampled"], summarize(values)
    assert sampled["reading"] == "stated (sampled)" and "stated_expected" not in result.baselines
    for key in ("ece", "brier", "auroc", "aurc", "mean_confidence"):
        assert sampled[key] == headline_sampled[key]
    arrays = record_arrays(values)
    assert sampled["within_group_auroc"] == within_group_auroc(
        arrays.stated(SAMPLED)[0], arrays.correct, arrays.groups)[0]


def test_an_expected_reading_not_available_says_why_and_is_never_a_stand_in():
    values = [{**v, "stated_expected": None, "stated_expected_unavailable": "no tenths"}
              for v in _values(40)]
    result = compute_evaluation(values, name="x", mode="two_turn", with_confidence=True,
                                reading=EXPECTED)
    assert result.calibration_unavailable == "no tenths" and result.metrics["ece"] is None
    assert result.bins == () and result.curve is None
    beside = compute_evaluation(values, name="x", mode="two_turn",
                                with_confidence=True).baselines["stated_expected"]
    assert beside["ece"] is None and beside["calibration_unavailable"] == "no tenths"
    # One answer without one makes the reading not available: it is not scored as 0.
    values = _values(40)
    values[3] = {**values[3], "stated_expected": None}
    reason = compute_evaluation(values, name="x", mode="two_turn", with_confidence=True,
                                reading=EXPECTED).calibration_unavailable
    assert reason == "1 of 40 answers have no expected value"


def test_to_metrics_is_what_is_saved_and_a_fresh_copy(tmp_path):
    result = compute_evaluation(_values(60), name="x", mode="two_turn", with_confidence=True)
    saved = write_evaluation(tmp_path, result)
    assert saved == result.to_metrics() == json.loads((tmp_path / METRICS_FILE).read_text())
    saved["by_group"]["2 numbers"]["count"] = -1
    assert result.to_metrics()["by_group"]["2 numbers"]["count"] > 0
    assert load_bins(tmp_path) == list(result.bins)
    assert load_risk_coverage(tmp_path) == tuple(c.tolist() for c in result.curve[:2])


def test_without_confidence_the_result_has_no_calibration_parts():
    values = [{**v, "confidence": None, "conf_len": None} for v in _values(30)]
    result = compute_evaluation(values, name="x", mode="rlvr", with_confidence=False,
                                clusters=list(range(30)), bootstrap=10)
    assert result.bins == () and result.curve is None and result.confidences is None
    assert result.baselines is None and set(result.bootstrap) == {"accuracy"}
    assert "within_group_auroc" not in result.to_metrics()


def test_compute_evaluation_draws_nothing():
    # Computing imports no plotting library: figures belong to `write_evaluation`.
    code = ("import sys, calibrl.evaluation.result as r; "
            "r.compute_evaluation([dict(correct=True, confidence=0.5, format_ok=True, "
            "answer_len=1)], name='x', mode='two_turn', with_confidence=True); "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("bad", [[], [dict(correct=True, confidence=0.5, answer_len=1)]])
def test_bad_records(bad):
    with pytest.raises(ValueError, match="no examples|has no 'format_ok'"):
        compute_evaluation(bad, name="x", mode="two_turn", with_confidence=True)
