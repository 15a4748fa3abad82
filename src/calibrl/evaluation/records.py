"""Evaluated answers (records) and their one conversion to arrays.

A record is an `EvalRecord` or a dict with the same keys. `record_arrays` reads each record's
fields once, in one pass, into `RecordArrays`; everything after it (`summarize`, the references,
the bootstrap, bins and curves) works on those arrays, so an evaluation walks its records once
however many metrics and groups it reports.

Shapes: N records; every array of `RecordArrays` is (N,).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import numpy as np

from calibrl.evaluation.metrics import UNPARSABLE_CONFIDENCE, calibration_unavailable

NO_GROUP = "ungrouped"  # the group label of records without one
REQUIRED = ("correct", "confidence", "format_ok", "answer_len")
# The two readings of the stated confidence (`eval.confidence_reading`): the value the model
# sampled, parsed from its text, and the expected value of its distribution over the tenths
# where it writes the value (`calibrl.evaluation.stated_value`); and how tables name them.
SAMPLED, EXPECTED = "sampled", "expected"
READING_NAMES = {SAMPLED: "stated (sampled)", EXPECTED: "stated (expected value)"}
# A record's reason its `stated_expected` is None (`calibrl.evaluation.stated_value`).
EXPECTED_UNAVAILABLE = "stated_expected_unavailable"


@dataclass(frozen=True)
class EvalRecord:
    """One evaluated answer. Dicts with the same keys are accepted wherever records are.

    Attributes:
        correct: the answer was verified correct.
        confidence: the parsed confidence in [0, 1]; None when missing or unparsable.
        format_ok: the answer followed the required format.
        answer_len: length of the answer turn (tokens, or whatever unit the caller uses).
        conf_len: length of the confidence turn; None when the mode has no confidence.
        group: difficulty label of the problem (`Task.difficulty`), e.g. "3 numbers"; None when
            unknown. `summarize_by_group` reports metrics per label.
        answer_likelihood: `exp(mean token log-prob)` of the answer under the model that sampled
            it (`calibrl.evaluation.baselines`); None when not recorded.
        extra_scores: the task's scores beside right/wrong (`Task.extra_scores`, e.g. token F1),
            averaged by `mean_extra_scores`; None or {} when the task has none.
        readout: the out-of-fold probe of the model's state at `<confidence>`
            (`calibrl.algo.readout`); None when not computed.
        stated_expected: the expected value of the model's distribution over the tenths where
            it writes its value (`calibrl.evaluation.stated_value`); None when not available.
        stated_expected_unavailable: why `stated_expected` is None; None when it is not.
    """

    correct: bool
    confidence: float | None
    format_ok: bool
    answer_len: int
    conf_len: int | None = None
    group: str | None = None
    answer_likelihood: float | None = None
    extra_scores: Mapping[str, float] | None = None
    readout: float | None = None
    stated_expected: float | None = None
    stated_expected_unavailable: str | None = None


@dataclass(frozen=True)
class RecordArrays:
    """The records of one evaluation as arrays, each (N,); NaN marks a value a record lacks.

    Attributes:
        confidence: the stated confidence, NaN where unparsable (`scored` fills those in).
        parsable: whether the confidence parsed (`valid_confidence`).
        correct, format_ok: bool.
        answer_len, conf_len: float; NaN where None.
        groups: str labels, `NO_GROUP` where a record has none; `grouped`: some record has one.
        likelihood, readout, expected (`stated_expected`): float; NaN where None.
        extra_scores: {name: (N,) float, NaN where a record lacks that score}, names sorted.
        expected_unavailable: the first reason a record gives for lacking `stated_expected`.
    """

    confidence: np.ndarray
    parsable: np.ndarray
    correct: np.ndarray
    format_ok: np.ndarray
    answer_len: np.ndarray
    conf_len: np.ndarray
    groups: np.ndarray
    grouped: bool
    likelihood: np.ndarray
    readout: np.ndarray
    expected: np.ndarray
    extra_scores: Mapping[str, np.ndarray] = field(default_factory=dict)
    expected_unavailable: str | None = None

    def __len__(self) -> int:
        return int(self.correct.size)

    def scored(self, unparsable_confidence: float = UNPARSABLE_CONFIDENCE) -> np.ndarray:
        """(N,) the confidences the metrics score: unparsable ones as `unparsable_confidence`."""
        if not 0.0 <= unparsable_confidence <= 1.0:
            raise ValueError("unparsable_confidence must be within [0, 1]")
        return np.where(self.parsable, self.confidence, unparsable_confidence)

    def stated(self, reading: str, unparsable_confidence: float = UNPARSABLE_CONFIDENCE
               ) -> tuple[np.ndarray, str | None]:
        """((N,) the confidences the metrics score under `reading`, why they are not available
        or None). Sampled: `scored`, not available below `MIN_PARSED_SHARE` parsed; expected:
        `expected`, not available unless every record has one (a missing one is never scored
        as a stand-in: it is missing for a reason of the run, not of the answer)."""
        if reading == SAMPLED:
            return self.scored(unparsable_confidence), calibration_unavailable(self.parsable)
        if reading != EXPECTED:
            raise ValueError(f"unknown confidence reading {reading!r}")
        missing = np.isnan(self.expected)
        reason = None
        if missing.any():
            reason = self.expected_unavailable or (
                f"{int(missing.sum())} of {missing.size} answers have no expected value")
        return np.where(missing, unparsable_confidence, self.expected), reason

    def take(self, rows: np.ndarray) -> RecordArrays:
        """The records at `rows` (a bool mask or indices), as arrays of the same kind."""
        pick = {name: getattr(self, name)[rows] for name in _ARRAY_FIELDS}
        return RecordArrays(**pick, grouped=self.grouped,
                            extra_scores={k: v[rows] for k, v in self.extra_scores.items()},
                            expected_unavailable=self.expected_unavailable)


_ARRAY_FIELDS = ("confidence", "parsable", "correct", "format_ok", "answer_len", "conf_len",
                 "groups", "likelihood", "readout", "expected")


def valid_confidence(value: Any) -> float | None:
    """The record's confidence if it is a real number in [0, 1], else None (unparsable).

    Records come from model output via a parser; anything else that slips through (NaN, 7.0,
    a string) counts as unparsable rather than crashing the evaluation or producing NaN.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return value


