"""User paths of the split tools (issue 13, items 7-8), run as a user runs them: commands on a
dataset converted by `python -m beam_pipelines.convert` from the CIFAR-100 raw fixture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from beam_pipelines import convert
from episodes import read as read_cli
from episodes.records.dataset_spec import load_spec
from episodes.records.split_file import read_split_file
from episodes.records.split_sizes import split_by_fractions, split_counts
from episodes.util.cli_errors import UserError
from learners.evaluate import split_divergence
from learners.feed.episode_source import EpisodeOptions, open_episode_source
from splits import analyze, make
from splits.embeddings.embeddings_file import EmbeddingsFile
from tests.fixtures.raw.cifar100 import write_cifar100_fixture

# 15.5 and 14.5 of 100 classes: rounding gave 70/16/14, the floor rule 71/15/14.
FRACTIONS = ("0.7", "0.155", "0.145")


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    """CIFAR-100 fixture converted with a seeded fraction split, by the convert command."""
    raw = write_cifar100_fixture(tmp_path_factory.mktemp("raw")).root
    out = tmp_path_factory.mktemp("converted") / "cifar100"
    code = convert.main(
        [
            "--source",
            "cifar100",
            "--input",
            str(raw),
            "--output",
            str(out),
            "--split_fractions",
            *FRACTIONS,
            "--split_seed",
            "3",
        ]
    )
    assert code == 0
    return out


def _embeddings(path: Path, names: list[str]) -> Path:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5, 16))
    x = centres[np.arange(len(names)) % 5] + 0.5 * rng.normal(size=(len(names), 16))
    return EmbeddingsFile(names, x.astype(np.float32), model="toy", weights_hash="w0").save(path)


def _quick_atg(emb: Path, output: Path, *extra: str) -> int:
    """`python -m splits make --method atg` at R = 0.32 with short runs (300 steps, 2 starts)."""
    args = ["--method", "atg", "--embeddings", str(emb), "--divergence", "0.32"]
    args += ["--iterations", "300", "--restarts", "2", "--output", str(output), "--quiet"]
    return make.main([*args, *extra])


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------------------------
# Item 8: one fraction rule


def test_convert_and_random_give_the_same_fraction_split(converted, tmp_path, capsys):
    spec = load_spec(converted)
    assert [len(spec.classes(s)) for s in ("train", "valid", "test")] == [71, 15, 14]
    out = tmp_path / "random.json"
    code = make.main(
        [
            "--method",
            "random",
            "--dataset",
            str(converted),
            "--fractions",
            *FRACTIONS,
            "--seed",
            "3",
            "--output",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    split = read_split_file(out)
    assert split.dataset == "cifar100"
    for name in ("train", "valid", "test"):
        assert sorted(getattr(split, name)) == sorted(
            spec.class_names[c] for c in spec.classes(name)
        )


def test_no_asked_for_split_is_left_empty_or_impossible_is_refused(tmp_path, capsys):
    names = [f"c{i:03d}" for i in range(100)]
    # Rounding 0.5 gave valid and test no class; the rule gives each one.
    assert split_counts(100, (0.99, 0.005, 0.005)) == (98, 1, 1)
    assert [len(x) for x in split_by_fractions(names, (0.99, 0.005, 0.005), 0)] == [98, 1, 1]
    assert split_counts(158, (0.7, 0.15, 0.15)) == (112, 23, 23)
    listing = tmp_path / "two.txt"
    listing.write_text("a\nb\n")
    code = make.main(
        ["--method", "random", "--class-names", str(listing), "--output", str(tmp_path / "s.json")]
    )
    assert code == 2
    assert "2 classes are too few" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "s.json").exists()


# ----------------------------------------------------------------------------------------------
# Item 8: the split tools take this toolkit's own dataset folders and specs


def test_split_tools_take_a_converted_dataset(converted, tmp_path, capsys):
    spec_file = converted / "dataset_spec.json"
    names = load_spec(converted).class_names
    for source in (converted, spec_file):
        out = tmp_path / f"random-{source.name}.json"
        code = make.main(["--method", "random", "--dataset", str(source), "--output", str(out)])
        assert code == 0
        assert sorted(
            sum((read_split_file(out).classes(s) for s in ("train", "valid", "test")), [])
        ) == sorted(names)
    emb = _embeddings(tmp_path / "emb.npz", names)
    out = tmp_path / "atg.json"
    code = _quick_atg(emb, out, "--dataset", str(spec_file))
    assert code == 0, capsys.readouterr().err
    assert read_split_file(out).method == "atg"
    fc100 = tmp_path / "fc100.json"
    code = make.main(
        ["--method", "semantic", "--kind", "superclass", "--dataset", str(converted)]
        + ["--preset", "fc100", "--output", str(fc100)]
    )
    assert code == 0, capsys.readouterr().err
    split = read_split_file(fc100)
    assert split.dataset == "cifar100" and split.sizes() == {"train": 60, "valid": 20, "test": 20}
    assert "beaver" in split.test and "bear" in split.valid  # aquatic mammals / carnivores


def test_foreign_spec_names_are_refused_in_one_line(converted, tmp_path, capsys):
    emb = _embeddings(tmp_path / "emb.npz", [f"other{i}" for i in range(100)])
    code = _quick_atg(emb, tmp_path / "x.json", "--dataset", str(converted))
    assert code == 2
    assert "class names differ" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "x.json").exists()


# ----------------------------------------------------------------------------------------------
# Item 8: one split-file parser for the reader, the learners and the split tools


def _split_files(converted: Path, tmp_path: Path) -> dict[str, Path]:
    spec = load_spec(converted)
    names = spec.class_names
    files = {}
    plain = tmp_path / "plain_splits.json"  # Meta-Dataset's published form
    plain.write_text(json.dumps({"train": names[:60], "valid": names[60:80], "test": names[80:]}))
    files["plain"] = plain
    files["random"] = tmp_path / "random.json"
    make.main(["--method", "random", "--dataset", str(converted), "--output", str(files["random"])])
    files["atg"] = tmp_path / "atg.json"
    assert _quick_atg(_embeddings(tmp_path / "emb.npz", names), files["atg"]) == 0
    return files


def test_every_reader_takes_every_split_file(converted, tmp_path, capsys):
    for kind, path in _split_files(converted, tmp_path).items():
        split = read_split_file(path)
        code = read_cli.main(
            [
                "--dataset",
                str(converted),
                "--split",
                "test",
                "--split-file",
                str(path),
                "--episodes",
                "1",
                "--mode",
                "fixed",
                "--ways",
                "5",
                "--shots",
                "1",
                "--query",
                "1",
            ]
        )
        assert code in (0, None), (kind, capsys.readouterr().err)
        printed = capsys.readouterr().out
        assert any(name in printed for name in split.test), kind
        source = open_episode_source(
            str(converted),
            "valid",
            str(path),
            EpisodeOptions(ways=5, shots=1, query=1, image_size=8),
            0,
        )
        episode = next(iter(source.episodes(0)))
        spec = load_spec(converted)
        assert {spec.class_names[c] for c in episode.support_class_ids} <= set(split.valid)
        expected_r = 0.32 if kind == "atg" else None
        assert split_divergence(str(path)) == expected_r
        assert analyze.main(["summary", "--split", str(path)]) in (0, None), kind
        capsys.readouterr()


def test_bad_split_files_are_one_line_errors_naming_the_path(converted, tmp_path, capsys):
    bad = {
        "list.json": "[1, 2]",
        "typo.json": json.dumps({"train": ["apple"], "vlaid": [], "test": []}),
        "nosplit.json": json.dumps({"train": ["apple"], "test": []}),
    }
    for name, text in bad.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(UserError) as exit_info:  # run_main prints it: one line, exit 2
            read_cli.main(
                ["--dataset", str(converted), "--split", "test", "--split-file", str(path)]
            )
        line = _one_line(f"error: {exit_info.value}")
        assert str(path) in line, line
        with pytest.raises(ValueError, match=str(path)):
            read_split_file(path)


# ----------------------------------------------------------------------------------------------
# Item 7: ATG refuses unreachable R up front and never saves a diverged or missed solution


@pytest.mark.slow
@pytest.mark.parametrize("r", ["100", "30"])
def test_atg_refuses_an_unreachable_r_naming_the_reachable_range(converted, tmp_path, capsys, r):
    names = load_spec(converted).class_names
    emb = _embeddings(tmp_path / "emb.npz", names)
    code = make.main(
        [
            "--method",
            "atg",
            "--embeddings",
            str(emb),
            "--divergence",
            r,
            "--output",
            str(tmp_path / "out"),
            "--quiet",
        ]
    )
    assert code == 2
    line = _one_line(capsys.readouterr().err)
    assert f"R={r} is outside the reachable range" in line and "is reached here" in line
    assert "nll_reduction" not in line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_atg_never_saves_a_split_that_misses_r(converted, tmp_path, capsys):
    # The literal summed likelihood at lambda = 1 outweighs the penalty M-fold: D stays far
    # below R. That split used to be saved; now the command says so and writes nothing.
    emb = _embeddings(tmp_path / "emb.npz", load_spec(converted).class_names)
    out = tmp_path / "sum.json"
    code = make.main(
        [
            "--method",
            "atg",
            "--embeddings",
            str(emb),
            "--divergence",
            "0.96",
            "--nll-reduction",
            "sum",
            "--lr",
            "0.001",
            "--iterations",
            "400",
            "--restarts",
            "2",
            "--output",
            str(out),
            "--quiet",
        ]
    )
    assert code == 2
    line = _one_line(capsys.readouterr().err)
    assert "R=0.96 is outside the reachable range" in line  # the pilot is the whole run here
    assert not out.exists()


@pytest.mark.slow
def test_atg_sweep_refuses_before_any_long_work(converted, tmp_path, capsys):
    emb = _embeddings(tmp_path / "emb.npz", load_spec(converted).class_names)
    out = tmp_path / "sweep"
    code = make.main(
        ["--method", "atg", "--embeddings", str(emb), "--divergence", "0.32", "100"]
        + ["--output", str(out), "--quiet"]
    )
    assert code == 2
    assert "R=100" in _one_line(capsys.readouterr().err)
    assert not out.exists() or not list(out.iterdir())  # not even R=0.32 was run


def test_split_tools_keep_an_existing_output_unless_overwrite(converted, tmp_path, capsys):
    out = tmp_path / "split.json"
    out.write_text("my own split\n")
    emb = _embeddings(tmp_path / "emb.npz", load_spec(converted).class_names)
    commands = (
        lambda *extra: make.main(
            ["--method", "random", "--dataset", str(converted), "--output", str(out), *extra]
        ),
        lambda *extra: make.main(
            [
                "--method",
                "semantic",
                "--kind",
                "superclass",
                "--dataset",
                str(converted),
                "--preset",
                "fc100",
                "--output",
                str(out),
                *extra,
            ]
        ),
        lambda *extra: _quick_atg(emb, out, *extra),
    )
    for command in commands:
        out.write_text("my own split\n")
        assert command() == 2
        assert f"{out} exists; pass --overwrite" in _one_line(capsys.readouterr().err)
        assert out.read_text() == "my own split\n"
        assert command("--overwrite") == 0
        assert read_split_file(out).dataset in ("cifar100", "emb")
        capsys.readouterr()
