"""ATG's Figure 2: a Multiclass network trained on the train classes of tasksets of growing
divergence D, its 5-way 5-shot accuracy on 600 train, validation and test tasks at each D
(Arnold & Sha, sec. 5.2, supplementary A.2: 200 epochs, batches of 64, the best validation
epoch's weights; CNN4, or ResNet12 with DropBlock for the ImageNet-based sets, sec. 5.1).

The tasksets are the paper's published partitions (appendix Tables 6-11, shipped in
`episodes/records/published/atg/`), each first written with class names by `splits make --method
published`: CIFAR100's and EMNIST's class orders are known offline; the paper prints the others
as indices of learn2learn's (mini-, tiered-ImageNet) or scikit-learn's (LFW10) class order, which
the user gives as DATA/<dataset>.class_names.txt (one name a line, in that order; the names of
the converted copy). With `--train-source NAME` the
tasksets are made as the paper made them: class embeddings of a network pre-trained on all of
NAME's classes (`splits.embed`), then ATG splits at each D (`splits make --method atg`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from learners.reproduction.plan_parts import (
    PlanRequest,
    PlanSpec,
    Row,
    checkpoint_stage,
    evaluation_stage,
    training_stage,
)
from learners.reproduction.published_numbers import figure_without_numbers
from learners.reproduction.split_files import published_split_file, train_classes
from learners.reproduction.stages import Stage

__all__ = [
    "build",
    "CNN4",
    "Dataset",
    "DATASETS",
    "DIVERGENCES",
    "EMBEDDING_BACKBONE",
    "EVALUATED",
    "FRACTIONS",
    "NOTES",
    "PLAN",
    "RECIPE",
    "RESNET12",
    "TINY_DIVERGENCES",
    "TINY_EVALUATED",
    "VALIDATION_EPISODES",
]

PLAN = "atg/figure2"
RECIPE = "atg/multiclass"
DIVERGENCES = (0.04, 0.32, 0.64, 0.96)  # the published partitions (appendix A.6)
TINY_DIVERGENCES = (0.04, 0.96)
EPOCHS, BATCH = 200, 64  # supplementary A.2
WAYS, SHOTS, QUERY, EPISODES = 5, 5, 15, 600  # sec. 5.2, A.2 ('600 test tasks')
EVALUATED = ("train", "valid", "test")  # Figure 2 plots all three
TINY_EVALUATED = ("test",)  # tiny: the same command on one split (--split), to stay short
VALIDATION_EPISODES = 100  # ours per epoch: the paper does not say how many
FRACTIONS = (0.6, 0.2, 0.2)  # splits make --method atg default: floor(0.2 N) valid and test
EMBEDDING_BACKBONE = "cnn4"  # --train-source: splits.embed --pretrain (see NOTES)


@dataclass(frozen=True)
class Dataset:
    label: str
    source: str  # the converted source
    backbone: tuple[str, ...]  # learners.train flags (sec. 5.1)
    image_size: int
    images_per_class: int | None = None  # fixed by the dataset, else the converted copy's mean
    names_given: bool = False  # the class order of its printed indices comes from the user


CNN4 = ("--backbone", "cnn4")
RESNET12 = ("--backbone", "resnet12", "--dropblock")
DATASETS: dict[str, Dataset] = {
    "cifar100": Dataset("CIFAR100", "cifar100", CNN4, 32, 600),
    "mini_imagenet": Dataset("mini-ImageNet", "ilsvrc_2012", RESNET12, 84, 600, names_given=True),
    "tiered_imagenet": Dataset("tiered-ImageNet", "ilsvrc_2012", RESNET12, 84, names_given=True),
    "lfw10": Dataset("LFW10", "lfw", CNN4, 62, names_given=True),
    "emnist": Dataset("EMNIST", "emnist", CNN4, 28),
}

NOTES = (
    "Figure 2 prints no numbers: the paper column shows none; the text's claim (test accuracy "
    "falls as D grows) is set beside our slope of accuracy against D",
    "the learning rate: 'a tuned learning rate' (A.2) is not given; the recipe's default runs",
    f"validation: {VALIDATION_EPISODES} 5-way 5-shot episodes per epoch (the paper does not "
    "say how many)",
    "LFW10's 62x47 images are read square at 62 px",
)


def _r(divergence: float) -> str:
    return f"{divergence:g}"


def _flag_pairs(flags: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """('--backbone', 'cnn4', '--dropblock') -> [('--backbone', 'cnn4'), ('--dropblock', None)]."""
    pairs: list[tuple[str, str | None]] = []
    for token in flags:
        if token.startswith("--"):
            pairs.append((token, None))
        else:
            pairs[-1] = (pairs[-1][0], token)
    return pairs


def build(request: PlanRequest) -> PlanSpec:
    """The stages and rows of Figure 2 for the requested datasets (or the --train-source)."""
    spec = PlanSpec(
        plan=PLAN,
        title="ATG, Figure 2: Multiclass accuracy against the taskset divergence D",
        row_header=("Dataset", "D", "Split"),
        notes=list(NOTES),
        report_command="divergence",
        figure=figure_without_numbers(PLAN),
    )
    divergences = TINY_DIVERGENCES if request.tiny else DIVERGENCES
    if request.train_source:
        spec.deviations.append(
            f"--train-source {request.train_source}: tasksets made here from "
            f"{request.train_source}'s class embeddings ({EMBEDDING_BACKBONE} pre-trained on all "
            "its classes) instead of the paper's published partitions"
        )
        _generated(request, spec, request.train_source, divergences)
        return spec
    for key in request.benchmarks:
        dataset = DATASETS[key]
        missing = request.missing(dataset.source)
        names = request.data / f"{key}.class_names.txt"
        if missing is None and dataset.names_given and not names.is_file():
            missing = (
                f"not run: ATG prints {dataset.label}'s classes as indices of "
                f"{'scikit-learn' if key == 'lfw10' else 'learn2learn'}'s class order; write "
                f"those class names, one a line in that order, to {names}"
            )
        naming = ("--class-names", str(names)) if dataset.names_given else ()
        for divergence in divergences:
            name = f"{key}_D{_r(divergence)}"
            if missing is not None:
                for split in TINY_EVALUATED if request.tiny else EVALUATED:
                    spec.rows.append(
                        Row((dataset.label, _r(divergence), split), None, None, missing)
                    )
                continue
            named = spec.add(
                Stage(
                    name=f"split-atg-{name}",
                    kind="split",
                    command=(
                        "splits",
                        "make",
                        "--method",
                        "published",
                        "--name",
                        f"atg/{name}",
                        *naming,
                        "--quiet",
                        "--output",
                        str(request.out / f"split-atg-{name}" / "split.json"),
                    ),
                    outputs=("split.json",),
                    fresh=True,
                    about=f"ATG's published {dataset.label} partition at D={_r(divergence)}, named",
                )
            )
            classes = train_classes(published_split_file(f"atg/{name}"))
            _taskset(request, spec, dataset, key, dataset.source, divergence, named, classes)
    return spec


def _generated(request: PlanRequest, spec: PlanSpec, source: str, divergences) -> None:
    """--train-source: embeddings, ATG splits at every D, then each taskset's stages."""
    if request.missing(source):
        return
    embed_dir = request.out / f"embed-{source}"
    embed = spec.add(
        Stage(
            name=f"embed-{source}",
            kind="embed",
            command=(
                "splits.embed",
                "--dataset",
                request.dataset(source),
                "--pretrain",
                EMBEDDING_BACKBONE,
                *(("--pretrain-steps", "10", "--image-size", "28") if request.tiny else ()),
                "--seed",
                "0",
                "--no-progress",
                "--device",
                request.device,
                "--output",
                str(embed_dir / "embeddings.npz"),
            ),
            outputs=("embeddings.npz",),
            fresh=True,
            about=f"class embeddings of {source} ({EMBEDDING_BACKBONE} pre-trained on all classes)",
        )
    )
    split_dir = request.out / f"split-atg-{source}"
    splits = spec.add(
        Stage(
            name=f"split-atg-{source}",
            kind="split",
            command=(
                "splits",
                "make",
                "--method",
                "atg",
                "--embeddings",
                str(embed_dir / "embeddings.npz"),
                "--dataset",
                request.dataset(source),
                "--divergence",
                *(_r(d) for d in divergences),
                *(("--iterations", "1000", "--restarts", "1") if request.tiny else ()),
                "--seed",
                "0",
                "--quiet",
                "--output",
                str(split_dir),
            ),
            needs=(embed.name,),
            outputs=tuple(_atg_file(d) for d in divergences),
            fresh=True,
            about=f"ATG splits of {source} at D = {', '.join(_r(d) for d in divergences)}",
        )
    )
    facts = request.sources[source]
    classes = facts.classes - 2 * math.floor(FRACTIONS[1] * facts.classes)
    dataset = Dataset(source, source, CNN4, 28)
    for divergence in divergences:
        _taskset(request, spec, dataset, source, source, divergence, splits, classes)


