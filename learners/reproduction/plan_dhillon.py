"""Dhillon et al.'s Table 1 rows for Mini-ImageNet and CIFAR-FS: a WRN-28-10 pre-trained by
cross-entropy on the benchmark's training classes, (train) or (train + val), then 1,000 5-way
1- and 5-shot episodes (15 queries) of its test classes with support-based initialization,
fine-tuning or transductive fine-tuning (sec. 4, A.1-A.3). No episodic training stage.

Pre-training length is the paper's: two cosine cycles of 40 and 80 epochs (A.2), an epoch being
floor(images / 256) batches of 600 images per class (A.1; fastai drops the last partial batch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from learners.reproduction.plan_parts import (
    TINY_FINETUNE_EPOCHS,
    PlanRequest,
    PlanSpec,
    Row,
    SourceFacts,
    checkpoint_stage,
    evaluation_stage,
    training_stage,
)
from learners.reproduction.published_numbers import published_number
from learners.reproduction.split_files import published_split_file
from learners.reproduction.stages import Stage

__all__ = [
    "BACKBONE",
    "BATCH",
    "Benchmark",
    "BENCHMARKS",
    "build",
    "DEFAULT_METHODS",
    "EPOCHS",
    "IMAGES_PER_CLASS",
    "METHODS",
    "NOTES",
    "PLAN",
    "RECIPE",
    "SETTINGS",
    "SHOTS",
    "steps",
    "VALIDATION_EPISODES",
]

PLAN = "dhillon/table1"
RECIPE = "dhillon/multiclass"
BACKBONE = "wrn28_10"
EPOCHS = 40 + 80  # A.2: two cycles of 40 and 80 epochs
BATCH = 256  # A.2
IMAGES_PER_CLASS = 600  # A.1, both benchmarks
WAYS, QUERY, EPISODES = 5, 15, 1000  # sec. 4 'Evaluation'
SHOTS = (1, 5)
SETTINGS = ("train", "train+val")
VALIDATION_EPISODES = 100  # ours: the paper validates on held-out images (see NOTES)


@dataclass(frozen=True)
class Benchmark:
    label: str  # Table 1's column group
    source: str  # the converted source its classes come from
    split_file: str  # under episodes/records/published/
    image_size: int  # few-shot-baseline utils.py get_params
    train_classes: int
    valid_classes: int


BENCHMARKS: dict[str, Benchmark] = {
    "mini_imagenet": Benchmark(
        "Mini-ImageNet", "ilsvrc_2012", "mini_imagenet/ilsvrc_2012", 84, 64, 16
    ),
    "cifar_fs": Benchmark("CIFAR-FS", "cifar100", "cifar_fs/cifar100", 32, 64, 16),
}
METHODS = {  # --inference of learners.evaluate -> Table 1's row
    "support_init": "Support-based initialization",
    "finetune": "Fine-tuning",
    "transductive": "Transductive fine-tuning",
}
DEFAULT_METHODS = ("transductive",)

NOTES = (
    "(train): the best checkpoint by 5-way 1-shot validation episodes of the valid classes "
    f"({VALIDATION_EPISODES} per epoch); the authors keep the best epoch by the accuracy on "
    "held-out images of the training classes (few-shot-baseline pretrain.py, SaveModelCallback; "
    "learners.train --validation held-out, the recipe's, which needs a count the authors do not "
    "state)",
    "(train + val): no class is left to validate on, so the last checkpoint (the end of the "
    "second cosine cycle) is evaluated",
    "Mini-ImageNet: the reader draws from all of a class's ILSVRC-2012 training images, not only "
    'the 600 the benchmark lists (docs/splits.md, "Splits")',
    "fp16 and 8-GPU distributed pre-training (A.2) are left to the user: they change speed, "
    "not the recipe",
)


def steps(images: int) -> tuple[int, int]:
    """(training steps, steps per epoch) of EPOCHS epochs of floor(images / BATCH) batches."""
    per_epoch = max(1, images // BATCH)
    return EPOCHS * per_epoch, per_epoch


def _train_images(benchmark: Benchmark, setting: str, facts: SourceFacts | None) -> int:
    """Images pre-trained on: the paper's counts, or those of a --train-source's splits."""
    if facts is None:
        classes = benchmark.train_classes + (benchmark.valid_classes if setting != "train" else 0)
        return classes * IMAGES_PER_CLASS
    images = facts.split_images.get("train", 0)
    return images + (facts.split_images.get("valid", 0) if setting != "train" else 0)


def _train_and_valid_split(request: PlanRequest, name: str, source: str, split: str | None):
    """The in-process stage writing the (train + val) split file."""
    given = ("--split-file", split) if split else ("--dataset", request.dataset(source))
    return Stage(
        name=name,
        kind="split",
        command=(
            "train-and-valid-split",
            *given,
            "--output",
            str(request.out / name / "split.json"),
        ),
        outputs=("split.json",),
        in_process=True,
        about=f"the (train + val) split of {source}: training and validation classes together",
    )


def build(request: PlanRequest) -> PlanSpec:
    """The stages and rows of the requested benchmarks, settings and inferences."""
    spec = PlanSpec(
        plan=PLAN,
        title="Dhillon et al., Table 1: WRN-28-10, 5-way, 1,000 episodes of 15 queries",
        row_header=("Method", "Benchmark", "Pre-trained on", "Shots"),
        notes=list(NOTES),
    )
    if request.train_source:
        spec.deviations.append(
            f"--train-source {request.train_source}: each benchmark's pre-training and test "
            f"episodes use {request.train_source}'s own train / valid / test classes"
        )
    for key in request.benchmarks:
        benchmark = BENCHMARKS[key]
        source = request.train_source or benchmark.source
        tag = request.train_source or key
        deviation = (
            f"trained and tested on {source}, not {benchmark.label} (--train-source)"
            if request.train_source
            else None
        )
        missing = request.missing(source)
        split = None if request.train_source else str(published_split_file(benchmark.split_file))
        for setting in SETTINGS:
            checkpoint = None
            if missing is None:
                checkpoint = _pretraining(request, spec, benchmark, source, tag, setting, split)
            for method in request.methods:
                for shots in SHOTS:
                    cells = (METHODS[method], benchmark.label, setting, str(shots))
                    published = published_number(PLAN, method, f"{key}/{setting}/{shots}shot")
                    if checkpoint is None:
                        spec.rows.append(Row(cells, published, None, missing))
                        continue
                    evaluation = spec.add(
                        evaluation_stage(
                            request,
                            f"eval-{method}-{tag}-{_setting_tag(setting)}-{shots}shot",
                            checkpoint,
                            source,
                            label=f"{METHODS[method]} ({setting}) {shots}-shot",
                            episodes=EPISODES,
                            split_file=split,
                            flags=[
                                ("--ways", str(WAYS)),
                                ("--shots", str(shots)),
                                ("--query", str(QUERY)),
                                ("--inference", method),
                            ],
                            tiny_flags=TINY_FINETUNE_EPOCHS if method != "support_init" else None,
                        )
                    )
                    spec.rows.append(Row(cells, published, evaluation.name, deviation=deviation))
    return spec


def _setting_tag(setting: str) -> str:
    return setting.replace("+", "-")


def _pretraining(
    request: PlanRequest,
    spec: PlanSpec,
    benchmark: Benchmark,
    source: str,
    tag: str,
    setting: str,
    split: str | None,
) -> Stage:
    """Add the pre-training of one benchmark and setting; its checkpoint stage."""
    validated = setting == "train"
    needs = []
    split_file = split
    if not validated:
        merge = spec.add(_train_and_valid_split(request, f"split-{tag}-train-val", source, split))
        needs.append(merge)
        split_file = str(Path(merge.command[merge.command.index("--output") + 1]))
    facts = request.sources.get(source) if request.train_source else None
    total, per_epoch = steps(_train_images(benchmark, setting, facts))
    flags = [("--image-size", str(benchmark.image_size)), ("--steps", str(total))]
    if validated:
        flags += [
            ("--checkpoint-every", str(per_epoch)),
            ("--validation-episodes", str(VALIDATION_EPISODES)),
            ("--ways", str(WAYS)),
            ("--shots", "1"),
            ("--query", str(QUERY)),
        ]
    else:
        flags += [("--checkpoint-every", str(per_epoch)), ("--validation-episodes", "0")]
    # few-shot validation in place of the recipe's held-out images (see NOTES); the length in
    # steps from the paper's image counts in place of the recipe's --epochs over the copy's
    flags.append(("--validation", "few-shot"))
    train = spec.add(
        training_stage(
            request,
            f"pretrain-dhillon-{tag}-{_setting_tag(setting)}",
            RECIPE,
            source,
            backbone=BACKBONE,
            flags=flags,
            split_file=split_file,
            batches=True,
            validated=validated,
            needs=needs,
            about=f"pre-train the WRN-28-10 on {source} ({setting})",
        )
    )
    return spec.add(checkpoint_stage(request, train, validated=validated))
