"""`learners.train --init-from`: a run's backbone starts from another run's weights, as
Meta-Dataset starts its learners from the k-NN baseline's (paper sec. 4, "Pre-training").

Real runs on synthetic images: the backbone equals the source's tensor for tensor, the
method's own modules do not come from it, BatchNorm statistics follow the run's convention,
mismatches are refused in one line before anything is written, and a resumed run never reads
the source again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from learners import train as train_cli
from learners.methods.registry import build_learner, learner_config
from learners.training.backbone_init import RECORD, apply_backbone_init, read_backbone_init
from learners.training.checkpoint_file import weights_hash
from tests.fixtures.cli_processes import TINY

torch.set_num_threads(1)


def _args(method: str, run: Path, steps: int, *extra: str) -> list[str]:
    return [
        "--method", method, "--synthetic", "--steps", str(steps), "--checkpoint-every", "2",
        "--validation-episodes", "0", "--output", str(run), *TINY, *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """A multiclass run (the k-NN baseline's training) of 4 steps."""
    run = tmp_path_factory.mktemp("init") / "baseline"
    assert train_cli.main(_args("multiclass", run, 4)) == 0
    return run


def _backbone(path: Path) -> dict[str, torch.Tensor]:
    model = torch.load(path, weights_only=True)["model"]
    return {k[len("backbone.") :]: v for k, v in model.items() if k.startswith("backbone.")}


def _learner(method: str, **options):
    config = learner_config(method, backbone="cnn4", width=0.25, image_size=28, **options)
    return build_learner(config)


def test_the_backbone_takes_every_source_tensor_and_the_method_keeps_its_own(baseline):
    source = _backbone(baseline / "checkpoints" / "last.pt")
    learner = _learner("relationnet", batch_norm="running")
    relation_before = {k: v.clone() for k, v in learner.state_dict().items() if "relation" in k}
    init = read_backbone_init(baseline, learner)
    apply_backbone_init(learner, init)
    assert init.step == 4 and init.method == "multiclass"
    assert init.checkpoint == (baseline / "checkpoints" / "last.pt").resolve()
    ours = learner.backbone.state_dict()
    assert set(ours) == set(source)  # running BatchNorm: statistics too
    for name, tensor in source.items():
        assert torch.equal(ours[name], tensor), name
    assert relation_before and all(
        torch.equal(learner.state_dict()[k], v) for k, v in relation_before.items()
    )


def test_support_batch_norm_takes_the_parameters_and_no_running_statistics(baseline):
    learner = _learner("protonet", batch_norm="support")  # Meta-Dataset's convention
    init = read_backbone_init(baseline, learner)
    assert not any("running" in k or "num_batches" in k for k in init.weights)
    apply_backbone_init(learner, init)
    source = _backbone(baseline / "checkpoints" / "last.pt")
    for name, param in learner.backbone.named_parameters():
        assert torch.equal(param, source[name]), name


def test_train_records_the_source_and_resumes_without_reading_it(baseline, tmp_path, capsys):
    copy = tmp_path / "source.pt"
    copy.write_bytes((baseline / "checkpoints" / "last.pt").read_bytes())
    run = tmp_path / "protonet"
    assert train_cli.main(_args("protonet", run, 2, "--init-from", str(copy))) == 0
    record = json.loads((run / RECORD).read_text())
    assert record == {
        "checkpoint": str(copy.resolve()),
        "step": 4,
        "method": "multiclass",
        "backbone_weights": weights_hash(_backbone(copy)),
    }
    assert json.loads((run / "config.json").read_text())["extra"]["init_from"] == str(copy)
    copy.write_bytes(b"the source is gone")  # a resumed run never reads it again
    assert train_cli.main(_args("protonet", run, 4, "--init-from", str(copy))) == 0
    assert "steps 2->4" in capsys.readouterr().out
    assert json.loads((run / RECORD).read_text()) == record


def test_the_first_step_starts_from_the_source_weights(baseline, tmp_path):
    """Two runs of 2 steps from the same source and seed end with equal weights; a run from
    scratch ends elsewhere (so the source weights were what training started from)."""
    ends = []
    for name, extra in (
        ("a", ("--init-from", str(baseline))),
        ("b", ("--init-from", str(baseline))),
        ("c", ()),
    ):
        run = tmp_path / name
        assert train_cli.main(_args("protonet", run, 2, *extra)) == 0
        ends.append(_backbone(run / "checkpoints" / "last.pt"))
    assert all(torch.equal(ends[0][k], ends[1][k]) for k in ends[0])
    assert not all(torch.equal(ends[0][k], ends[2][k]) for k in ends[0])


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--width", "0.5"), "in its backbone (cnn4 width 0.25) but"),
        (("--backbone", "resnet12"), "its backbone (cnn4 width 0.25) has no "),
    ],
)
def test_another_backbone_is_refused_in_one_line_before_anything_is_written(
    baseline, tmp_path, capsys, extra, expected
):
    run = tmp_path / "run"
    code = train_cli.main([*_args("protonet", run, 2, "--init-from", str(baseline)), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: --init-from {(baseline / 'checkpoints' / 'last.pt')}: ")
    assert expected in err[0] and "same --backbone and --width" in err[0]
    assert not run.exists()


def test_a_missing_or_foreign_source_is_refused_in_one_line(baseline, tmp_path, capsys):
    run = tmp_path / "run"
    missing = tmp_path / "nothing"
    assert train_cli.main(_args("protonet", run, 2, "--init-from", str(missing))) == 2
    assert capsys.readouterr().err == (
        f"error: --init-from {missing}: no such checkpoint file or run folder\n"
    )
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": {"head.weight": torch.zeros(2)}, "config": {"backbone": "cnn4"}}, foreign)
    assert train_cli.main(_args("protonet", run, 2, "--init-from", str(foreign))) == 2
    assert capsys.readouterr().err == (
        f"error: --init-from {foreign}: the checkpoint holds no backbone weights\n"
    )
    extended = tmp_path / "extended.pt"
    payload = torch.load(baseline / "checkpoints" / "last.pt", weights_only=True)
    payload["model"]["backbone.extra.weight"] = torch.zeros(3, 3)
    torch.save(payload, extended)
    assert train_cli.main(_args("protonet", run, 2, "--init-from", str(extended))) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --init-from {extended}: its backbone (cnn4 width 0.25) has ")
    assert "has extra.weight, which this run's (cnn4 width 0.25) does not" in err
    assert not run.exists()


def test_a_run_folder_gives_its_best_checkpoint_when_it_validated(baseline, tmp_path, capsys):
    """Meta-Dataset's learners start from the pre-training run's best-validation checkpoint
    (pretrained_resnet.gin@87a478a1:3): a validated run folder gives best.pt, one that never
    validated its last.pt, a .pt file itself; one line says which file and step."""
    validated = tmp_path / "validated"
    argv = _args("multiclass", validated, 4, "--checkpoint-every", "1")
    argv[argv.index("--validation-episodes") + 1] = "2"
    assert train_cli.main([*argv, "--ways", "3", "--shots", "1", "--query", "2"]) == 0
    rows = (validated / "validation.csv").read_text().splitlines()[1:]
    accuracy = {int(r.split(",")[0]): float(r.split(",")[1]) for r in rows}
    best_step = max(accuracy, key=lambda step: (accuracy[step], -step))
    best = (validated / "checkpoints" / "best.pt").resolve()
    last = (baseline / "checkpoints" / "last.pt").resolve()
    capsys.readouterr()
    for source, file, step, why in (
        (validated, best, best_step, "the run's best-validation checkpoint"),
        (baseline, last, 4, "the run's last checkpoint: it did not validate"),
        (last, last, 4, "as given"),
    ):
        run = tmp_path / f"from_{source.name}"
        assert train_cli.main(_args("protonet", run, 1, "--init-from", str(source))) == 0
        record = json.loads((run / RECORD).read_text())
        assert (record["checkpoint"], record["step"]) == (str(file), step)
        said = [line for line in capsys.readouterr().err.splitlines() if "--init-from" in line]
        assert said == [f"note: --init-from {source} takes {file} (step {step}, {why})"]
