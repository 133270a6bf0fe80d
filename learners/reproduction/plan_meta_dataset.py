"""Meta-Dataset's Table 1, top half: every learner trained on ILSVRC-2012 only and evaluated on
600 test episodes of each of the ten test sources (Triantafillou et al., sec. 5, Table 1).

Stages per method: the pre-training its recipe starts from (the k-NN-style baseline that learns
the ResNet-18, the four-layer convnet or the wide ResNet; sec. 5 'Pre-training'), its best
validation checkpoint, the method's own training from it (`--init-from`), that run's best
checkpoint, one evaluation per test source. k-NN trains from scratch. Methods sharing a
backbone share its pre-training stage in one --output. The recipe names are data here."""

from __future__ import annotations

from dataclasses import dataclass

from learners.reproduction.plan_parts import (
    TINY_MD_FINETUNE_STEPS,
    PlanRequest,
    PlanSpec,
    Row,
    checkpoint_stage,
    evaluation_stage,
    training_stage,
)
from learners.reproduction.published_numbers import published_number

__all__ = [
    "build",
    "CONVNET",
    "EPISODES",
    "Method",
    "METHODS",
    "NOTES",
    "PLAN",
    "Pretraining",
    "RESNET18",
    "TEST_SOURCES",
    "TRAIN_SOURCE",
    "WIDE_RESNET",
]

PLAN = "meta_dataset/table1"
TRAIN_SOURCE = "ilsvrc_2012"  # 'trained on ILSVRC-2012 only'
EPISODES = 600  # test episodes per source (sec. 5, Table 1 caption of Table 2)
# Table 1's rows: (converted source, the row's label in the paper)
TEST_SOURCES = (
    ("ilsvrc_2012", "ILSVRC"),
    ("omniglot", "Omniglot"),
    ("aircraft", "Aircraft"),
    ("cu_birds", "Birds"),
    ("dtd", "Textures"),
    ("quickdraw", "Quick Draw"),
    ("fungi", "Fungi"),
    ("vgg_flower", "VGG Flower"),
    ("traffic_sign", "Traffic Signs"),
    ("mscoco", "MSCOCO"),
)


@dataclass(frozen=True)
class Pretraining:
    recipe: str
    backbone: str


RESNET18 = Pretraining("meta_dataset/pretrain_resnet18", "resnet18")
CONVNET = Pretraining("meta_dataset/pretrain_convnet", "cnn4")
WIDE_RESNET = Pretraining("meta_dataset/pretrain_wide_resnet", "wrn16_2")


@dataclass(frozen=True)
class Method:
    column: str  # Table 1's column
    recipe: str
    backbone: str
    pretraining: Pretraining | None
    batches: bool = False  # trained on batches (the baselines) rather than episodes


METHODS: dict[str, Method] = {
    "knn": Method("k-NN", "meta_dataset/knn", "wrn16_2", None, batches=True),
    "finetune": Method("Finetune", "meta_dataset/finetune", "wrn16_2", WIDE_RESNET, batches=True),
    "matching": Method("MatchingNet", "meta_dataset/matching", "resnet18", RESNET18),
    "protonet": Method("ProtoNet", "meta_dataset/protonet", "resnet18", RESNET18),
    "maml": Method("fo-MAML", "meta_dataset/maml", "resnet18", RESNET18),
    "relation": Method("RelationNet", "meta_dataset/relation", "cnn4", CONVNET),
    "proto_maml": Method("fo-Proto-MAML", "meta_dataset/proto_maml", "resnet18", RESNET18),
}

NOTES = (
    "each learner starts from the pre-trained backbone of its recipe (the gin files' "
    "pretrained_*.gin); the paper treated starting from it or from scratch as a hyperparameter "
    "(sec. 5 'Pre-training')",
    "validation, and so the best checkpoint of every training stage, on the training source's "
    "valid split (ILSVRC-2012's, as the paper: sec. 5 'Validation')",
)


def build(request: PlanRequest) -> PlanSpec:
    """The stages and rows of Table 1 (top) for the requested methods."""
    spec = PlanSpec(
        plan=PLAN,
        title="Meta-Dataset, Table 1 (top): trained on ILSVRC-2012 only, 600 episodes per source",
        row_header=("Method", "Test source"),
        notes=list(NOTES),
    )
    source = request.train_source or TRAIN_SOURCE
    deviation = None
    if request.train_source and request.train_source != TRAIN_SOURCE:
        deviation = f"trained on {source}, not ILSVRC-2012 (--train-source)"
        spec.deviations.append(
            f"--train-source {source}: every training stage (pre-training included) reads "
            f"{source}'s train split and validates on its valid split instead of ILSVRC-2012's"
        )
    validation = [("--validation-dataset", source)]
    untrained = request.missing(source)
    for name in request.methods:
        method = METHODS[name]
        if untrained is not None:  # no training source: every row says so
            for test_source, row_label in TEST_SOURCES:
                published = published_number(PLAN, name, test_source)
                why = f"{untrained}, the training source"
                spec.rows.append(Row((method.column, row_label), published, None, why))
            continue
        start = None
        if method.pretraining is not None:
            pre = method.pretraining
            pretrain = spec.add(
                training_stage(
                    request,
                    f"pretrain-{pre.recipe.split('/')[-1].removeprefix('pretrain_')}-{source}",
                    pre.recipe,
                    source,
                    backbone=pre.backbone,
                    flags=validation,
                    batches=True,
                    about=f"pre-train the {pre.backbone} backbone ({pre.recipe}) on {source}",
                )
            )
            start = spec.add(checkpoint_stage(request, pretrain))
        train = spec.add(
            training_stage(
                request,
                f"train-{name}-{source}",
                method.recipe,
                source,
                backbone=method.backbone,
                flags=validation,
                start_from=start,
                batches=method.batches,
                about=f"train {method.column} ({method.recipe}) on {source}",
            )
        )
        chosen = spec.add(checkpoint_stage(request, train))
        for test_source, row_label in TEST_SOURCES:
            published = published_number(PLAN, name, test_source)
            missing = request.missing(test_source)
            if missing is not None:
                spec.rows.append(Row((method.column, row_label), published, None, missing))
                continue
            evaluation = spec.add(
                evaluation_stage(
                    request,
                    f"eval-{name}-{source}-on-{test_source}",
                    chosen,
                    test_source,
                    label=method.column,
                    episodes=EPISODES,
                    tiny_flags=TINY_MD_FINETUNE_STEPS if name == "finetune" else None,
                )
            )
            spec.rows.append(
                Row((method.column, row_label), published, evaluation.name, deviation=deviation)
            )
    return spec