def _finite(value: Any) -> float:
    """A real finite number as float, anything else (None included) as NaN."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return math.nan
    value = float(value)
    return value if math.isfinite(value) else math.nan


def _read(record: Any, position: int) -> dict[str, Any]:
    """Every field of one record, read once; `ValueError` naming a missing required field."""
    get = record.get if isinstance(record, Mapping) else (
        lambda key, default=None: getattr(record, key, default))
    missing = object()
    values = {}
    for key in REQUIRED:
        values[key] = get(key, missing)
        if values[key] is missing:
            raise ValueError(f"record {position} has no {key!r}")
    correct = values["correct"]
    if not (isinstance(correct, bool | np.bool_) or correct in (0, 1)):
        raise ValueError(f"record {position}: correct must be bool, got {correct!r}")
    for key in ("conf_len", "group", "answer_likelihood", "extra_scores", "readout",
                "stated_expected", EXPECTED_UNAVAILABLE):
        values[key] = get(key, None)
    return values


def record_arrays(records: Iterable[Any]) -> RecordArrays:
    """The one pass over `records` (module docstring): each record's fields read once."""
    rows = [_read(record, i) for i, record in enumerate(records)]
    if not rows:
        raise ValueError("no examples to evaluate")
    parsed = [valid_confidence(r["confidence"]) for r in rows]
    expected = [valid_confidence(r["stated_expected"]) for r in rows]  # in [0, 1] or None
    labels = [r["group"] for r in rows]
    names = sorted({name for r in rows for name in (r["extra_scores"] or {})})
    extras = {name: np.array([_finite((r["extra_scores"] or {}).get(name)) for r in rows])
              for name in names}

    def floats(key: str) -> np.ndarray:
        return np.array([_finite(r[key]) for r in rows], dtype=np.float64)

    return RecordArrays(
        confidence=np.array([math.nan if c is None else c for c in parsed], dtype=np.float64),
        parsable=np.array([c is not None for c in parsed], dtype=bool),
        correct=np.array([bool(r["correct"]) for r in rows], dtype=bool),
        format_ok=np.array([bool(r["format_ok"]) for r in rows], dtype=bool),
        answer_len=floats("answer_len"), conf_len=floats("conf_len"),
        groups=np.array([NO_GROUP if g is None else str(g) for g in labels], dtype=str),
        grouped=any(g is not None for g in labels),
        likelihood=floats("answer_likelihood"), readout=floats("readout"),
        expected=np.array([math.nan if e is None else e for e in expected], dtype=np.float64),
        extra_scores=extras,
        expected_unavailable=next((str(r[EXPECTED_UNAVAILABLE]) for r in rows
                                   if r[EXPECTED_UNAVAILABLE]), None))


def calibration_arrays(
    records: Iterable[Any], unparsable_confidence: float = UNPARSABLE_CONFIDENCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(confidences, correct, parsable), each shape (N,): what the calibration metrics score.

    Unparsable confidences are replaced by `unparsable_confidence`; `parsable` marks the others.
    """
    arrays = record_arrays(records)
    return arrays.scored(unparsable_confidence), arrays.correct, arrays.parsable
