"""Analyses of splits and class embeddings (ATG paper §5.2-5.3, App. A.2-A.3).

Subcommands of `python -m splits.analyze`:
- `pca`: 2-D PCA of the class embeddings coloured by split, with both ATG centroids (Fig. 3).
- `correlation`: Pearson correlation between each task's divergence from the train
  distribution and the task accuracies (Table 2; Gaussians with damping 0.001, App. A.2).
- `hop`: average hop-distance difference between a Ward clustering tree of the embeddings and a
  hierarchy such as the WordNet DAG (Table 3, §5.3).
- `summary`: split sizes, recorded divergence and distances between the splits.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from episodes.records.split_file import SPLITS, SplitFile
from episodes.util.cli_errors import UserError, run_main, user_faults
from episodes.util.cli_style import command_parser, finite_float
from episodes.util.json_files import read_json
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.methods.atg.algorithm import normalise_rows
from splits.methods.atg.divergences import (
    DEFAULT_DAMPING,
    DIVERGENCES,
    atg_divergence,
    class_log_probs,
    gaussian_divergence,
    symmetric_kl,
    weighted_gaussian,
)

__all__ = [
    "AnalysisInputError",
    "SPLIT_COLOURS",
    "build_parser",
    "divergence_accuracy_correlation",
    "hop_distance",
    "leaf_hop_distances",
    "main",
    "pca_projection",
    "plot_pca",
    "split_labels",
    "split_summary",
    "task_divergence",
    "ward_tree_parents",
]


class AnalysisInputError(UserError, ValueError):
    """An input of `python -m splits.analyze` (a file, its contents, embeddings that do not
    fit the split or the hierarchy) that cannot be analysed; the message names it."""


SPLIT_COLOURS = {"train": "tab:blue", "valid": "tab:green", "test": "tab:red"}


# ----------------------------------------------------------------------------- PCA picture
def split_labels(split: SplitFile, class_names: Sequence[str]) -> list[str]:
    """For each class name, the split it belongs to ('' when the split file omits it)."""
    where = {name: s for s in SPLITS for name in split.classes(s)}
    return [where.get(name, "") for name in class_names]


def pca_projection(
    unit_embeddings: np.ndarray, extra_points: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """2-D PCA (scikit-learn defaults, n_components=2; App. A.2) of the embeddings, and of
    `extra_points` (e.g. the centroids) in the same projection."""
    from sklearn.decomposition import PCA

    pca = PCA(n_components=2).fit(unit_embeddings)
    projected = pca.transform(unit_embeddings)
    extra = pca.transform(extra_points) if extra_points is not None else None
    return projected, extra


def plot_pca(embeddings: EmbeddingsFile, splits: Sequence[SplitFile], output: str | Path) -> Path:
    """PNG with one panel per split file: classes coloured by split, centroids as stars."""
    from matplotlib.figure import Figure  # drawn without pyplot: no backend is chosen

    unit = normalise_rows(embeddings.embeddings)
    fig = Figure(figsize=(4.2 * len(splits), 4.2))
    axes = fig.subplots(1, len(splits), squeeze=False)
    for ax, split in zip(axes[0], splits):
        centroids = None
        if split.centroids:
            centroids = np.array([split.centroids["train"], split.centroids["test"]])
            if centroids.shape[1] != unit.shape[1]:
                raise AnalysisInputError(
                    f"split for {split.dataset!r} has {centroids.shape[1]}-D "
                    f"centroids but the embeddings are {unit.shape[1]}-D"
                )
        points, cpoints = pca_projection(unit, centroids)
        labels = np.array(split_labels(split, embeddings.class_names))
        for name in SPLITS:
            mask = labels == name
            ax.scatter(
                points[mask, 0],
                points[mask, 1],
                s=10,
                c=SPLIT_COLOURS[name],
                label=f"{name} ({int(mask.sum())})",
                alpha=0.7,
            )
        title = f"{split.dataset} ({split.method})"
        if cpoints is not None:
            for k, name in enumerate(("train", "test")):
                ax.scatter(
                    cpoints[k, 0],
                    cpoints[k, 1],
                    marker="*",
                    s=300,
                    c=SPLIT_COLOURS[name],
                    edgecolors="black",
                    label=f"mu_{name}",
                )
            gap = float(np.linalg.norm(centroids[0] - centroids[1]))
            title += f"\nR={split.parameters.get('R')}, ||mu_train-mu_test||={gap:.3f}"
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="best")
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
    fig.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    return output


# ----------------------------------------------------------------------------- Table 2
def task_divergence(
    train_embeddings: np.ndarray,
    task_embeddings: np.ndarray,
    divergence: str,
    family: str = "gaussian",
    damping: float = DEFAULT_DAMPING,
) -> float:
    """D(train || task) between the train classes and one task's classes (§5.2, Table 2).

    gaussian: Gaussians fitted to each set of class embeddings, covariance + damping * I
    (App. A.2).  multinomial: ATG's centroid multinomials over the union of the classes, with
    the train centroid the mean train embedding and the task centroid the task's mean.
    """
    tr = torch.from_numpy(np.asarray(train_embeddings, dtype=np.float64))
    ta = torch.from_numpy(np.asarray(task_embeddings, dtype=np.float64))
    if family == "gaussian":
        m0, c0 = weighted_gaussian(tr, None, damping)
        m1, c1 = weighted_gaussian(ta, None, damping)
        return float(gaussian_divergence(divergence, m0, c0, m1, c1))
    if family == "multinomial":
        union = torch.cat([tr, ta])
        centroids = torch.stack([tr.mean(dim=0), ta.mean(dim=0)])
        log_probs = class_log_probs(union, centroids)
        return float(atg_divergence(divergence, union, centroids, log_probs, damping))
    raise ValueError(f"unknown family {family!r}; expected 'gaussian' or 'multinomial'")


def divergence_accuracy_correlation(
    train_embeddings: np.ndarray,
    tasks: Sequence[np.ndarray],
    accuracies: Sequence[float],
    divergences: Sequence[str] = DIVERGENCES,
    family: str = "gaussian",
    damping: float = DEFAULT_DAMPING,
) -> dict[str, dict[str, object]]:
    """Pearson r between each task's divergence and its accuracy, per divergence (Table 2)."""
    acc = np.asarray(accuracies, dtype=np.float64)
    if len(tasks) != acc.size:
        raise AnalysisInputError(f"{len(tasks)} tasks but {acc.size} accuracies")
    if acc.size < 3:
        raise AnalysisInputError(f"need at least 3 tasks for a correlation, got {acc.size}")
    if not np.isfinite(acc).all():
        raise AnalysisInputError("accuracies contain NaN or infinite values")
    out: dict[str, dict[str, object]] = {}
    for name in divergences:
        values = np.array(
            [task_divergence(train_embeddings, t, name, family, damping) for t in tasks]
        )
        if np.std(values) == 0 or np.std(acc) == 0:
            r = float("nan")
        else:
            r = float(np.corrcoef(values, acc)[0, 1])
        out[name] = {"pearson_r": r, "divergences": values.tolist()}
    return out


