"""The embedded glyph dataset: Omniglot layout, counts, determinism, cache, errors, learnability."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from episodes.glyph_dataset import (
    BACKGROUND,
    EVALUATION,
    MANIFEST_NAME,
    MAX_ALPHABET_SIZE,
    MIN_ALPHABET_SIZE,
    GlyphDatasetConfig,
    GlyphDatasetError,
    alphabet_catalogue,
    generate,
    main,
    plan_alphabets,
)

FILE_NAME = re.compile(r"^(\d{4})_(\d{2})\.png$")


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _pngs(root: Path) -> dict[str, bytes]:
    return {name: data for name, data in _files(root).items() if name.endswith(".png")}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """3 alphabets (2 background, 1 evaluation), 2 characters each, 20 drawers."""
    root = tmp_path_factory.mktemp("glyphs") / "omniglot"
    config = GlyphDatasetConfig(seed=0, alphabets=3, max_characters=2)
    return root, config, generate(root, config, progress=False)


def test_default_plan_has_omniglot_shape():
    plans = plan_alphabets(GlyphDatasetConfig())
    background = [p for p in plans if p.split == BACKGROUND]
    evaluation = [p for p in plans if p.split == EVALUATION]
    assert (len(background), len(evaluation)) == (30, 20)
    sizes = [len(p.codepoints) for p in plans]
    assert 1000 <= sum(sizes) <= 1700
    assert MIN_ALPHABET_SIZE <= min(sizes) <= 16 and 50 <= max(sizes) <= MAX_ALPHABET_SIZE
    # the 5 smallest background alphabets (Meta-Dataset's valid split) are clearly smaller
    bg_sizes = sorted(len(p.codepoints) for p in background)
    assert bg_sizes[4] < np.median(bg_sizes)
    names = [p.name for p in plans]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_()\-]+", name) for name in names)
    codepoints = [cp for p in plans for cp in p.codepoints]
    assert len(set(codepoints)) == len(codepoints)
    assert {"Latin", "Greek", "Cyrillic", "Hebrew", "Braille", "Ogham"} <= set(names)
    # output order: background then evaluation, alphabets by name within each part
    assert plans == background + evaluation
    assert [p.name for p in background] == sorted(p.name for p in background)


def test_prefix_of_catalogue_and_background_share():
    catalogue = alphabet_catalogue()
    assert len(catalogue) >= 50
    plans = plan_alphabets(GlyphDatasetConfig(alphabets=5, max_characters=4))
    assert {p.name for p in plans} == {entry[0] for entry in catalogue[:5]}
    assert sum(p.split == BACKGROUND for p in plans) == 3
    assert all(len(p.codepoints) == 4 for p in plans)


def test_layout_and_counts(small):
    root, config, summary = small
    assert sorted(p.name for p in root.iterdir()) == sorted([BACKGROUND, EVALUATION, MANIFEST_NAME])
    assert (len(summary.background), len(summary.evaluation)) == (2, 1)
    assert summary.characters == 6 and summary.images == 6 * 20
    indices = []
    for part, alphabets in ((BACKGROUND, summary.background), (EVALUATION, summary.evaluation)):
        assert sorted(p.name for p in (root / part).iterdir()) == sorted(alphabets)
        for alphabet, n_chars in sorted(alphabets.items()):
            chars = sorted(p.name for p in (root / part / alphabet).iterdir())
            assert chars == [f"character{i:02d}" for i in range(1, n_chars + 1)]
            for char in chars:
                files = sorted(p.name for p in (root / part / alphabet / char).iterdir())
                matches = [FILE_NAME.match(name) for name in files]
                assert all(matches), files
                assert [int(m.group(2)) for m in matches] == list(range(1, 21))
                assert len({m.group(1) for m in matches}) == 1
                indices.append(int(matches[0].group(1)))
                image = Image.open(root / part / alphabet / char / files[0])
                assert image.size == (105, 105) and image.mode == "1"
                ink = np.asarray(image.convert("L")) < 128
                assert 0.01 < ink.mean() < 0.5  # black strokes on a white page
    assert indices == list(range(1, 7))  # global 4-digit character index, in folder order
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["params"] == config.params()
    assert manifest["counts"]["images"] == 120


def test_same_seed_byte_identical_other_seed_differs(tmp_path):
    config = GlyphDatasetConfig(seed=3, alphabets=2, examples=3, max_characters=3)
    generate(tmp_path / "a", config, progress=False)
    generate(tmp_path / "b", config, progress=False, workers=2)  # worker count is irrelevant
    other = GlyphDatasetConfig(seed=4, alphabets=2, examples=3, max_characters=3)
    generate(tmp_path / "c", other, progress=False)
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert len(a) == 2 * 3 * 3 + 1 and a == b
    pngs_a, pngs_c = _pngs(tmp_path / "a"), _pngs(tmp_path / "c")
    assert pngs_a.keys() == pngs_c.keys()
    assert sum(pngs_a[k] != pngs_c[k] for k in pngs_a) == len(pngs_a)
    # a character's drawings do not depend on how many characters are generated
    fewer = GlyphDatasetConfig(seed=3, alphabets=2, examples=3, max_characters=1)
    generate(tmp_path / "d", fewer, progress=False)

    def by_character(pngs: dict[str, bytes]) -> dict[tuple[str, str], bytes]:
        return {(name.rsplit("/", 1)[0], name[-6:]): data for name, data in pngs.items()}

    first_characters = by_character(_pngs(tmp_path / "d"))
    assert len(first_characters) == 2 * 3
    assert first_characters.items() <= by_character(pngs_a).items()


def test_zip_members_equal_folder_files(tmp_path):
    folders = GlyphDatasetConfig(seed=1, alphabets=2, examples=2, max_characters=2)
    zipped = GlyphDatasetConfig(seed=1, alphabets=2, examples=2, max_characters=2, as_zip=True)
    generate(tmp_path / "folders", folders, progress=False)
    summary = generate(tmp_path / "zips", zipped, progress=False)
    generate(tmp_path / "zips2", zipped, progress=False)
    assert summary.as_zip
    expected = _pngs(tmp_path / "folders")
    found = {}
    for part in (BACKGROUND, EVALUATION):
        path = tmp_path / "zips" / f"{part}.zip"
        assert path.read_bytes() == (tmp_path / "zips2" / f"{part}.zip").read_bytes()
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            assert f"{part}/" in names  # folder entries, as in the original archives
            for name in names:
                assert name.startswith(f"{part}/")
                if name.endswith(".png"):
                    found[name] = archive.read(name)
    assert found == expected
    assert sorted(p.name for p in (tmp_path / "zips").iterdir()) == sorted(
        [f"{BACKGROUND}.zip", f"{EVALUATION}.zip", MANIFEST_NAME]
    )


def test_cache_skips_regeneration_and_overwrite_forces(tmp_path):
    config = GlyphDatasetConfig(seed=0, alphabets=2, examples=2, max_characters=2)
    root = tmp_path / "out"
    first = generate(root, config, progress=False)
    probe = next(root.rglob("*.png"))
    stamp, data = probe.stat().st_mtime_ns, probe.read_bytes()
    again = generate(root, config, progress=False)
    assert not first.cached and again.cached
    assert again.characters == first.characters and again.images == first.images
    assert probe.stat().st_mtime_ns == stamp
    assert "Up to date" in again.describe()
    forced = generate(root, config, progress=False, overwrite=True)
    assert not forced.cached and probe.read_bytes() == data
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_cli_prints_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["--output", str(out), "--alphabets", "2", "--examples", "2", "--max-characters", "1"]
    assert main([*args, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "1 background + 1 evaluation alphabets" in printed and str(out) in printed
    assert main([*args, "--quiet"]) == 0
    assert "Up to date" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--alphabets", "1"], "--alphabets"),
        (["--alphabets", "500"], "--alphabets"),
        (["--examples", "0"], "--examples"),
        (["--size", "8"], "--size"),
        (["--seed", "-1"], "--seed"),
        (["--max-characters", "0"], "--max-characters"),
        (["--alphabets", "two"], "--alphabets"),
    ],
)
def test_cli_rejects_bad_values(tmp_path, capsys, extra, needle):
    out = tmp_path / "never"
    assert main(["--output", str(out), "--quiet", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not out.exists()


def test_cli_refuses_occupied_output(tmp_path, capsys):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    base = ["--examples", "1", "--alphabets", "2", "--max-characters", "1", "--quiet"]
    assert main(["--output", str(foreign), *base]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(foreign) in err and "--overwrite" in err
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]

    ours = tmp_path / "ours"
    assert main(["--output", str(ours), *base]) == 0
    before = _files(ours)
    assert main(["--output", str(ours), *base, "--seed", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed=0->7" in err[0]
    assert _files(ours) == before

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(GlyphDatasetError, match="not a folder"):
        generate(a_file, GlyphDatasetConfig(alphabets=2, examples=1), progress=False)


def _one_nn_accuracy(pixels: dict[str, np.ndarray], episodes: int = 200) -> float:
    """Mean accuracy of 1-NN on 5-way 1-shot 5-query episodes within one alphabet."""
    rng = np.random.default_rng(0)
    names = sorted(pixels)
    accuracies = []
    for _ in range(episodes):
        data = pixels[names[rng.integers(len(names))]]
        classes = rng.choice(len(data), 5, replace=False)
        support, queries, labels = [], [], []
        for label, c in enumerate(classes):
            drawers = rng.choice(data.shape[1], 6, replace=False)
            support.append(data[c, drawers[0]])
            queries.extend(data[c, drawers[1:]])
            labels.extend([label] * 5)
        distances = ((np.stack(queries)[:, None] - np.stack(support)[None]) ** 2).sum(-1)
        accuracies.append(float((distances.argmin(1) == np.array(labels)).mean()))
    return float(np.mean(accuracies))


def test_nearest_neighbour_on_pixels_beats_chance(tmp_path):
    """5-way 1-shot episodes within one alphabet, 1-NN on 28x28 pixels: chance is 0.2."""
    config = GlyphDatasetConfig(seed=0, alphabets=6, examples=6)
    summary = generate(tmp_path / "nn", config, progress=False)
    pixels: dict[str, np.ndarray] = {}  # alphabet -> (characters, drawers, 784) ink
    for alphabet_dir in sorted((tmp_path / "nn").glob("images_*/*")):
        chars = []
        for char_dir in sorted(alphabet_dir.iterdir()):
            drawings = [
                1.0 - np.asarray(Image.open(f).convert("L").resize((28, 28), Image.BOX)) / 255.0
                for f in sorted(char_dir.iterdir())
            ]
            chars.append(np.stack(drawings).reshape(len(drawings), -1))
        pixels[alphabet_dir.name] = np.stack(chars)
    assert len(pixels) == 6 and sum(len(x) for x in pixels.values()) == summary.characters
    accuracy = _one_nn_accuracy(pixels)
    print(f"1-NN pixel accuracy, 5-way 1-shot, 200 episodes: {accuracy:.3f} (chance 0.2)")
    assert accuracy > 0.5


def test_converted_reference_polarity_is_as_learnable(tmp_path):
    """Converted by default the glyphs are stored as the reference stores Omniglot (inverted,
    RGB JPEG quality 75); 1-NN on the decoded records learns as well as on the original
    polarity's lossless records (the demo's learners read these records)."""
    import io

    from beam_pipelines.conversion import convert
    from beam_pipelines.sources.omniglot import OmniglotSource
    from episodes.records.dataset_spec import load_spec
    from episodes.records.record_reader import RecordReader
    from tests.conftest import make_local_runner

    config = GlyphDatasetConfig(seed=0, alphabets=6, examples=6)
    generate(tmp_path / "raw", config, progress=False)
    accuracy = {}
    for convention in ("meta-dataset", "original"):
        out = tmp_path / convention
        source = OmniglotSource(pixel_convention=convention, omniglot_valid_alphabets=1)
        convert(source, tmp_path / "raw", out, make_local_runner(1))
        spec, reader = load_spec(out), RecordReader(out)
        by_alphabet: dict[str, list[np.ndarray]] = {}
        for class_id in range(spec.num_classes):
            drawings = []
            for k in range(reader.num_records(class_id)):
                image = Image.open(io.BytesIO(reader.read_example(class_id, k)[0])).convert("L")
                value = np.asarray(image.resize((28, 28), Image.BOX)) / 255.0
                # Ink is white on black in the reference's polarity, black on white otherwise.
                drawings.append(value if convention == "meta-dataset" else 1.0 - value)
            alphabet = spec.hierarchy.superclass_names[spec.hierarchy.superclass_of[class_id]]
            by_alphabet.setdefault(alphabet, []).append(np.stack(drawings).reshape(6, -1))
        accuracy[convention] = _one_nn_accuracy({a: np.stack(c) for a, c in by_alphabet.items()})
    print(f"1-NN accuracy on converted records: {accuracy}")
    assert accuracy["meta-dataset"] > 0.5
    assert abs(accuracy["meta-dataset"] - accuracy["original"]) < 0.05
