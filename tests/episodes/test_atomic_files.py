"""Atomic writes: a finished write replaces the target whole; a failed one leaves the old
target and no temporary file behind."""

from __future__ import annotations

import pytest

from episodes.util.atomic_files import (
    atomic_path,
    replace_folder,
    staging_folder,
    write_bytes_atomically,
    write_text_atomically,
)


def test_write_replaces_whole_and_failure_leaves_old_and_no_temp(tmp_path):
    target = tmp_path / "deep" / "file.json"
    write_text_atomically(target, "old")
    assert target.read_text() == "old"
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_path(target) as tmp:
            tmp.write_text("half of the new")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.json"]
    write_bytes_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.json"]


def test_folder_is_staged_hidden_then_swapped_in(tmp_path):
    target = tmp_path / "out"
    first = staging_folder(target)
    assert first.parent == tmp_path and first.name.startswith(".out.") and not any(first.iterdir())
    (first / "a").write_text("1")
    replace_folder(first, target)
    second = staging_folder(target)
    assert second != first
    (second / "b").write_text("2")
    replace_folder(second, target)
    assert sorted(p.name for p in target.iterdir()) == ["b"]  # the old content is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging or old left


def test_an_unwritable_folder_is_reported_by_the_path_asked_for(tmp_path):
    """Errors name the target, not the hidden temporary beside it (one line for the user)."""
    from tests.fixtures.unwritable_folder import unwritable

    with unwritable(tmp_path / "ro") as folder:
        with pytest.raises(PermissionError) as file_error:
            write_text_atomically(folder / "split.json", "{}")
        assert file_error.value.filename == str(folder / "split.json")
        with pytest.raises(PermissionError) as folder_error:
            staging_folder(folder / "dataset")
        assert folder_error.value.filename == str(folder / "dataset")
