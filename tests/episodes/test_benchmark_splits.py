"""The benchmarks Dhillon et al. and ATG evaluate on, as published split files over the sources
this toolkit converts: mini-ImageNet (Ravi & Larochelle's 64/16/20 ILSVRC-2012 classes and the
600 images of each), tiered-ImageNet (Ren et al.'s 351/97/160 classes under 20/6/8 ILSVRC
categories) and CIFAR-FS (Bertinetto et al.'s 64/16/20 CIFAR-100 classes), next to FC100."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from episodes.hierarchy.wordnet import read_wordnet
from episodes.records.dataset_spec import Split, load_spec
from episodes.records.index_conventions import CIFAR100_FINE_NAMES
from episodes.records.published_splits import PUBLISHED_DIR, load_published
from episodes.records.split_file import SPLITS, read_split_file

BENCHMARKS = {  # published name: (source dataset, train / valid / test classes, paper)
    "mini_imagenet/ilsvrc_2012": ("ilsvrc_2012", (64, 16, 20), "Ravi & Larochelle 2017"),
    "tiered_imagenet/ilsvrc_2012": ("ilsvrc_2012", (351, 97, 160), "Ren et al. 2018"),
    "cifar_fs/cifar100": ("cifar100", (64, 16, 20), "Bertinetto et al. 2019"),
}


def _sizes(split) -> tuple[int, int, int]:
    sizes = split.sizes()
    return sizes["train"], sizes["valid"], sizes["test"]


@pytest.fixture(scope="module")
def ilsvrc_spec(reference_data):
    return load_spec(reference_data / "dataset_specs" / "ilsvrc_2012_dataset_spec.json")


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_files_load_with_the_papers_class_counts(name: str) -> None:
    dataset, counts, paper = BENCHMARKS[name]
    split = load_published(name)
    assert split.dataset == dataset and split.method == "published"
    assert _sizes(split) == counts
    # the one split-file parser (--split-file) reads the shipped file the same way
    assert _sizes(read_split_file(PUBLISHED_DIR / f"{name}.json")) == counts
    assert paper in split.source and " @ " in split.source  # repository @ commit, path


@pytest.mark.parametrize("name", ["mini_imagenet/ilsvrc_2012", "tiered_imagenet/ilsvrc_2012"])
def test_imagenet_benchmarks_name_ilsvrc_classes_and_give_the_reader_their_splits(
    name: str, ilsvrc_spec
) -> None:
    split = load_published(name)
    wnids = set(ilsvrc_spec.class_names)
    assert len(wnids) == 1000
    assert all(set(split.classes(s)) <= wnids for s in SPLITS)
    # what `--split-file` does to a converted ILSVRC-2012 (episodes.sampler_factory.load_dataset)
    spec = ilsvrc_spec.with_splits(split.train, split.valid, split.test, source=name)
    for part, count in zip((Split.TRAIN, Split.VALID, Split.TEST), _sizes(split)):
        assert len(spec.classes(part)) == count
    assert {spec.class_names[i] for i in spec.classes(Split.TEST)} == set(split.test)


def test_mini_imagenet_fixes_600_ilsvrc_training_images_per_class(
    ilsvrc_spec, reference_data
) -> None:
    split = load_published("mini_imagenet/ilsvrc_2012")
    images = split.parameters["images"]
    assert split.parameters["images_per_class"] == 600
    assert list(images) == [c for s in SPLITS for c in split.classes(s)]
    # the class's ILSVRC-2012 training images: the reference spec's count plus the duplicates
    # of CUB / Caltech images it leaves out (which mini-ImageNet's numbering still counts)
    count = dict(zip(ilsvrc_spec.class_names, ilsvrc_spec.images_per_class))
    dropped = Counter(
        line.split("/")[0]
        for path in reference_data.glob("ImageNet_*_duplicates.txt")
        for line in path.read_text().splitlines()
        if line.startswith("n")
    )
    assert sum(dropped.values()) > 0
    for wnid, numbers in images.items():
        assert len(numbers) == 600 and len(set(numbers)) == 600, wnid
        assert 1 <= min(numbers) and max(numbers) <= count[wnid] + dropped[wnid], wnid
    assert sum(map(len, images.values())) == 60000


def test_tiered_imagenet_classes_lie_under_their_categories() -> None:
    split = load_published("tiered_imagenet/ilsvrc_2012")
    supers = split.parameters["superclasses"]
    members = split.parameters["superclass_members"]
    assert [len(supers[s]) for s in SPLITS] == [20, 6, 8]
    assert len({c for s in SPLITS for c in supers[s]}) == 34 == len(members)
    for s in SPLITS:  # a split is exactly the classes of its categories
        assert sorted(c for cat in supers[s] for c in members[cat]) == sorted(split.classes(s))
    wordnet = read_wordnet()
    for category, classes in members.items():
        assert split.parameters["superclass_names"][category] == wordnet.words[category]
        for wnid in classes:
            assert category in wordnet.ancestors([wnid]), (category, wnid)


def test_cifar_fs_names_every_cifar100_fine_class_once() -> None:
    split = load_published("cifar_fs/cifar100")
    names = [c for s in SPLITS for c in split.classes(s)]
    assert sorted(names) == CIFAR100_FINE_NAMES
    ids = split.resolve(CIFAR100_FINE_NAMES)  # the converted cifar100's class order
    assert sorted(i for s in SPLITS for i in ids[s]) == list(range(100))
    assert {"baby", "bed", "whale", "worm"} <= set(split.test)
    assert json.loads((PUBLISHED_DIR / "cifar_fs" / "cifar100.json").read_text())["parameters"]
