"""What every plan is made of: the request (data, output, scale, choices), the facts of the
converted datasets found under `--data`, the report rows, and the builders of the three stage
kinds every paper runs (train, pick the checkpoint, evaluate) as command lines of
`learners.train` / `learners.evaluate`.

`--scale tiny` keeps the stages and flags of the plan and shrinks how long each runs (steps,
validation and evaluation episodes, backbone width, image size, queries; ATG: two divergences,
the test split), so a plan runs end to end on the embedded glyph dataset in a minute or two;
its numbers say nothing about the paper's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from learners.reproduction.published_numbers import FigureWithoutNumbers, PublishedNumber
from learners.reproduction.stages import Stage

__all__ = [
    "checkpoint_file",
    "checkpoint_path",
    "checkpoint_stage",
    "evaluation_stage",
    "FULL",
    "merged_flags",
    "PlanRequest",
    "PlanSpec",
    "Row",
    "SCALES",
    "SourceFacts",
    "TINY",
    "TINY_BATCH",
    "TINY_EPISODES",
    "TINY_FINETUNE_EPOCHS",
    "TINY_MD_FINETUNE_STEPS",
    "TINY_QUERY",
    "TINY_TRAINING",
    "TINY_WIDTH",
    "TINY_WIDTH_ANY",
    "training_stage",
]

FULL = "full"
TINY = "tiny"
SCALES = (FULL, TINY)

# --scale tiny: a few steps and episodes of everything (flag -> value, replacing the plan's).
TINY_TRAINING = {
    "--steps": "6",
    "--checkpoint-every": "3",
    "--validation-episodes": "3",
    "--image-size": "28",
}
TINY_BATCH = {"--batch-size": "16"}  # methods trained on batches (pre-training, baselines)
TINY_WIDTH = {"wrn28_10": "0.05"}  # --width of a backbone at tiny scale (else TINY_WIDTH_ANY)
TINY_WIDTH_ANY = "0.25"
TINY_EPISODES = 4  # evaluation episodes
TINY_QUERY = "1"  # queries per class where a plan fixes them (5 shots + 1 fit 6 drawers)
TINY_FINETUNE_EPOCHS = {"--finetune-epochs": "2"}  # Dhillon's fine-tuning inferences
TINY_MD_FINETUNE_STEPS = {"--md-finetune-steps": "2"}  # Meta-Dataset's Finetune


@dataclass(frozen=True)
class SourceFacts:
    """A converted dataset found under --data: its name and images per split of its spec."""

    name: str
    classes: int
    images: int
    split_images: Mapping[str, int] = field(default_factory=dict)

    @property
    def mean_images_per_class(self) -> float:
        return self.images / self.classes if self.classes else 0.0


@dataclass(frozen=True)
class PlanRequest:
    """What the user asked for, paths absolute."""

    plan: str
    data: Path
    out: Path
    methods: tuple[str, ...]
    benchmarks: tuple[str, ...]
    train_source: str | None
    scale: str
    device: str
    sources: Mapping[str, SourceFacts]  # the converted datasets under data

    @property
    def tiny(self) -> bool:
        return self.scale == TINY

    def dataset(self, source: str) -> str:
        return str(self.data / source)

    def missing(self, source: str) -> str | None:
        """Why `source` cannot be read from --data, or None when it is there."""
        if source in self.sources:
            return None
        return (
            f"not run: no converted {source} in --data (python -m beam_pipelines.convert "
            f"--source {source} --input RAW --output {self.data / source})"
        )


@dataclass(frozen=True)
class Row:
    """One line of the report: the paper's number (if it prints one) beside ours."""

    cells: tuple[str, ...]  # the row's labels, under PlanSpec.row_header
    published: PublishedNumber | None
    evaluation: str | None  # the evaluate stage giving ours (None: cannot run, see missing)
    missing: str | None = None
    deviation: str | None = None


@dataclass
class PlanSpec:
    """A plan made concrete for one request: its stages in order, its report rows and what in
    it differs from the paper (fixed `notes`, and `deviations` the user chose)."""

    plan: str
    title: str
    row_header: tuple[str, ...]
    stages: list[Stage] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    report_command: str = "ranks"  # the learners.report sub-command over our evaluations
    figure: FigureWithoutNumbers | None = None

    def add(self, stage: Stage) -> Stage:
        """Add `stage` once: plans share stages (one pre-training for several methods)."""
        for known in self.stages:
            if known.name == stage.name:
                if known != stage:
                    raise ValueError(f"two different stages named {stage.name}")
                return known
        self.stages.append(stage)
        return stage

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


def merged_flags(*groups: Mapping[str, str | None] | Sequence[tuple[str, str | None]]) -> list[str]:
    """Flags of several groups, a later group's value replacing an earlier one's (in place);
    a value of None is a flag without a value."""
    values: dict[str, str | None] = {}
    for group in groups:
        items = group.items() if isinstance(group, Mapping) else group
        for flag, value in items:
            values[flag] = value
    return [token for flag, value in values.items() for token in (flag, value) if token is not None]


