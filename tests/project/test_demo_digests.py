"""benchmarks.demo_digests: the per-stage digests `make demo` ends with."""

from __future__ import annotations

from benchmarks.demo_digests import episodes_digest

HEADER = "episode,source,ways,accuracy,seconds\n"


def _write(folder, rows, note=True):
    folder.mkdir(parents=True, exist_ok=True)
    text = ("# hardness: eq. 9; extractor: logits of cnn4\n" if note else "") + HEADER + rows
    (folder / "episodes.csv").write_text(text)
    return folder


def test_episodes_digest_skips_provenance_notes_and_timing(tmp_path):
    """The '#' line learners.evaluate writes above the header (with --hardness-model) is no
    row, and a timing column does not change the digest; an accuracy does."""
    with_note = _write(tmp_path / "a", "0,omniglot,5,0.96,1.5\n1,omniglot,5,0.88,1.2\n")
    without = _write(tmp_path / "b", "0,omniglot,5,0.96,9.9\n1,omniglot,5,0.88,0.1\n", note=False)
    other = _write(tmp_path / "c", "0,omniglot,5,0.96,1.5\n1,omniglot,5,0.89,1.2\n")
    assert episodes_digest(with_note) == episodes_digest(without)
    assert episodes_digest(with_note) != episodes_digest(other)
