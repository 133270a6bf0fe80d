"""`episodes.util.json_files`: every fault of a JSON file is one error of the caller's type
that names the path."""

from __future__ import annotations

import pytest

from episodes.util.json_files import read_json, read_json_object


class ToyError(Exception):
    """A caller's own error type."""


def test_good_object_is_returned(tmp_path):
    path = tmp_path / "good.json"
    path.write_text('{"format": "x/1", "n": [1, 2], "name": "caf\\u00e9"}', encoding="utf-8")
    assert read_json_object(path, ToyError) == {"format": "x/1", "n": [1, 2], "name": "café"}
    assert read_json_object(str(path), ToyError) == read_json(path, ToyError)


def test_missing_file_default_and_own_message(tmp_path):
    path = tmp_path / "none.json"
    with pytest.raises(ToyError) as caught:
        read_json_object(path, ToyError)
    assert str(caught.value) == f"{path}: no such file"
    with pytest.raises(ToyError) as caught:
        read_json_object(path, ToyError, missing="no manifest here")
    assert str(caught.value) == "no manifest here"


def test_a_folder_is_not_a_file(tmp_path):
    with pytest.raises(ToyError, match="no such file"):
        read_json(tmp_path, ToyError)


def test_invalid_json_names_the_path_and_why(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ToyError) as caught:
        read_json_object(path, ToyError)
    message = str(caught.value)
    assert message.startswith(f"{path}: not valid JSON (Expecting property name")
    assert message.endswith(")") and "\n" not in message


def test_non_utf8_bytes_are_not_valid_json(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes('{"name": "café"}'.encode("latin-1"))
    with pytest.raises(ToyError, match=r"latin1\.json: not valid JSON \('utf-8' codec"):
        read_json_object(path, ToyError)


def test_a_list_is_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    assert read_json(path, ToyError) == [1, 2]
    with pytest.raises(ToyError) as caught:
        read_json_object(path, ToyError)
    assert str(caught.value) == f"{path}: expected a JSON object"


def test_the_cause_is_kept(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("")
    with pytest.raises(ToyError) as caught:
        read_json(path, ToyError)
    assert isinstance(caught.value.__cause__, ValueError)
