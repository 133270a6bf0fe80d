"""The published numbers a reproduction is compared with, typed from the papers in
`shared/papers/` (one entry per number, each citing its table, row and column).

Meta-Dataset (Triantafillou et al.): Table 1, top half (trained on ILSVRC-2012 only), with the
95% confidence intervals Table 2(a) prints beside the same numbers. Dhillon et al.: Table 1, the
WRN-28-10 rows of support-based initialization, fine-tuning and transductive fine-tuning, (train)
and (train + val), Mini-ImageNet and CIFAR-FS, 1- and 5-shot (5-way, 15 queries, 1,000 episodes).
ATG (Arnold & Sha): Figure 2 is a plot; the text gives no number of it (`FIGURES_WITHOUT_NUMBERS`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ATG",
    "DHILLON",
    "figure_without_numbers",
    "FIGURES_WITHOUT_NUMBERS",
    "FigureWithoutNumbers",
    "META_DATASET",
    "PUBLISHED",
    "published_number",
    "PublishedNumber",
]

META_DATASET = "Triantafillou et al., Meta-Dataset (ICLR 2020)"
DHILLON = "Dhillon et al., A Baseline for Few-Shot Image Classification (ICLR 2020)"
ATG = "Arnold & Sha, Embedding Adaptation is Still Needed for Few-Shot Learning (ATG)"


@dataclass(frozen=True)
class PublishedNumber:
    """One accuracy (%) a paper prints, with its 95% CI half-width when printed, and where."""

    plan: str  # the reproduction plan it belongs to
    method: str  # the plan's method name (e.g. protonet, transductive)
    target: str  # the plan's row key (a test source, or benchmark/setting/shots)
    paper: str
    table: str
    row: str  # the row label as printed
    column: str  # the column label as printed
    accuracy: float
    ci95: float | None

    def citation(self) -> str:
        """'PAPER, TABLE, row "ROW", column "COLUMN"'."""
        return f'{self.paper}, {self.table}, row "{self.row}", column "{self.column}"'


@dataclass(frozen=True)
class FigureWithoutNumbers:
    """A published figure a plan reproduces whose numbers the paper's text does not give."""

    plan: str
    paper: str
    figure: str
    what_it_shows: str
    stated_in_text: str  # the claim the text makes about it, the only thing to compare with


def _md(method: str, source: str, row: str, column: str, accuracy: float, ci95: float):
    return PublishedNumber(
        plan="meta_dataset/table1",
        method=method,
        target=source,
        paper=META_DATASET,
        table="Table 1 (top: trained on ILSVRC-2012 only; the +- from Table 2(a))",
        row=row,
        column=column,
        accuracy=accuracy,
        ci95=ci95,
    )


def _dh(
    method: str,
    benchmark: str,
    setting: str,
    shots: int,
    row: str,
    column: str,
    accuracy: float,
    ci95: float,
):
    return PublishedNumber(
        plan="dhillon/table1",
        method=method,
        target=f"{benchmark}/{setting}/{shots}shot",
        paper=DHILLON,
        table="Table 1 (5-way, WRN-28-10)",
        row=row,
        column=column,
        accuracy=accuracy,
        ci95=ci95,
    )


