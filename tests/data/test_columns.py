"""Column mapping in the storage floor: renaming rows' columns and the one-line errors."""

from __future__ import annotations

import pytest

from calibrl.data.columns import check_targets, rename_columns
from calibrl.errors import UserError
from calibrl.settings.convert import ConvertSettings
from calibrl.settings.loader import load_settings


def test_a_source_column_is_renamed_and_the_rest_kept():
    rows = [{"problem": "Q1", "best": "A1", "id": 1}, {"problem": "Q2", "best": "A2", "id": 2}]
    out = rename_columns(rows, {"question": "problem", "answer": "best"}, "f.jsonl")
    assert out == [{"question": "Q1", "answer": "A1", "id": 1},
                   {"question": "Q2", "answer": "A2", "id": 2}]
    assert rows[0] == {"problem": "Q1", "best": "A1", "id": 1}  # the input is not changed


def test_the_mapped_column_replaces_a_column_of_the_target_name():
    # The row's own `question` is not the question: the mapping says `title` is.
    rows = [{"question": "an id", "title": "The real question?", "answer": "x"}]
    assert rename_columns(rows, {"question": "title"}, "f") == [
        {"question": "The real question?", "answer": "x"}]


def test_two_columns_can_swap_names():
    rows = [{"question": "A", "answer": "Q"}]
    assert rename_columns(rows, {"question": "answer", "answer": "question"}, "f") == [
        {"question": "Q", "answer": "A"}]


def test_a_row_without_the_source_gets_no_target_and_non_mappings_pass():
    rows = [{"q": "Q1", "level": "easy"}, {"q": "Q2"}, "not a row"]
    assert rename_columns(rows, {"question": "q", "difficulty": "level"}, "f") == [
        {"question": "Q1", "difficulty": "easy"}, {"question": "Q2"}, "not a row"]


def test_a_source_no_row_has_is_one_line_naming_the_columns_present():
    rows = [{"problem": "Q", "best": "A"}]
    with pytest.raises(UserError) as info:
        rename_columns(rows, {"answer": "bst"}, "data/f.parquet")
    assert str(info.value) == ("data.columns.answer=bst: data/f.parquet has no column 'bst' "
                               "(its columns: best, problem)")


def test_no_mapping_or_no_rows_change_nothing():
    rows = [{"a": 1}]
    assert rename_columns(rows, {}, "f") == rows
    assert rename_columns([], {"question": "x"}, "f") == []


def test_an_unknown_target_names_the_closest_and_every_known_column():
    check_targets({"question": "problem"}, ("question", "answer"), "the reader")
    with pytest.raises(UserError) as info:
        check_targets({"qestion": "problem"}, ("question", "answer"), "the reader")
    assert str(info.value) == ("data.columns.qestion: the reader reads no column 'qestion' "
                               "(did you mean 'question'?); it reads question, answer")


def test_the_setting_is_typed_and_checked():
    settings = load_settings(ConvertSettings, None, ["data.columns.question=problem",
                                                     "data.columns.difficulty=7"])
    assert settings.data.columns == {"question": "problem", "difficulty": "7"}
    assert load_settings(ConvertSettings).data.columns == {}
    with pytest.raises(UserError, match="a column name is empty"):
        load_settings(ConvertSettings, None, ["data.columns.question= "])
    with pytest.raises(UserError, match="did you mean 'data.columns'"):
        load_settings(ConvertSettings, None, ["data.column.question=problem"])
