"""`verify` and `cache` in the one CLI style: `--dataset DIR`; the old positional folder still
works, with one note; a missing or repeated dataset is one clear line."""

from __future__ import annotations

import pytest

from beam_pipelines import cache, verify
from beam_pipelines.old_positional import positional_as_flag
from episodes.images.decoded_cache import cache_path
from tests.fixtures.reader_datasets import write_dataset

NOTE = "note: the positional folder {} is now --dataset {}; the old form goes in version 0.3.0"


@pytest.fixture
def toy(tmp_path):
    return write_dataset(tmp_path / "toy")


def test_verify_takes_dataset_and_still_the_old_positional(toy, capsys):
    assert verify.main(["--dataset", str(toy.root), "--no-decode"]) == 0
    first = capsys.readouterr()
    assert "OK:" in first.out and first.err == ""
    assert verify.main([str(toy.root), "--no-decode"]) == 0
    second = capsys.readouterr()
    assert second.out == first.out
    assert second.err.splitlines() == [NOTE.format(toy.root, toy.root)]


def test_cache_takes_dataset_and_still_the_old_positional(toy, capsys):
    assert cache.main(["--dataset", str(toy.root), "--image-size", "6", "--threads", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert sorted(int(p.stem) for p in cache_path(toy.root, 6).glob("*.npy")) == list(
        range(toy.num_classes)
    )
    # The old form, flags before the folder: the folder is found, the note printed once.
    assert cache.main(["--image-size", "6", str(toy.root)]) == 2  # exists, no --overwrite
    err = capsys.readouterr().err.splitlines()
    assert err[0] == NOTE.format(toy.root, toy.root)
    assert "exists" in err[1] and len(err) == 2


@pytest.mark.parametrize("command", [verify, cache])
def test_a_missing_or_repeated_dataset_is_one_line(command, toy, capsys):
    with pytest.raises(SystemExit) as exit_info:
        command.main([])
    assert exit_info.value.code == 2
    assert "missing --dataset DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.main(["--dataset", str(toy.root), "--dataset", str(toy.root)])
    assert "--dataset given 2 times" in capsys.readouterr().err


def test_the_positional_is_not_taken_from_a_flag_value():
    parser = cache.build_parser()
    # --image-size takes a value; --overwrite takes none; --project is Beam's and takes one.
    argv = ["--image-size", "6", "--project", "p1", "--overwrite", "DIR", "--threads=2"]
    assert positional_as_flag(parser, argv) == [
        "--image-size", "6", "--project", "p1", "--overwrite", "--dataset", "DIR", "--threads=2"
    ]  # fmt: skip
    assert positional_as_flag(parser, ["--dataset", "D", "--", "x"]) == [
        "--dataset",
        "D",
        "--",
        "x",
    ]


def test_a_misspelt_flag_is_refused_by_every_beam_command_before_any_work(toy, tmp_path, capsys):
    """Beam commands pass flags they do not know to Beam; the local runner would ignore all but
    the file-system ones, so a misspelt option is one line and exit 2, never silently dropped."""
    from beam_pipelines import convert, episodes
    from splits import embed
    from tests.fixtures.raw.omniglot import write_omniglot_fixture

    raw = write_omniglot_fixture(tmp_path / "raw" / "omniglot").root
    out = tmp_path / "out"
    commands = {
        "convert": lambda: convert.main(
            ["--source", "omniglot", "--input", str(raw), "--output", str(out), "--overwirte"]
        ),
        "convert --all": lambda: convert.main(
            ["--all", "--input", str(raw.parent), "--output", str(out), "--overwirte"]
        ),
        "cache": lambda: cache.main(
            ["--dataset", str(toy.root), "--image-size", "6", "--overwirte"]
        ),
        "episodes": lambda: episodes.main(
            [
                "--dataset",
                str(toy.root),
                "--split",
                "test",
                "--episodes",
                "2",
                "--output",
                str(out),
                "--overwirte",
            ]
        ),
        "splits.embed": lambda: embed.main(
            [
                "--dataset",
                str(toy.root),
                "--pretrain",
                "cnn4",
                "--output",
                str(out / "e.npz"),
                "--overwirte",
            ]
        ),
    }
    for name, run in commands.items():
        assert run() == 2, name
        err = capsys.readouterr().err
        assert "unknown option(s) --overwirte for the DirectRunner" in err, (name, err)
        assert len(err.strip().splitlines()) == 1, (name, err)
        assert not out.exists(), name
        assert not cache_path(toy.root, 6).exists(), name
