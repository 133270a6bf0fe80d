"""The embedded glyph dataset: Omniglot layout, counts, determinism, cache, errors, learnability."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from beam_pipelines.glyph_dataset import GlyphDatasetConfig, GlyphDatasetError, generate
from beam_pipelines.glyph_dataset.alphabet_plan import plan_alphabets
from beam_pipelines.glyph_dataset.cli import main
from beam_pipelines.glyph_dataset.config import BACKGROUND, EVALUATION
from beam_pipelines.glyph_dataset.glyph_selection import alphabet_catalogue
from beam_pipelines.glyph_dataset.manifest import MANIFEST_NAME
from beam_pipelines.glyph_dataset.script_groups import MAX_ALPHABET_SIZE, MIN_ALPHABET_SIZE
from tests.fixtures.paths import REPO

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


# Recorded once with the single-module generator (before it became a package): the SHA-256 of
# every file of two small configurations. The split into modules must not change one byte.
# The digests hold for the library versions and fonts below (GENERATOR.json's "environment");
# re-record only when requirements.lock changes them.
RECORDED_ENVIRONMENT = {
    "pillow": "12.3.0",
    "freetype": "2.14.3",
    "numpy": "2.4.6",
    "scipy": "1.17.1",
    "zlib": "1.2.13",
    "unicode": "14.0.0",
    "fonts": {
        "DejaVuSans.ttf": "3fdf69cabf06049e",
        "DejaVuSerif.ttf": "107244956e9962b9",
        "DejaVuSansMono.ttf": "602ec86b8948cfcd",
        "STIXGeneral.ttf": "167378031e2dddc6",
        "DejaVuSans-Bold.ttf": "b184b89e3c1075f2",
        "DejaVuSerif-Bold.ttf": "c3753f2ed6bc673f",
        "DejaVuSansMono-Bold.ttf": "baada9a5172fe208",
        "STIXGeneralBol.ttf": "e8533dc7083fa346",
    },
}
RECORDED_CATALOGUE_SHA256 = "475ecbb8a43b7898f1aee0584b87b0c9f6d715e33a17a238f67cdeb2c6e1fb52"
FOLDERS_CONFIG = GlyphDatasetConfig(seed=3, alphabets=3, examples=3, max_characters=2)
FOLDERS_SHA256 = {
    "GENERATOR.json": "28ced050a0ceb8d6c9a696e1003485f2685027806b8521db5ff4659d2bab2df5",
    "images_background/Latin/character01/0001_01.png": (
        "1de4ec4bbd720ebe85f9bcca6fbd170f2851efa98d5189983caffc4c0212621a"
    ),
    "images_background/Latin/character01/0001_02.png": (
        "bd75815e010b218f5a804578998cb5d740456081b65fc6477953678ce32537df"
    ),
    "images_background/Latin/character01/0001_03.png": (
        "f2404030c0f99d3f02f3246c019d253044b588b2073fd9a6e44c4320b9529fbd"
    ),
    "images_background/Latin/character02/0002_01.png": (
        "688b9b5f3ba993df42d2af91bd11cd9031c23c50db0e498d1395278296b50a3c"
    ),
    "images_background/Latin/character02/0002_02.png": (
        "686f9a2d80c5752453dc161e02fa2e13757f0506008242f886367257ea07cbff"
    ),
    "images_background/Latin/character02/0002_03.png": (
        "3527157708d75e303be8b192459bda70f9b3ab19a7119bb10a57907273f18dec"
    ),
    "images_background/Latin_Minuscule/character01/0003_01.png": (
        "1592d44717fb814a8b3fe132aa84dee7cbe3fb5174125a842d0225e6bd4054da"
    ),
    "images_background/Latin_Minuscule/character01/0003_02.png": (
        "e141b1af4164aa1f1b97707ce4555b0ee8a69400dcf38ba0e0eb4feaaeeec7db"
    ),
    "images_background/Latin_Minuscule/character01/0003_03.png": (
        "6c977b9822fcf419ab2142abc12e3c6d5ae7a430619f9f558bf1c8496cc8c394"
    ),
    "images_background/Latin_Minuscule/character02/0004_01.png": (
        "6bee72b19970f13aba0ccdeb9a4ae32cbc0127c9e07322768c6b8dfe57ccf461"
    ),
    "images_background/Latin_Minuscule/character02/0004_02.png": (
        "a148187257076b89ac93855f39e1f943208e73ac23fff6ebaa7b3dacaa113ccd"
    ),
    "images_background/Latin_Minuscule/character02/0004_03.png": (
        "6ab31852c1b0f4a85dde185c2639cd599a3956c56be963e5c404a801fcfd1979"
    ),
    "images_evaluation/Greek/character01/0005_01.png": (
        "91699faeb82f241a50e46b894e63988595685965ae5f7d58c751b2dc9b0c4f75"
    ),
    "images_evaluation/Greek/character01/0005_02.png": (
        "402e6cb7da5fa39b6e4d1f7af84b1c9cefd94c9234477b7b3a9385756355a782"
    ),
    "images_evaluation/Greek/character01/0005_03.png": (
        "3fd52a63ccaefe5a83f1709a65479accc9d9508bd00d294f9000f63a1832fe44"
    ),
    "images_evaluation/Greek/character02/0006_01.png": (
        "d47c1c9222d3c27c494148f9c457ad427ed1502202e9ae772e7c63b0e7821fca"
    ),
    "images_evaluation/Greek/character02/0006_02.png": (
        "ef7768339b6f8b820037dd54cfa1441fe370f9770a4a69ae6b25c3460dd64e7f"
    ),
    "images_evaluation/Greek/character02/0006_03.png": (
        "f449fa910840e26d2e285181f4dc996977cdf608e870fbf9d9c40e63593779a0"
    ),
}
# 22 alphabets reach the STIX-only (Fraktur) and sans-only (Georgian) groups.
ZIPS_CONFIG = GlyphDatasetConfig(
    seed=1, alphabets=22, examples=2, max_characters=1, size=64, as_zip=True
)
ZIPS_SHA256 = {
    "GENERATOR.json": "b863cc13d62159b8ee9801ffc6585926f69103c3a6d82c4292e4e54e98872da5",
    "images_background.zip": ("9edbe409e11b4591e206c9a9f4d8525315273519add9a9be3592596e8971edba"),
    "images_evaluation.zip": ("02a9ba0b1beba8c053ee539d58602abfd6e05991987f9cd010a2a0f72f8aed5c"),
}


def _sha256s(root: Path) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in _files(root).items()}


@pytest.mark.parametrize(
    ("config", "expected"), [(FOLDERS_CONFIG, FOLDERS_SHA256), (ZIPS_CONFIG, ZIPS_SHA256)]
)
def test_output_bytes_equal_the_recorded_digests(tmp_path, config, expected):
    """Generated twice (1 and 2 worker processes): every file equals the recorded SHA-256."""
    generate(tmp_path / "one", config, progress=False, workers=1)
    generate(tmp_path / "two", config, progress=False, workers=2)
    environment = json.loads((tmp_path / "one" / MANIFEST_NAME).read_text())["environment"]
    assert environment == RECORDED_ENVIRONMENT, "other library versions: re-record the digests"
    one, two = _sha256s(tmp_path / "one"), _sha256s(tmp_path / "two")
    assert one == two
    changed = sorted(
        name for name in expected.keys() | one.keys() if one.get(name) != expected.get(name)
    )
    assert not changed, f"bytes differ from the recorded generator output: {changed}"
    digest = hashlib.sha256(repr(alphabet_catalogue()).encode()).hexdigest()
    assert digest == RECORDED_CATALOGUE_SHA256, "the catalogue of alphabets changed"


# numpy, Pillow, matplotlib's fonts (found on disk; fontTools, matplotlib's own dependency, reads
# their cmaps) and scipy.ndimage for the warp and blur (its version is in the cache key).
GLYPH_IMPORTS = {"numpy", "PIL", "matplotlib", "fontTools", "scipy"}


def test_the_package_imports_only_its_libraries_and_episodes_util():
    import ast

    package = REPO / "beam_pipelines" / "glyph_dataset"
    found = set()
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
    outside = {
        name
        for name in found
        if name.split(".")[0] not in sys.stdlib_module_names | GLYPH_IMPORTS
        and not name.startswith(("episodes.util.", "beam_pipelines.glyph_dataset"))
    }
    assert not outside, f"beam_pipelines/glyph_dataset imports {sorted(outside)}"
    assert "episodes.util.progress_lines" in found  # progress in the toolkit's one format


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


@pytest.mark.slow
def test_python_m_package_and_its_old_name_write_the_same_bytes(tmp_path):
    """`python -m beam_pipelines.glyph_dataset` runs the package's __main__ (spawned workers too);
    the old `python -m episodes.glyph_dataset` still runs it, with a one-line note."""
    args = ["--alphabets", "2", "--examples", "2", "--max-characters", "2", "--quiet"]
    runs = {}
    for module in ("beam_pipelines.glyph_dataset", "episodes.glyph_dataset"):
        out = tmp_path / module
        command = [sys.executable, "-m", module, "--output", str(out), *args, "--workers", "2"]
        runs[module] = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        assert runs[module].returncode == 0, runs[module].stderr
        assert "Generated in" in runs[module].stdout
    assert runs["beam_pipelines.glyph_dataset"].stderr == ""
    assert runs["episodes.glyph_dataset"].stderr.startswith(
        "note: python -m episodes.glyph_dataset is now python -m beam_pipelines.glyph_dataset; "
        "the old name goes in version 0.3.0"
    )
    assert _files(tmp_path / "beam_pipelines.glyph_dataset") == _files(
        tmp_path / "episodes.glyph_dataset"
    )
    bad = [sys.executable, "-m", "beam_pipelines.glyph_dataset", "--output", str(tmp_path / "x")]
    failed = subprocess.run([*bad, "--image-size", "8"], capture_output=True, text=True, cwd=REPO)
    assert failed.returncode == 2 and failed.stderr == (
        "error: --image-size must be between 28 and 512 pixels, got 8\n"
    )


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--alphabets", "1"], "--alphabets"),
        (["--alphabets", "500"], "--alphabets"),
        (["--examples", "0"], "--examples"),
        (["--image-size", "8"], "--image-size"),
        (["--seed", "-1"], "--seed"),
        (["--max-characters", "0"], "--max-characters"),
        (["--alphabets", "two"], "--alphabets"),
    ],
)
def test_cli_rejects_bad_values(tmp_path, capsys, extra, needle):
    out = tmp_path / "never"
    try:
        code = main(["--output", str(out), "--quiet", *extra])
    except SystemExit as usage:  # a usage error (not a number): the parser's one line
        code = usage.code
    assert code == 2
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_converted_reference_polarity_is_as_learnable(tmp_path):
    """Converted by default the glyphs are stored as the reference stores Omniglot (inverted,
    RGB JPEG quality 75); 1-NN on the decoded records learns as well as on the original
    polarity's lossless records (the demo's learners read these records)."""
    import io

    from beam_pipelines.conversion.pipeline import convert
    from beam_pipelines.sources.omniglot import OmniglotSource
    from episodes.records.dataset_spec import load_spec
    from episodes.records.record_reader import RecordReader
    from tests.fixtures.local_runner import make_local_runner

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