PUBLISHED: tuple[PublishedNumber, ...] = (
    # column k-NN
    _md("knn", "ilsvrc_2012", "ILSVRC", "k-NN", 41.03, 1.01),
    _md("knn", "omniglot", "Omniglot", "k-NN", 37.07, 1.15),
    _md("knn", "aircraft", "Aircraft", "k-NN", 46.81, 0.89),
    _md("knn", "cu_birds", "Birds", "k-NN", 50.13, 1.00),
    _md("knn", "dtd", "Textures", "k-NN", 66.36, 0.75),
    _md("knn", "quickdraw", "Quick Draw", "k-NN", 32.06, 1.08),
    _md("knn", "fungi", "Fungi", "k-NN", 36.16, 1.02),
    _md("knn", "vgg_flower", "VGG Flower", "k-NN", 83.10, 0.68),
    _md("knn", "traffic_sign", "Traffic Signs", "k-NN", 44.59, 1.19),
    _md("knn", "mscoco", "MSCOCO", "k-NN", 30.38, 0.99),
    # column Finetune
    _md("finetune", "ilsvrc_2012", "ILSVRC", "Finetune", 45.78, 1.10),
    _md("finetune", "omniglot", "Omniglot", "Finetune", 60.85, 1.58),
    _md("finetune", "aircraft", "Aircraft", "Finetune", 68.69, 1.26),
    _md("finetune", "cu_birds", "Birds", "Finetune", 57.31, 1.26),
    _md("finetune", "dtd", "Textures", "Finetune", 69.05, 0.90),
    _md("finetune", "quickdraw", "Quick Draw", "Finetune", 42.60, 1.17),
    _md("finetune", "fungi", "Fungi", "Finetune", 38.20, 1.02),
    _md("finetune", "vgg_flower", "VGG Flower", "Finetune", 85.51, 0.68),
    _md("finetune", "traffic_sign", "Traffic Signs", "Finetune", 66.79, 1.31),
    _md("finetune", "mscoco", "MSCOCO", "Finetune", 34.86, 0.97),
    # column MatchingNet
    _md("matching", "ilsvrc_2012", "ILSVRC", "MatchingNet", 45.00, 1.10),
    _md("matching", "omniglot", "Omniglot", "MatchingNet", 52.27, 1.28),
    _md("matching", "aircraft", "Aircraft", "MatchingNet", 48.97, 0.93),
    _md("matching", "cu_birds", "Birds", "MatchingNet", 62.21, 0.95),
    _md("matching", "dtd", "Textures", "MatchingNet", 64.15, 0.85),
    _md("matching", "quickdraw", "Quick Draw", "MatchingNet", 42.87, 1.09),
    _md("matching", "fungi", "Fungi", "MatchingNet", 33.97, 1.00),
    _md("matching", "vgg_flower", "VGG Flower", "MatchingNet", 80.13, 0.71),
    _md("matching", "traffic_sign", "Traffic Signs", "MatchingNet", 47.80, 1.14),
    _md("matching", "mscoco", "MSCOCO", "MatchingNet", 34.99, 1.00),
    # column ProtoNet
    _md("protonet", "ilsvrc_2012", "ILSVRC", "ProtoNet", 50.50, 1.08),
    _md("protonet", "omniglot", "Omniglot", "ProtoNet", 59.98, 1.35),
    _md("protonet", "aircraft", "Aircraft", "ProtoNet", 53.10, 1.00),
    _md("protonet", "cu_birds", "Birds", "ProtoNet", 68.79, 1.01),
    _md("protonet", "dtd", "Textures", "ProtoNet", 66.56, 0.83),
    _md("protonet", "quickdraw", "Quick Draw", "ProtoNet", 48.96, 1.08),
    _md("protonet", "fungi", "Fungi", "ProtoNet", 39.71, 1.11),
    _md("protonet", "vgg_flower", "VGG Flower", "ProtoNet", 85.27, 0.77),
    _md("protonet", "traffic_sign", "Traffic Signs", "ProtoNet", 47.12, 1.10),
    _md("protonet", "mscoco", "MSCOCO", "ProtoNet", 41.00, 1.10),
    # column fo-MAML
    _md("maml", "ilsvrc_2012", "ILSVRC", "fo-MAML", 45.51, 1.11),
    _md("maml", "omniglot", "Omniglot", "fo-MAML", 55.55, 1.54),
    _md("maml", "aircraft", "Aircraft", "fo-MAML", 56.24, 1.11),
    _md("maml", "cu_birds", "Birds", "fo-MAML", 63.61, 1.06),
    _md("maml", "dtd", "Textures", "fo-MAML", 68.04, 0.81),
    _md("maml", "quickdraw", "Quick Draw", "fo-MAML", 43.96, 1.29),
    _md("maml", "fungi", "Fungi", "fo-MAML", 32.10, 1.10),
    _md("maml", "vgg_flower", "VGG Flower", "fo-MAML", 81.74, 0.83),
    _md("maml", "traffic_sign", "Traffic Signs", "fo-MAML", 50.93, 1.51),
    _md("maml", "mscoco", "MSCOCO", "fo-MAML", 35.30, 1.23),
    # column RelationNet
    _md("relation", "ilsvrc_2012", "ILSVRC", "RelationNet", 34.69, 1.01),
    _md("relation", "omniglot", "Omniglot", "RelationNet", 45.35, 1.36),
    _md("relation", "aircraft", "Aircraft", "RelationNet", 40.73, 0.83),
    _md("relation", "cu_birds", "Birds", "RelationNet", 49.51, 1.05),
    _md("relation", "dtd", "Textures", "RelationNet", 52.97, 0.69),
    _md("relation", "quickdraw", "Quick Draw", "RelationNet", 43.30, 1.08),
    _md("relation", "fungi", "Fungi", "RelationNet", 30.55, 1.04),
    _md("relation", "vgg_flower", "VGG Flower", "RelationNet", 68.76, 0.83),
    _md("relation", "traffic_sign", "Traffic Signs", "RelationNet", 33.67, 1.05),
    _md("relation", "mscoco", "MSCOCO", "RelationNet", 29.15, 1.01),
    # column fo-Proto-MAML
    _md("proto_maml", "ilsvrc_2012", "ILSVRC", "fo-Proto-MAML", 49.53, 1.05),
    _md("proto_maml", "omniglot", "Omniglot", "fo-Proto-MAML", 63.37, 1.33),
    _md("proto_maml", "aircraft", "Aircraft", "fo-Proto-MAML", 55.95, 0.99),
    _md("proto_maml", "cu_birds", "Birds", "fo-Proto-MAML", 68.66, 0.96),
    _md("proto_maml", "dtd", "Textures", "fo-Proto-MAML", 66.49, 0.83),
    _md("proto_maml", "quickdraw", "Quick Draw", "fo-Proto-MAML", 51.52, 1.00),
    _md("proto_maml", "fungi", "Fungi", "fo-Proto-MAML", 39.96, 1.14),
    _md("proto_maml", "vgg_flower", "VGG Flower", "fo-Proto-MAML", 87.15, 0.69),
    _md("proto_maml", "traffic_sign", "Traffic Signs", "fo-Proto-MAML", 48.83, 1.09),
    _md("proto_maml", "mscoco", "MSCOCO", "fo-Proto-MAML", 43.74, 1.12),
    _dh(
        "support_init",
        "mini_imagenet",
        "train",
        1,
        "Support-based initialization (train)",
        "Mini-ImageNet 1-shot (%)",
        56.17,
        0.64,
    ),
    _dh(
        "support_init",
        "mini_imagenet",
        "train",
        5,
        "Support-based initialization (train)",
        "Mini-ImageNet 5-shot (%)",
        73.31,
        0.53,
    ),
    _dh(
        "support_init",
        "cifar_fs",
        "train",
        1,
        "Support-based initialization (train)",
        "CIFAR-FS 1-shot (%)",
        70.26,
        0.70,
    ),
    _dh(
        "support_init",
        "cifar_fs",
        "train",
        5,
        "Support-based initialization (train)",
        "CIFAR-FS 5-shot (%)",
        83.82,
        0.49,
    ),
    _dh(
        "finetune",
        "mini_imagenet",
        "train",
        1,
        "Fine-tuning (train)",
        "Mini-ImageNet 1-shot (%)",
        57.73,
        0.62,
    ),
    _dh(
        "finetune",
        "mini_imagenet",
        "train",
        5,
        "Fine-tuning (train)",
        "Mini-ImageNet 5-shot (%)",
        78.17,
        0.49,
    ),
    _dh(
        "finetune",
        "cifar_fs",
        "train",
        1,
        "Fine-tuning (train)",
        "CIFAR-FS 1-shot (%)",
        68.72,
        0.67,
    ),
    _dh(
        "finetune",
        "cifar_fs",
        "train",
        5,
        "Fine-tuning (train)",
        "CIFAR-FS 5-shot (%)",
        86.11,
        0.47,
    ),
    _dh(
        "transductive",
        "mini_imagenet",
        "train",
        1,
        "Transductive fine-tuning (train)",
        "Mini-ImageNet 1-shot (%)",
        65.73,
        0.68,
    ),
    _dh(
        "transductive",
        "mini_imagenet",
        "train",
        5,
        "Transductive fine-tuning (train)",
        "Mini-ImageNet 5-shot (%)",
        78.40,
        0.52,
    ),
    _dh(
        "transductive",
        "cifar_fs",
        "train",
        1,
        "Transductive fine-tuning (train)",
        "CIFAR-FS 1-shot (%)",
        76.58,
        0.68,
    ),
    _dh(
        "transductive",
        "cifar_fs",
        "train",
        5,
        "Transductive fine-tuning (train)",
        "CIFAR-FS 5-shot (%)",
        85.79,
        0.50,
    ),
    _dh(
        "support_init",
        "mini_imagenet",
        "train+val",
        1,
        "Support-based initialization (train + val)",
        "Mini-ImageNet 1-shot (%)",
        58.47,
        0.66,
    ),
    _dh(
        "support_init",
        "mini_imagenet",
        "train+val",
        5,
        "Support-based initialization (train + val)",
        "Mini-ImageNet 5-shot (%)",
        75.56,
        0.52,
    ),
    _dh(
        "support_init",
        "cifar_fs",
        "train+val",
        1,
        "Support-based initialization (train + val)",
        "CIFAR-FS 1-shot (%)",
        72.14,
        0.69,
    ),
    _dh(
        "support_init",
        "cifar_fs",
        "train+val",
        5,
        "Support-based initialization (train + val)",
        "CIFAR-FS 5-shot (%)",
        85.21,
        0.49,
    ),
    _dh(
        "finetune",
        "mini_imagenet",
        "train+val",
        1,
        "Fine-tuning (train + val)",
        "Mini-ImageNet 1-shot (%)",
        59.62,
        0.66,
    ),
    _dh(
        "finetune",
        "mini_imagenet",
        "train+val",
        5,
        "Fine-tuning (train + val)",
        "Mini-ImageNet 5-shot (%)",
        79.93,
        0.47,
    ),
    _dh(
        "finetune",
        "cifar_fs",
        "train+val",
        1,
        "Fine-tuning (train + val)",
        "CIFAR-FS 1-shot (%)",
        70.07,
        0.67,
    ),
    _dh(
        "finetune",
        "cifar_fs",
        "train+val",
        5,
        "Fine-tuning (train + val)",
        "CIFAR-FS 5-shot (%)",
        87.26,
        0.45,
    ),
    _dh(
        "transductive",
        "mini_imagenet",
        "train+val",
        1,
        "Transductive fine-tuning (train + val)",
        "Mini-ImageNet 1-shot (%)",
        68.11,
        0.69,
    ),
    _dh(
        "transductive",
        "mini_imagenet",
        "train+val",
        5,
        "Transductive fine-tuning (train + val)",
        "Mini-ImageNet 5-shot (%)",
        80.36,
        0.50,
    ),
    _dh(
        "transductive",
        "cifar_fs",
        "train+val",
        1,
        "Transductive fine-tuning (train + val)",
        "CIFAR-FS 1-shot (%)",
        78.36,
        0.70,
    ),
    _dh(
        "transductive",
        "cifar_fs",
        "train+val",
        5,
        "Transductive fine-tuning (train + val)",
        "CIFAR-FS 5-shot (%)",
        87.54,
        0.49,
    ),
)

FIGURES_WITHOUT_NUMBERS: tuple[FigureWithoutNumbers, ...] = (
    FigureWithoutNumbers(
        plan="atg/figure2",
        paper=ATG,
        figure="Figure 2",
        what_it_shows=(
            "train, validation and test accuracy (5-way 5-shot, 600 test tasks) of a Multiclass "
            "network against the divergence of the taskset, for CIFAR100, mini-ImageNet, "
            "tiered-ImageNet, LFW10 and EMNIST"
        ),
        stated_in_text=(
            "sec. 5.2: 'Across all datasets test accuracy decreases as the divergence between "
            "train and test class distributions increases' (a negative slope); the curve's "
            "values are drawn, not printed"
        ),
    ),
)


def published_number(plan: str, method: str, target: str) -> PublishedNumber | None:
    """The number `plan` compares with for `method` on `target`, or None if the paper has none."""
    for number in PUBLISHED:
        if (number.plan, number.method, number.target) == (plan, method, target):
            return number
    return None


def figure_without_numbers(plan: str) -> FigureWithoutNumbers | None:
    """The figure `plan` reproduces when the paper prints no numbers of it."""
    return next((f for f in FIGURES_WITHOUT_NUMBERS if f.plan == plan), None)
