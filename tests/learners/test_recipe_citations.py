"""Every recipe value against the authors' line it comes from.

`tests/fixtures/data/recipe_citations.toml` re-types, for each value of each recipe in
`learners/recipes/`, the line(s) of the authors' file at the cited commit (repository, commit,
branch, path, line numbers and text), or the quote of the paper it comes from. The tests check
that the table covers every recipe value and nothing else, that each value is the table's, that
a `name = value` line read through the option's translation gives the value, that the recipe's
source names the same file, commit and lines, that every commit lies on the authors' main (or
`arxiv_v2_dev`) branch, and that each quote is in the paper text. With RECIPE_SOURCE_REPOS=DIR
(clones as DIR/OWNER/NAME) the re-typed lines are also compared with the files themselves.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

from learners.training.recipe_files import load_recipe, recipe_names
from tests.fixtures.paths import PAPERS, REPO, shared_path

tomllib = pytest.importorskip("tomllib")  # Python 3.11+, as learners.training.recipe_files needs

TABLE = REPO / "tests" / "fixtures" / "data" / "recipe_citations.toml"
ROWS = tomllib.loads(TABLE.read_text())["citation"]

# the authors' branches a cited commit must lie on
BRANCHES = {
    "google-research/meta-dataset": {"main", "arxiv_v2_dev"},
    "amazon-science/few-shot-baseline": {"main"},
    "fastai/fastai1": {"master"},
    "seba-1511/atg": {"master"},
    "learnables/learn2learn": {"master"},
}
# option -> the gin / Python names whose `name = value` line gives it
BINDINGS = {
    "backbone": ("Learner.embedding_fn", "LearnerConfig.embedding_network"),
    "image_size": ("DataConfig.image_height",),
    "decay_every": ("Trainer.decay_every", "LearnerConfig.decay_every"),
    "decay_rate": ("Trainer.decay_rate", "LearnerConfig.decay_rate"),
    "lr": ("Trainer.learning_rate", "LearnerConfig.learning_rate", "lr"),
    "weight_decay": ("Learner.weight_decay", "weight_decay"),
    "lr_schedule": ("Trainer.decay_learning_rate", "LearnerConfig.decay_learning_rate"),
    "batch_norm": ("Learner.transductive_batch_norm",),
    "steps": ("Trainer.num_updates",),
    "checkpoint_every": ("Trainer.checkpoint_every", "Trainer.validate_every"),
    "validation_episodes": ("Trainer.num_eval_episodes",),
    "validation_dataset": ("benchmark.eval_datasets",),
    "batch_size": ("Trainer.batch_size", "batch_size"),
    "inner_lr": ("MAMLLearner.alpha",),
    "inner_steps": ("MAMLLearner.num_update_steps",),
    "eval_inner_steps": (
        "MAMLLearner.num_update_steps",
        "MAMLLearner.additional_evaluation_update_steps",
        "MAMLLearner.additional_test_update_steps",
    ),
    # MAMLLearner.train_batch_norm: the name before 535b26a8 (gradient_descent_step's
    # allow_grads_to_batch_norm_vars)
    "adapt_batch_norm": ("MAMLLearner.adapt_batch_norm", "MAMLLearner.train_batch_norm"),
    "matching_normalize": ("MatchingNetworkLearner.exact_cosine_distance",),
    "knn_metric": ("BaselineLearner.knn_distance",),
    "pretrain_head": ("BaselineLearner.cosine_classifier",),
    "md_finetune_cosine": ("BaselineLearner.cosine_classifier",),
    "pretrain_cosine_scale": ("BaselineLearner.cosine_logits_multiplier",),
    "md_finetune_multiplier": ("BaselineLearner.cosine_logits_multiplier",),
    "pretrain_weight_norm": ("BaselineLearner.use_weight_norm",),
    "md_finetune_weight_norm": ("BaselineLearner.use_weight_norm",),
    "md_finetune_steps": ("BaselineFinetuneLearner.num_finetune_steps",),
    "md_finetune_lr": ("BaselineFinetuneLearner.finetune_lr",),
    "md_finetune_all_layers": ("BaselineFinetuneLearner.finetune_all_layers",),
    "md_finetune_adam": ("BaselineFinetuneLearner.finetune_with_adam",),
    "cosine_cycles": ("num_cycles",),
    "cycle_multiplier": ("cycle_multiplier",),
    "cycle_lr_factor": ("lr_mult",),
    "mixup_alpha": ("mixup",),
}
# option -> the authors' value -> ours, where the two spell it differently
TRANSLATIONS = {
    "backbone": {"resnet": "resnet18", "wide_resnet": "wrn16_2", "four_layer_convnet": "cnn4"},
    "pretrain_head": {True: "cosine", False: "linear"},
    "lr_schedule": {True: "exponential", False: "constant"},
    "batch_norm": {False: "support", True: "episode"},
    "matching_normalize": {False: "support", True: "both"},
    "knn_metric": {"cosine": "cosine", "l2": "euclidean"},
}
BINDING_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*(.+?)\s*(?:#.*)?$")


def _row_id(row: dict) -> str:
    return f"{row['recipe']}:{row['key']}"


def _same(a: object, b: object) -> bool:
    """Equal and of the same kind (True is not 1; 2 and 2.0 are the same number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _bound(text: str) -> tuple[str, object]:
    match = BINDING_LINE.match(text)
    assert match, f"not a `name = value` line: {text!r}"
    return match.group(1), ast.literal_eval(match.group(2))


def _line_numbers(spec: str) -> list[int]:
    numbers = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        numbers += range(int(first), int(last or first) + 1)
    return numbers


def test_the_table_covers_every_recipe_value_and_nothing_else() -> None:
    cited = [(row["recipe"], row["key"]) for row in ROWS]
    assert len(cited) == len(set(cited)), "a value cited twice"
    values = {(name, key) for name in recipe_names() for key in load_recipe(name).values}
    assert set(cited) == values


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_each_value_is_the_tables_and_its_source_names_the_cited_line(row: dict) -> None:
    recipe = load_recipe(row["recipe"])
    assert _same(recipe.values[row["key"]], row["value"])
    source = recipe.sources[row["key"]]
    if row["kind"] == "paper":
        assert f"'{row['quote']}'" in source
    else:
        assert f"{row['path']}@{row['commit'][:8]}:{row['lines']}" in source
        assert len(row["text"]) == len(_line_numbers(row["lines"]))


@pytest.mark.parametrize("row", [r for r in ROWS if r["kind"] == "binding"], ids=_row_id)
def test_a_bound_value_is_read_from_its_line(row: dict) -> None:
    key = row["key"]
    bound = [_bound(text) for text in row["text"]]
    assert all(name in BINDINGS[key] for name, _ in bound), bound
    literals = [TRANSLATIONS.get(key, {}).get(value, value) for _, value in bound]
    if key == "eval_inner_steps":  # num_update_steps + the additional evaluation steps
        assert _same(sum(literals), row["value"])
    else:
        assert all(_same(literal, row["value"]) for literal in literals), literals


def test_every_commit_lies_on_the_authors_main_branches() -> None:
    for row in ROWS:
        if row["kind"] == "paper":
            continue
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"]), _row_id(row)
        assert row["branch"] in BRANCHES[row["repo"]], _row_id(row)


def test_sources_cite_no_other_commit() -> None:
    """A commit named anywhere in a source (also beside the cited line) is one of the table's,
    so none names a pull-request merge or an abandoned snapshot."""
    known = {row["commit"][:8] for row in ROWS if row["kind"] != "paper"}
    for name in recipe_names():
        for key, source in load_recipe(name).sources.items():
            named = set(re.findall(r"@([0-9a-f]{7,40})\b", source))
            assert {c[:8] for c in named} <= known, (name, key, named - known)


def test_paper_quotes_are_in_the_papers() -> None:
    rows = [row for row in ROWS if row["kind"] == "paper"]
    shared_path(PAPERS)
    for row in rows:
        text = " ".join((PAPERS / row["paper"]).read_text().split())
        assert row["quote"] in text, _row_id(row)


def test_the_published_configurations_are_the_defaults() -> None:
    """Issue 32 items 1-3: the camera-ready fo-MAML / fo-Proto-MAML (d81344b's alpha values),
    the published Finetune (all layers, wrn16_2, constant rate) and k-NN (linear head, no decay);
    the pre-camera-ready fo-MAML only under its snapshot's name."""
    maml = load_recipe("meta_dataset/maml").values
    assert (maml["inner_lr"], maml["inner_steps"], maml["eval_inner_steps"]) == (
        0.09915203576061224,
        10,
        15,
    )
    assert (maml["image_size"], maml["decay_every"], maml["decay_rate"]) == (
        126,
        10000,
        0.8354967819706964,
    )
    proto = load_recipe("meta_dataset/proto_maml").values
    assert (proto["inner_lr"], proto["inner_steps"], proto["decay_every"]) == (
        0.005435022808033229,
        6,
        2500,
    )
    assert (proto["lr"], proto["weight_decay"]) == (0.00036339913514891586, 1.3656044331235537e-05)
    old = load_recipe("meta_dataset/maml@4b909ad5").values
    assert (old["inner_lr"], old["inner_steps"], old["image_size"]) == (0.01, 6, 84)
    finetune = load_recipe("meta_dataset/finetune").values
    assert finetune["backbone"] == "wrn16_2" and finetune["image_size"] == 84
    assert finetune["md_finetune_all_layers"] and finetune["md_finetune_steps"] == 200
    assert finetune["pretrain_head"] == "linear" and finetune["pretrain_weight_norm"]
    assert finetune["lr_schedule"] == "constant" and "decay_every" not in finetune
    knn = load_recipe("meta_dataset/knn").values
    assert knn["pretrain_head"] == "linear" and not knn["pretrain_weight_norm"]
    assert (knn["lr"], knn["lr_schedule"]) == (0.007634189137886614, "constant")
    assert "decay_every" not in knn and "decay_rate" not in knn


def test_dhillons_length_selection_and_evaluation_are_the_papers() -> None:
    """Issue 32 item 5: 120 epochs in two cosine cycles of 40 and 80 (cycle_length x
    cycle_multiplier ** c), the best epoch on held-out images of the training classes, 84 px
    with 32 px for CIFAR-FS / FC-100 in a note, and the paper's evaluation (transductive
    fine-tuning, 1,000 episodes) as a command in a note."""
    recipe = load_recipe("dhillon/multiclass")
    values = recipe.values
    assert (values["epochs"], values["cosine_cycle_epochs"]) == (120, [40, 80])
    cycles = [40 * values["cycle_multiplier"] ** c for c in range(values["cosine_cycles"])]
    assert cycles == values["cosine_cycle_epochs"] and sum(cycles) == values["epochs"]
    assert (values["validation"], values["image_size"]) == ("held-out", 84)
    assert "steps" not in values and "lr_schedule" in values
    notes = " ".join(recipe.notes)
    assert "--image-size 32" in notes and "--held-out-per-class" in notes
    assert "--inference transductive" in notes and "--episodes 1000" in notes


def _repos() -> Path | None:
    folder = os.environ.get("RECIPE_SOURCE_REPOS")
    return Path(folder) if folder else None


@pytest.mark.skipif(
    _repos() is None, reason="RECIPE_SOURCE_REPOS (clones as DIR/OWNER/NAME) not set"
)
def test_retyped_lines_are_the_authors_files() -> None:
    """The table against the authors' repositories: each re-typed line is the file's line at the
    commit, and the commit is an ancestor of the branch the table names."""
    folder = _repos()
    assert folder is not None
    for row in ROWS:
        if row["kind"] == "paper":
            continue
        git = ["git", "-C", str(folder / row["repo"])]
        shown = subprocess.run(
            [*git, "show", f"{row['commit']}:{row['path']}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        lines = [shown[n - 1] for n in _line_numbers(row["lines"])]
        assert lines == row["text"], _row_id(row)
        ancestor = [*git, "merge-base", "--is-ancestor", row["commit"], row["branch"]]
        assert subprocess.run(ancestor).returncode == 0, _row_id(row)