def _taskset(
    request: PlanRequest,
    spec: PlanSpec,
    dataset: Dataset,
    key: str,
    source: str,
    divergence: float,
    split_stage: Stage,
    classes: int,
) -> None:
    """Train, pick and evaluate the Multiclass network of one taskset; its rows."""
    name = f"{key}_D{_r(divergence)}"
    split_file = str(
        request.out
        / split_stage.name
        / (split_stage.outputs[0] if len(split_stage.outputs) == 1 else _atg_file(divergence))
    )
    per_class = dataset.images_per_class or request.sources[source].mean_images_per_class
    per_epoch = max(1, math.ceil(classes * per_class / BATCH))
    episodes = [("--ways", str(WAYS)), ("--shots", str(SHOTS)), ("--query", str(QUERY))]
    train = spec.add(
        training_stage(
            request,
            f"train-atg-{name}",
            RECIPE,
            source,
            backbone=dataset.backbone[1],
            flags=[
                *_flag_pairs(dataset.backbone),
                ("--image-size", str(dataset.image_size)),
                ("--steps", str(EPOCHS * per_epoch)),
                ("--checkpoint-every", str(per_epoch)),
                ("--validation-episodes", str(VALIDATION_EPISODES)),
                *episodes,
            ],
            split_file=split_file,
            batches=True,
            needs=[split_stage],
            about=f"train Multiclass on the train classes of {name}",
        )
    )
    chosen = spec.add(checkpoint_stage(request, train))
    for split in TINY_EVALUATED if request.tiny else EVALUATED:
        evaluation = spec.add(
            evaluation_stage(
                request,
                f"eval-atg-{name}-{split}",
                chosen,
                source,
                label="Multiclass",
                episodes=EPISODES,
                flags=episodes,
                split=split,
                split_file=split_file,
            )
        )
        spec.rows.append(
            Row(
                (dataset.label, _r(divergence), split),
                None,
                evaluation.name,
                deviation=f"taskset of {source} made here" if request.train_source else None,
            )
        )


def _atg_file(divergence: float) -> str:
    return f"atg_symmetric_kl_R{_r(divergence)}_seed0.json"