def _run_folder(request: PlanRequest, name: str) -> Path:
    return request.out / name / "run"


def training_stage(
    request: PlanRequest,
    name: str,
    recipe: str,
    source: str,
    *,
    backbone: str,
    flags: Sequence[tuple[str, str | None]] = (),
    split_file: str | None = None,
    start_from: Stage | None = None,
    batches: bool = False,
    validated: bool = True,
    needs: Sequence[Stage] = (),
    about: str = "",
) -> Stage:
    """`learners.train --recipe RECIPE` on `source`, in OUT/NAME/run; `start_from` is the
    checkpoint stage whose checkpoint starts the backbone (--init-from)."""
    given: list[tuple[str, str | None]] = [("--dataset", request.dataset(source))]
    if split_file is not None:
        given.append(("--split-file", split_file))
    if start_from is not None:
        given.append(("--init-from", checkpoint_path(start_from)))
    given.extend(flags)
    tiny: dict[str, str | None] = {}
    if request.tiny:
        tiny.update(TINY_TRAINING)
        tiny["--width"] = TINY_WIDTH.get(backbone, TINY_WIDTH_ANY)
        if batches:
            tiny.update(TINY_BATCH)
        if any(flag == "--query" for flag, _ in flags):
            tiny["--query"] = TINY_QUERY
        if not validated:
            tiny["--validation-episodes"] = "0"
    command = [
        "learners.train",
        "--recipe",
        recipe,
        *merged_flags(given, tiny),
        "--device",
        request.device,
        "--no-progress",
        "--output",
        str(_run_folder(request, name)),
    ]
    outputs = ["run/config.json", "run/checkpoints/last.pt"]
    if validated:
        outputs.append("run/checkpoints/best.pt")
    return Stage(
        name=name,
        kind="train",
        command=tuple(command),
        needs=tuple(s.name for s in (*needs, *([start_from] if start_from else []))),
        outputs=tuple(outputs),
        about=about or f"train {recipe} on {source}",
    )


def checkpoint_stage(request: PlanRequest, training: Stage, *, validated: bool = True) -> Stage:
    """Pick the training's best-validation checkpoint (or its last one, when not validated),
    checked against its validation log; later stages start from or evaluate that file."""
    return Stage(
        name="best-" + training.name.removeprefix("train-").removeprefix("pretrain-"),
        kind="best",
        command=(
            "pick-checkpoint",
            "--run",
            str(_run_folder(request, training.name)),
            "--choose",
            "best" if validated else "last",
        ),
        needs=(training.name,),
        in_process=True,
        about=f"the {'best-validation' if validated else 'last'} checkpoint of {training.name}",
    )


def _value(stage: Stage, flag: str) -> str:
    return stage.command[stage.command.index(flag) + 1]


def checkpoint_file(checkpoint: Stage) -> str:
    """best.pt or last.pt: the file a checkpoint stage picks."""
    return f"{_value(checkpoint, '--choose')}.pt"


def checkpoint_path(checkpoint: Stage) -> str:
    """The checkpoint file a checkpoint stage picks, known before it runs."""
    return str(Path(_value(checkpoint, "--run")) / "checkpoints" / checkpoint_file(checkpoint))


def evaluation_stage(
    request: PlanRequest,
    name: str,
    checkpoint: Stage,
    source: str,
    *,
    label: str,
    episodes: int,
    flags: Sequence[tuple[str, str | None]] = (),
    split: str = "test",
    split_file: str | None = None,
    tiny_flags: Mapping[str, str] | None = None,
    needs: Sequence[Stage] = (),
) -> Stage:
    """`learners.evaluate` of the checkpoint `checkpoint` picked, on `source`'s `split`, in
    OUT/NAME/eval (summary.json, episodes.csv, classes.csv); `tiny_flags` shorten its episode
    inference at tiny scale."""
    given: list[tuple[str, str | None]] = [
        ("--run", _value(checkpoint, "--run")),
        ("--checkpoint", checkpoint_file(checkpoint).removesuffix(".pt")),
        ("--split", split),
        ("--episodes", str(TINY_EPISODES if request.tiny else episodes)),
        ("--dataset", request.dataset(source)),
    ]
    if split_file is not None:
        given.append(("--split-file", split_file))
    given.extend(flags)
    tiny: dict[str, str | None] = {}
    if request.tiny:
        if any(flag == "--query" for flag, _ in flags):
            tiny["--query"] = TINY_QUERY
        tiny.update(tiny_flags or {})
    command = [
        "learners.evaluate",
        *merged_flags(given, tiny),
        "--label",
        label,
        "--no-hardness",
        "--device",
        request.device,
        "--no-progress",
        "--output",
        str(request.out / name / "eval"),
    ]
    return Stage(
        name=name,
        kind="evaluate",
        command=tuple(command),
        needs=tuple(s.name for s in (checkpoint, *needs)),
        outputs=("eval/summary.json", "eval/episodes.csv"),
        episodes=TINY_EPISODES if request.tiny else episodes,
        about=f"evaluate {label} on {source} ({split})",
    )