# ----------------------------------------------------------------------------- Table 3
def ward_tree_parents(
    unit_embeddings: np.ndarray, leaf_names: Sequence[str]
) -> dict[str, list[str]]:
    """Parent map of the Ward agglomerative clustering tree (scikit-learn, linkage='ward')."""
    from sklearn.cluster import AgglomerativeClustering

    n = len(leaf_names)
    if n < 2:
        raise AnalysisInputError("a clustering tree needs at least 2 classes")
    model = AgglomerativeClustering(n_clusters=1, linkage="ward", compute_full_tree=True)
    model.fit(unit_embeddings)
    names = list(leaf_names) + [f"ward:{n + i}" for i in range(n - 1)]
    parents: dict[str, list[str]] = {name: [] for name in names}
    for i, (a, b) in enumerate(model.children_):
        parents[names[a]].append(names[n + i])
        parents[names[b]].append(names[n + i])
    return parents


def leaf_hop_distances(parents: Mapping[str, Sequence[str]], leaves: Sequence[str]) -> np.ndarray:
    """Shortest-path hop counts between leaves in the undirected graph of a parent map."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    nodes = list(dict.fromkeys([*parents, *(p for ps in parents.values() for p in ps)]))
    index = {node: i for i, node in enumerate(nodes)}
    missing = [leaf for leaf in leaves if leaf not in index]
    if missing:
        raise AnalysisInputError(
            f"{len(missing)} classes are not nodes of the hierarchy, e.g. {missing[:5]}"
        )
    rows = [index[c] for c, ps in parents.items() for _ in ps]
    cols = [index[p] for ps in parents.values() for p in ps]
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nodes), len(nodes)))
    leaf_idx = [index[leaf] for leaf in leaves]
    dist = shortest_path(graph.tocsr(), directed=False, unweighted=True, indices=leaf_idx)
    return dist[:, leaf_idx]


def hop_distance(
    parents_a: Mapping[str, Sequence[str]],
    parents_b: Mapping[str, Sequence[str]],
    leaves: Sequence[str],
) -> float:
    """Mean over class pairs of |d_a(x, y) - d_b(x, y)|, d = hops between x and y (§5.3).

    The paper counts the nodes separating two classes (hops - 1); the offset cancels in the
    difference.  A pair connected in one graph but not the other raises AnalysisInputError.
    """
    if len(leaves) < 2:
        raise AnalysisInputError("hop distance needs at least 2 classes")
    da = leaf_hop_distances(parents_a, leaves)
    db = leaf_hop_distances(parents_b, leaves)
    upper = np.triu_indices(len(leaves), k=1)
    a, b = da[upper], db[upper]
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise AnalysisInputError("some classes are not connected in one of the hierarchies")
    return float(np.mean(np.abs(a - b)))


# ----------------------------------------------------------------------------- summary
def summary_text(summary: Mapping[str, object]) -> str:
    """`split_summary` for a person: one line of sizes and parameters, one per split pair."""

    def shown(value: object) -> str:
        return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    sizes = ", ".join(f"{name} {count}" for name, count in summary["sizes"].items())
    lines = [
        f"{summary['dataset']} ({summary['method']}): {sizes}; R {shown(summary['R'])}, "
        f"divergence {shown(summary['divergence'])}, achieved "
        f"{shown(summary['achieved_divergence'])}"
    ]
    if "warning" in summary:
        lines.append(f"warning: {summary['warning']}")
    pairs = summary.get("between_splits") or {}
    if pairs:
        lines.append(
            f"  {'splits':<12} {'mean class distance':>20} {'distance of means':>18} "
            f"{'sym. KL of mean centroids':>26}"
        )
        for pair, row in pairs.items():
            lines.append(
                f"  {pair:<12} {row['mean_class_distance']:>20.4f} "
                f"{row['distance_between_means']:>18.4f} "
                f"{row['symmetric_kl_of_mean_centroids']:>26.4f}"
            )
    return "\n".join(lines)


def split_summary(split: SplitFile, embeddings: EmbeddingsFile | None = None) -> dict[str, object]:
    """Sizes, recorded parameters and, with embeddings, distances between the splits."""
    out: dict[str, object] = {
        "dataset": split.dataset,
        "method": split.method,
        "sizes": split.sizes(),
        "R": split.parameters.get("R"),
        "divergence": split.parameters.get("divergence"),
        "achieved_divergence": split.achieved_divergence,
    }
    if embeddings is None:
        return out
    if split.embedding_hash and split.embedding_hash != embeddings.content_hash():
        out["warning"] = "embeddings differ from the ones the split was computed from"
    unit = normalise_rows(embeddings.embeddings)
    pos = {name: i for i, name in enumerate(embeddings.class_names)}
    missing = [n for s in SPLITS for n in split.classes(s) if n not in pos]
    if missing:
        raise AnalysisInputError(
            f"{len(missing)} split classes have no embedding, e.g. {missing[:5]}"
        )
    groups = {s: unit[[pos[n] for n in split.classes(s)]] for s in SPLITS if split.classes(s)}
    emb = torch.from_numpy(unit)
    pairs: dict[str, dict[str, float]] = {}
    names = list(groups)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            xa, xb = groups[a], groups[b]
            cross = np.sqrt(
                np.maximum(
                    (xa * xa).sum(1)[:, None] + (xb * xb).sum(1)[None, :] - 2 * xa @ xb.T, 0.0
                )
            )
            ma, mb = xa.mean(axis=0), xb.mean(axis=0)
            log_probs = class_log_probs(emb, torch.from_numpy(np.stack([ma, mb])))
            pairs[f"{a}-{b}"] = {
                "mean_class_distance": float(cross.mean()),
                "distance_between_means": float(np.linalg.norm(ma - mb)),
                "symmetric_kl_of_mean_centroids": float(symmetric_kl(log_probs[0], log_probs[1])),
            }
    out["between_splits"] = pairs
    return out


# ----------------------------------------------------------------------------- CLI
def _read_accuracies(path: str) -> list[float]:
    p = Path(path)
    if not p.is_file():
        raise AnalysisInputError(f"accuracy file {p} does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        values = json.loads(text) if p.suffix == ".json" else [float(x) for x in text.split()]
    except ValueError as err:
        raise AnalysisInputError(f"{p}: cannot read accuracies ({err})") from None
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise AnalysisInputError(f"{p}: expected a list of accuracies")
    return [float(v) for v in values]


def _read_tasks(path: str, names: Sequence[str]) -> list[list[int]]:
    p = Path(path)
    if not p.is_file():
        raise AnalysisInputError(f"task file {p} does not exist")
    tasks = read_json(p, AnalysisInputError)
    if not isinstance(tasks, list) or not all(isinstance(t, list) and t for t in tasks):
        raise AnalysisInputError(f"{p}: expected a JSON list of tasks, each a list of class names")
    pos = {n: i for i, n in enumerate(names)}
    out = []
    for k, task in enumerate(tasks):
        unknown = [c for c in task if c not in pos]
        if unknown:
            raise AnalysisInputError(
                f"{p}: task {k} names classes without embeddings: {unknown[:5]}"
            )
        out.append([pos[c] for c in task])
    return out


def _read_hierarchy(path: str) -> tuple[dict[str, list[str]], list[str] | None]:
    p = Path(path)
    if not p.is_file():
        raise AnalysisInputError(f"hierarchy file {p} does not exist")
    data = read_json(p, AnalysisInputError)
    if not isinstance(data, dict):
        raise AnalysisInputError(f"{p}: expected a parent map {{node: [parents]}}")
    if "parents" in data:
        return data["parents"], data.get("leaves")
    return data, None


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "splits.analyze", description="Analyses of class splits and embeddings."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    embeddings = "class embeddings file (.npz, python -m splits.embed)"
    pca = sub.add_parser("pca", help="PCA picture of a split (ATG Fig. 3)")
    pca.add_argument("--embeddings", required=True, metavar="NPZ", help=embeddings)
    pca.add_argument(
        "--split-file",
        nargs="+",
        required=True,
        metavar="FILE",
        renamed_from=("--split",),
        help="split file(s) (train/valid/test class names), one panel each",
    )
    pca.add_argument("--output", required=True, help="PNG path")
    cor = sub.add_parser("correlation", help="divergence vs accuracy (ATG Table 2)")
    cor.add_argument("--train-embeddings", required=True, metavar="NPZ", help=embeddings)
    cor.add_argument("--task-embeddings", help="embeddings of the task classes (default: train)")
    cor.add_argument("--tasks", required=True, help="JSON list of tasks (lists of class names)")
    cor.add_argument("--accuracies", required=True, help="JSON list or one number per line")
    cor.add_argument(
        "--family",
        default="gaussian",
        choices=["gaussian", "multinomial"],
        help="the distribution each task's classes are fitted with (default gaussian)",
    )
    cor.add_argument(
        "--damping",
        type=finite_float,
        default=DEFAULT_DAMPING,
        help=f"diagonal damping of the Wasserstein-2 Gaussians (default {DEFAULT_DAMPING:g})",
    )
    cor.add_argument(
        "--no-normalise", action="store_true", help="use raw instead of unit-normalised embeddings"
    )
    hop = sub.add_parser("hop", help="hop distance to a hierarchy (ATG Table 3)")
    hop.add_argument("--embeddings", required=True, metavar="NPZ", help=embeddings)
    target = hop.add_mutually_exclusive_group(required=True)
    target.add_argument("--parents", help="hierarchy JSON {node: [parents]} (e.g. WordNet DAG)")
    target.add_argument("--other-embeddings", help="compare with another embedding's Ward tree")
    summ = sub.add_parser("summary", help="sizes and distances of a split")
    summ.add_argument(
        "--split-file",
        required=True,
        metavar="FILE",
        renamed_from=("--split",),
        help="split file (train/valid/test class names)",
    )
    summ.add_argument("--embeddings", metavar="NPZ", help=embeddings + ": distances too")
    summ.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "pca":
        emb = EmbeddingsFile.load(args.embeddings)
        splits = [SplitFile.load(p) for p in args.split_file]
        print(plot_pca(emb, splits, args.output))
    elif args.command == "correlation":
        train = EmbeddingsFile.load(args.train_embeddings)
        task_file = EmbeddingsFile.load(args.task_embeddings) if args.task_embeddings else train
        accuracies = _read_accuracies(args.accuracies)
        tasks = _read_tasks(args.tasks, task_file.class_names)

        def prep(x: np.ndarray) -> np.ndarray:
            return np.asarray(x, np.float64) if args.no_normalise else normalise_rows(x)

        tr = prep(train.embeddings)
        te = prep(task_file.embeddings)
        result = divergence_accuracy_correlation(
            tr, [te[t] for t in tasks], accuracies, family=args.family, damping=args.damping
        )
        for name, row in result.items():
            print(f"{name:>14}: pearson r = {row['pearson_r']:+.3f}")
    elif args.command == "hop":
        emb = EmbeddingsFile.load(args.embeddings)
        tree = ward_tree_parents(normalise_rows(emb.embeddings), emb.class_names)
        if args.parents:
            other, leaves = _read_hierarchy(args.parents)
            if leaves is not None and sorted(leaves) != sorted(emb.class_names):
                raise AnalysisInputError("the hierarchy's leaves are not the embedding classes")
        else:
            emb_b = EmbeddingsFile.load(args.other_embeddings)
            emb_b.check_class_names(emb.class_names)
            other = ward_tree_parents(normalise_rows(emb_b.embeddings), emb_b.class_names)
        print(f"hop distance: {hop_distance(tree, other, emb.class_names):.4f}")
    else:
        split = SplitFile.load(args.split_file)
        emb = EmbeddingsFile.load(args.embeddings) if args.embeddings else None
        summary = split_summary(split, emb)
        print(json.dumps(summary, indent=2) if args.json else summary_text(summary))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
