"""The training feed and loop options of issue 15: background loading (DataLoader workers, the
reader's decode processes) gives the same items and the same trained weights as reading inline,
also across a resume; worker errors arrive as one clear message; Ctrl-C leaves no process or
shared memory behind; pinned memory only for CUDA; `--amp`, `--channels-last` and
`--keep-snapshots` do what they say and are saved in config.json."""

from __future__ import annotations

import functools
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from beam_pipelines.episodes import write_episode_shards
from episodes.images.decoded_cache import write_decoded_cache
from episodes.records.dataset_spec import Split
from episodes.sampling.sampler import SamplerConfig
from learners import train as train_cli
from learners.feed.episode_feed import FeedConfig, StreamDataset, feed, make_loader
from learners.feed.episode_source import (
    EpisodeOptions,
    ShardEpisodeSource,
    open_batch_source,
    open_episode_source,
)
from learners.methods.registry import build_learner, learner_config
from learners.training.device import choose_loading
from learners.training.run_dir import CONFIG, RunConfig, write_or_check_run_config
from learners.training.training_loop import list_snapshots
from tests.fixtures.jpeg_records import assert_same_items
from tests.fixtures.local_runner import make_local_runner
from tests.fixtures.paths import REPO
from tests.fixtures.reader_datasets import write_dataset

torch.set_num_threads(1)
CPU = torch.device("cpu")
OPTIONS = EpisodeOptions(ways=3, shots=2, query=2, image_size=16)


@pytest.fixture(scope="module")
def cached_dataset(tmp_path_factory) -> Path:
    """The same records with a decoded cache for 16x16."""
    folder = tmp_path_factory.mktemp("data") / "cached"
    splits = {Split.TRAIN: list(range(6)), Split.VALID: [6, 7, 8], Split.TEST: []}
    spec = write_dataset(folder, "cached", per_class=(12,) * 9, splits=splits, fmt="JPEG")
    write_decoded_cache(spec, 16)
    return folder


def take(iterator, count: int) -> list:
    items = [next(iterator) for _ in range(count)]
    iterator.close()
    return items


def stream_items(open_source, start: int, count: int, workers: int, **source_kw) -> list:
    source = open_source(**source_kw)
    try:
        return take(feed(source, open_source, start, FeedConfig(workers), CPU), count)
    finally:
        if hasattr(source, "close"):
            source.close()


def no_children_left(timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not multiprocessing.active_children()


@pytest.mark.slow
@pytest.mark.parametrize("which", ["records", "cache", "synthetic", "batches"])
def test_workers_yield_exactly_the_inline_items_in_order(which, jpeg_dataset, cached_dataset):
    """Resumed at item 5, two workers (forkserver) give the items of the training process."""
    if which == "synthetic":
        opener = functools.partial(open_episode_source, "synthetic", "train", None, OPTIONS, 1)
    elif which == "batches":
        opener = functools.partial(open_batch_source, str(jpeg_dataset), None, 8, OPTIONS, 1)
    else:
        folder = jpeg_dataset if which == "records" else cached_dataset
        opener = functools.partial(open_episode_source, str(folder), "train", None, OPTIONS, 1)
    inline = stream_items(opener, 5, 7, workers=0)
    background = stream_items(opener, 5, 7, workers=2)
    assert_same_items(background, inline)
    assert no_children_left()
    if which == "records":  # the reader's own decode processes, in the training process
        assert_same_items(stream_items(opener, 5, 7, workers=0, decode_processes=2), inline)
    if which != "batches":
        assert [int(i["support_labels"].max()) + 1 for i in inline] == [3] * 7


@pytest.fixture(scope="module")
def second_dataset(tmp_path_factory) -> Path:
    """Another dataset's JPEG records (a batch source over two datasets draws from both)."""
    folder = tmp_path_factory.mktemp("data") / "second"
    splits = {Split.TRAIN: list(range(6)), Split.VALID: [], Split.TEST: []}
    write_dataset(folder, "second", per_class=(10,) * 6, splits=splits, fmt="JPEG")
    return folder


def test_batches_are_byte_identical_whatever_the_loading(
    jpeg_dataset, cached_dataset, second_dataset
):
    """Multiclass batches go through the same feed as episodes: the reader's decode processes
    (several batches in flight), loader workers and the decoded cache give the bytes of the
    batches read one at a time (`batch(i)`), also for batches drawn from two datasets."""
    for folders in ([jpeg_dataset], [jpeg_dataset, second_dataset]):
        opener = functools.partial(
            open_batch_source, ",".join(map(str, folders)), None, 24, OPTIONS, 7
        )
        one_by_one = opener()
        try:
            expected = [tuple(map(torch.from_numpy, one_by_one.batch(i))) for i in range(3, 9)]
            plans = [one_by_one.plan(i) for i in range(3, 9)]
        finally:
            one_by_one.close()
        expected = [(images, ids.numpy()) for images, ids in expected]
        assert all(images.shape == (24, 16, 16, 3) for images, _ in expected)
        if len(folders) == 2:  # both datasets appear, their class ids kept apart
            assert any(len(plan.parts) == 2 for plan in plans)
            assert any((ids >= 1_000_000).any() and (ids < 1_000_000).any() for _, ids in expected)
        assert_same_items(stream_items(opener, 3, 6, workers=0), expected)
        assert_same_items(stream_items(opener, 3, 6, workers=0, decode_processes=2), expected)
        if len(folders) == 2:  # one dataset's batches through workers: the test above
            assert_same_items(stream_items(opener, 3, 6, workers=2), expected)
    ahead = opener(decode_processes=2)  # later batches are planned (and decoded) ahead
    planned: list[int] = []
    plan = ahead.plan
    ahead.plan = lambda index: planned.append(index) or plan(index)
    try:
        next(ahead.items(iter(range(10))))
        assert len(planned) >= 3, planned
    finally:
        ahead.close()
    cached = functools.partial(open_batch_source, str(cached_dataset), None, 24, OPTIONS, 7)
    records = functools.partial(open_batch_source, str(jpeg_dataset), None, 24, OPTIONS, 7)
    source = cached()
    assert source.reader.uses_decoded_cache
    source.close()
    # the cache holds the records' reference decoding: the same bytes
    assert_same_items(stream_items(cached, 0, 4, workers=0), stream_items(records, 0, 4, workers=0))
    assert no_children_left()


def test_gpu_decoded_parts_join_into_the_same_batch(jpeg_dataset, second_dataset) -> None:
    """With `decode_device="cuda"` a batch's parts are torch tensors (on the GPU); joined with
    torch they give the bytes numpy gives (shown here with CPU tensors)."""
    source = open_batch_source(f"{jpeg_dataset},{second_dataset}", None, 24, OPTIONS, 7)
    try:
        index = next(i for i in range(50) if len(source.plan(i).parts) == 2)
        plan = source.plan(index)
        episodes = [source.reader.read(d) for _, d in plan.parts]
    finally:
        source.close()
    images, ids = plan.join(episodes, source.ID_STRIDE)
    as_torch = [
        SimpleNamespace(
            support_images=torch.from_numpy(e.support_images),
            support_class_ids=e.support_class_ids,
        )
        for e in episodes
    ]
    torch_images, torch_ids = plan.join(as_torch, source.ID_STRIDE)
    assert isinstance(torch_images, torch.Tensor)
    assert torch.equal(torch_images, torch.from_numpy(images))
    np.testing.assert_array_equal(torch_ids, ids, strict=True)


def test_episode_shards_are_read_by_one_worker_in_order(jpeg_dataset, tmp_path):
    args = {
        "dataset_dirs": (str(jpeg_dataset),),
        "split": "train",
        "config": SamplerConfig.fixed(ways=3, shots=2, query=2).to_json(),
        "seed": 5,
        "start": 0,
        "num_episodes": 9,
        "num_shards": 3,
    }
    write_episode_shards(args, tmp_path / "shards", make_local_runner(1))
    opener = functools.partial(ShardEpisodeSource, str(tmp_path / "shards"), 16)
    inline = stream_items(opener, 2, 6, workers=0)
    background = stream_items(opener, 2, 6, workers=3)
    assert_same_items(background, inline)
    # a source read front to back gets one worker: others would decode every episode again
    source = opener()
    loader = make_loader(StreamDataset(opener, 0, source), FeedConfig(3), CPU, workers=1)
    assert loader.num_workers == 1
    reader_opener = functools.partial(ShardEpisodeSource, str(tmp_path / "shards"), 16)
    assert not reader_opener().random_access
    assert no_children_left()


def test_pinned_memory_is_requested_only_for_cuda() -> None:
    opener = functools.partial(open_episode_source, "synthetic", "train", None, OPTIONS, 0)
    dataset = StreamDataset(opener, 0)
    for workers in (0, 2):
        pinned = make_loader(dataset, FeedConfig(workers), torch.device("cuda"), workers)
        assert pinned.pin_memory == (workers > 0)  # workers=0: device_prefetch's thread pins
        assert not make_loader(dataset, FeedConfig(workers), CPU, workers).pin_memory


def test_a_worker_error_arrives_as_the_readers_one_line_message(tmp_path) -> None:
    folder = tmp_path / "broken"
    splits = {Split.TRAIN: list(range(6)), Split.VALID: [], Split.TEST: []}
    write_dataset(folder, "broken", per_class=(12,) * 6, splits=splits, fmt="JPEG")
    for class_id in range(6):  # every record's bytes damaged after the index was written
        path = folder / f"{class_id}.tfrecords"
        data = bytearray(path.read_bytes())
        data[40:60] = b"\0" * 20
        path.write_bytes(bytes(data))
    opener = functools.partial(open_episode_source, str(folder), "train", None, OPTIONS, 0)
    with pytest.raises(Exception) as inline:
        stream_items(opener, 0, 1, workers=0)
    with pytest.raises(Exception) as background:
        stream_items(opener, 0, 1, workers=2)
    assert type(background.value) is type(inline.value)
    assert str(background.value) == str(inline.value)
    assert "\n" not in str(background.value) and "Traceback" not in str(background.value)
    assert no_children_left()


# ------------------------------------------------------------------------- the training loop


def tiny_config(steps: int, **changes) -> RunConfig:
    method = changes.pop("method", "multiclass")
    pretraining = {  # mixup draws from torch's RNG: a consumed RNG would change the weights
        "mixup_alpha": 0.4,
        "label_smoothing": 0.1,
        "pretrain_augment": False,
    }
    learner = learner_config(
        method,
        backbone="cnn4",
        image_size=16,
        width=0.25,
        **(pretraining if method == "multiclass" else {}),
    )
    values = {
        "learner": learner,
        "dataset": "synthetic",
        "split_file": None,
        "episode_options": OPTIONS,
        "seed": 3,
        "total_steps": steps,
        "checkpoint_every": 2,
        "validation_episodes": 2,
        "batch_size": 8,
    }
    values.update(changes)
    return RunConfig(**values)


def checkpoint_tensors(path: Path) -> dict[str, torch.Tensor]:
    payload = torch.load(path, weights_only=True)
    tensors = dict(payload["model"])
    for index, state in payload["optimizer"]["state"].items():
        for key, value in state.items():
            tensors[f"opt{index}.{key}"] = torch.as_tensor(value)
    tensors["rng"] = payload["torch_rng"]
    for key, value in payload["grad_scaler"].items():
        tensors[f"scaler.{key}"] = torch.as_tensor(value)
    return tensors


def assert_same_run(a: Path, b: Path) -> None:
    x = checkpoint_tensors(a / "checkpoints" / "last.pt")
    y = checkpoint_tensors(b / "checkpoints" / "last.pt")
    assert x.keys() == y.keys()
    assert all(torch.equal(x[k], y[k]) for k in x), [k for k in x if not torch.equal(x[k], y[k])]
    assert (a / "train_log.csv").read_text() == (b / "train_log.csv").read_text()
    if (a / "validation.csv").is_file():
        assert (a / "validation.csv").read_text() == (b / "validation.csv").read_text()


def run(config: RunConfig, out: Path, **kw):
    return train_cli.train(config, str(out), "cpu", progress=False, **kw)


@pytest.mark.parametrize("method", ["multiclass", "protonet"])
def test_background_loading_trains_bit_identical_weights(method, tmp_path) -> None:
    inline = run(tiny_config(6, method=method), tmp_path / "inline")
    background = run(tiny_config(6, method=method, loader_workers=2), tmp_path / "bg")
    assert background.losses == inline.losses
    assert_same_run(tmp_path / "inline", tmp_path / "bg")
    assert len(background.data_waits) == 6 and 0 < background.data_wait_s < background.loop_s
    assert no_children_left()


@pytest.mark.parametrize("method", ["multiclass", "protonet"])
def test_resume_with_background_loading_continues_the_same_stream(method, jpeg_dataset, tmp_path):
    """Interrupted after step 5 (last snapshot: 4) with loader workers, resumed with the
    reader's decode processes instead: the weights of one uninterrupted inline run (mixup
    draws from torch's RNG, so a feed that consumed it on starting would change them)."""
    base = {"dataset": str(jpeg_dataset), "method": method, "validation_episodes": 0}
    run(tiny_config(8, **base), tmp_path / "straight")
    resumed = tmp_path / "resumed"
    first = run(tiny_config(8, loader_workers=2, **base), resumed, stop_after=5)
    assert first.end_step == 5
    second = run(tiny_config(8, decode_processes=2, **base), resumed)
    assert (second.start_step, second.end_step) == (4, 8)
    assert_same_run(tmp_path / "straight", resumed)
    saved = json.loads((resumed / CONFIG).read_text())
    assert (saved["loader_workers"], saved["decode_processes"]) == (0, 2)  # the latest session
    assert no_children_left()


def test_keep_snapshots_keeps_the_newest_and_last_and_best(tmp_path) -> None:
    out = tmp_path / "run"
    first = run(tiny_config(10, keep_snapshots=2), out, stop_after=5)
    assert [s for s, _ in list_snapshots(out)] == [2, 4]
    second = run(tiny_config(10, keep_snapshots=2), out)
    assert [s for s, _ in list_snapshots(out)] == [8, 10]
    folder = out / "checkpoints"
    assert (folder / "last.pt").read_bytes() == (folder / "step_00000010.pt").read_bytes()
    rows = first.validation + second.validation
    best_step = max(rows, key=lambda r: r["accuracy"])["step"]  # the first of equal maxima
    assert torch.load(folder / "best.pt", weights_only=True)["step"] == best_step
    assert sorted(p.name for p in folder.iterdir()) == [
        "best.pt",
        "last.pt",
        "step_00000008.pt",
        "step_00000010.pt",
    ]
    run(tiny_config(12, keep_snapshots=0), out)  # may change on resume; 0 keeps none
    assert list_snapshots(out) == [] and (folder / "last.pt").is_file()
    assert torch.load(folder / "last.pt", weights_only=True)["step"] == 12
    # the same weights as a run keeping every snapshot
    run(tiny_config(12), tmp_path / "all")
    assert [s for s, _ in list_snapshots(tmp_path / "all")] == [2, 4, 6, 8, 10, 12]
    assert_same_run(tmp_path / "all", out)


def test_bf16_autocast_runs_the_forward_pass_in_bf16_on_cpu(tmp_path) -> None:
    learner = build_learner(tiny_config(1, method="protonet").learner)
    learner.set_precision("bf16")
    seen: list[torch.dtype] = []
    first_conv = learner.backbone.blocks[0]
    first_conv.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    source = open_episode_source("synthetic", "train", None, OPTIONS, 0)
    loss = learner.train_step(source.episode(0))
    assert np.isfinite(loss) and seen == [torch.bfloat16]
    assert all(p.dtype == torch.float32 for p in learner.parameters())  # weights stay fp32
    learner.set_precision("off")
    learner.train_step(source.episode(1))
    assert seen[-1] == torch.float32


def test_fp16_loss_scaling_is_saved_and_resumes_bit_exactly(tmp_path) -> None:
    config = functools.partial(tiny_config, 6, method="protonet", amp="fp16")
    run(config(), tmp_path / "straight")
    run(config(), tmp_path / "resumed", stop_after=3)
    run(config(), tmp_path / "resumed")
    assert_same_run(tmp_path / "straight", tmp_path / "resumed")
    state = torch.load(tmp_path / "straight" / "checkpoints" / "last.pt", weights_only=True)
    scale, tracker = state["grad_scaler"]["scale"], state["grad_scaler"]["_growth_tracker"]
    halvings = math.log2(2.0**16 / scale)  # from the initial 2**16, once per overflowing step
    assert halvings == int(halvings) and 0 <= tracker and halvings + tracker <= 6


def test_channels_last_stores_weights_and_images_nhwc_with_the_same_values() -> None:
    config = tiny_config(1, method="protonet").learner
    torch.manual_seed(0)
    plain = build_learner(config)
    torch.manual_seed(0)
    nhwc = build_learner(config)
    nhwc.set_precision(channels_last=True)
    weight = nhwc.backbone.blocks[0].weight
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    episode = open_episode_source("synthetic", "train", None, OPTIONS, 0).episode(0)
    images = nhwc.to_tensors(episode).support_images
    assert images.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(images, plain.to_tensors(episode).support_images)
    assert nhwc.train_step(episode) == pytest.approx(plain.train_step(episode), rel=1e-5)


# ------------------------------------------------------------------------------------ the CLI

TINY = [
    *("--backbone", "cnn4", "--width", "0.25", "--image-size", "16"),
    *("--ways", "3", "--shots", "2", "--query", "2", "--no-progress"),
    *("--method", "protonet", "--synthetic", "--validation-episodes", "0"),
]


def test_new_options_are_saved_and_only_result_changing_ones_block_a_resume(
    tmp_path, capsys
) -> None:
    out = tmp_path / "run"
    args = [*TINY, "--steps", "2", "--output", str(out), "--amp", "bf16", "--channels-last"]
    assert train_cli.main([*args, "--loader-workers", "1", "--keep-snapshots", "3"]) == 0
    saved = json.loads((out / CONFIG).read_text())
    assert (saved["amp"], saved["channels_last"]) == ("bf16", True)
    assert (saved["loader_workers"], saved["keep_snapshots"], saved["decode_processes"]) == (
        1,
        3,
        0,
    )
    assert saved["decode_device"] == "cpu"
    capsys.readouterr()
    assert train_cli.main([*args[:-3], "--amp", "fp16", "--channels-last"]) == 2
    assert "different options (amp 'bf16' -> 'fp16')" in capsys.readouterr().err
    assert train_cli.main([*args[:-1]]) == 2
    assert "different options (channels_last True -> False)" in capsys.readouterr().err
    more = [a if a != "2" or i != args.index("--steps") + 1 else "3" for i, a in enumerate(args)]
    assert train_cli.main([*more, "--keep-snapshots", "1"]) == 0  # loading/storage may change
    assert [s for s, _ in list_snapshots(out)] == [3]


def test_a_run_written_before_these_options_resumes(tmp_path) -> None:
    out = tmp_path / "run"
    assert train_cli.main([*TINY, "--steps", "2", "--output", str(out)]) == 0
    saved = json.loads((out / CONFIG).read_text())
    for key in (
        *("loader_workers", "decode_processes", "keep_snapshots", "amp", "channels_last"),
        "decode_device",
    ):
        del saved[key]
    (out / CONFIG).write_text(json.dumps(saved))
    assert train_cli.main([*TINY, "--steps", "3", "--output", str(out)]) == 0
    assert torch.load(out / "checkpoints" / "last.pt", weights_only=True)["step"] == 3


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--decode-processes", "2", "--loader-workers", "2"], "use one of the two"),
        (["--decode-processes", "1"], "--dataset synthetic has none"),
        (["--loader-workers", "-1"], "expected >= 0"),
        (["--keep-snapshots", "-2"], "--keep-snapshots -2: expected >= 0"),
    ],
)
def test_impossible_loading_options_fail_with_one_line(extra, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert train_cli.main([*TINY, "--steps", "2", "--output", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()  # refused before anything was written


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusals of a machine without CUDA")
@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "--decode-device cuda: CUDA is not available on this machine"),
        (["--loader-workers", "2"], "decodes in the training process: drop --loader-workers 2"),
        (["--decode-processes", "2"], "drop --loader-workers 0 --decode-processes 2"),
        (["--synthetic"], "--synthetic has none"),
    ],
)
def test_gpu_decoding_is_refused_in_one_line_before_any_work(
    extra, message, jpeg_dataset, tmp_path, capsys
):
    """`--decode-device cuda` without CUDA (this machine), with loader workers (GPU decoding
    runs in the training process) or decode processes, or without records: one line, and
    nothing written."""
    out = tmp_path / "run"
    data = [] if "--synthetic" in extra else ["--dataset", str(jpeg_dataset)]
    argv = [*TINY[:-5], "--validation-episodes", "0", "--method", "protonet", *data, *extra]
    argv += ["--steps", "2", "--output", str(out), "--decode-device", "cuda"]
    assert train_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()
    config = train_cli.run_config_from_args(
        train_cli.build_parser().parse_args([*argv[:-1], "cpu"])
    )
    assert config.decode_device == "cpu"  # the default path, recorded


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
def test_evaluate_and_read_refuse_gpu_decoding_without_cuda_in_one_line(
    jpeg_dataset, tmp_path, capsys
):
    """The same flag of `learners.evaluate` and `episodes.read`: refused before the run or the
    dataset is read (the run folder here does not even exist), naming what is missing."""
    from episodes import read as read_cli
    from episodes.util.cli_errors import UserError
    from learners import evaluate as evaluate_cli

    run_folder = tmp_path / "no-run"
    argv = ["--run", str(run_folder), "--dataset", str(jpeg_dataset), "--decode-device", "cuda"]
    assert evaluate_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "--decode-device cuda: CUDA is not available" in err and err.count("\n") == 1, err
    shards = [
        "--run",
        str(run_folder),
        "--decode-device",
        "cuda",
        "--episode-shards",
        str(tmp_path),
    ]
    assert evaluate_cli.main(shards) == 2  # no --dataset: the shards fix the episodes
    err = capsys.readouterr().err
    assert "episode shards are read on the CPU" in err and err.count("\n") == 1, err
    with pytest.raises(UserError, match="--decode-device cuda: CUDA is not available"):
        read_cli.main(
            ["--dataset", str(jpeg_dataset), "--split", "train", "--decode-device", "cuda"]
        )
    assert not run_folder.exists()


def test_a_resume_may_change_the_decoding_device(tmp_path) -> None:
    """Which episodes and labels a run reads never depends on the decoding device, only the
    rounding of pixels (as with --device): a run started with GPU decoding resumes without."""
    out = tmp_path / "run"
    out.mkdir()
    write_or_check_run_config(out, tiny_config(4, decode_device="cuda"))
    write_or_check_run_config(out, tiny_config(6, decode_device="cpu"))
    assert json.loads((out / CONFIG).read_text())["decode_device"] == "cpu"
    with pytest.raises(ValueError, match="amp 'off' -> 'bf16'"):
        write_or_check_run_config(out, tiny_config(6, amp="bf16"))


# ----------------------------------------------------------------- Ctrl-C: nothing left behind


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def shared_memory_files(pids: set[int]) -> set[str]:
    files: set[str] = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        files.update(
            line.split()[-1]
            for line in maps.splitlines()
            if "/dev/shm/" in line and "(deleted)" not in line
        )
    return files


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


@pytest.mark.slow
@pytest.mark.parametrize(
    "loading", [["--loader-workers", "2"], ["--decode-processes", "2"]], ids=["workers", "decode"]
)
def test_ctrl_c_stops_every_process_and_frees_shared_memory(loading, jpeg_dataset, tmp_path):
    out = tmp_path / "run"
    command = [
        *(sys.executable, "-m", "learners.train", *TINY[:-6]),
        *("--method", "protonet", "--dataset", str(jpeg_dataset), "--validation-episodes", "0"),
        *("--steps", "100000", "--checkpoint-every", "1", "--output", str(out), *loading),
    ]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoints" / "step_00000003.pt").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.1)
        workers = descendants(process.pid)
        segments = shared_memory_files(workers | {process.pid})
        assert len(workers) >= 2
        if loading[0] == "--decode-processes":
            assert segments  # the decode processes' episode slots
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode != 0
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if alive(pid)]
    assert not [path for path in segments if Path(path).exists()]
    # freed by their owners, not swept up by multiprocessing's resource tracker at exit
    assert b"leaked shared_memory" not in err and b"DataLoader worker" not in err


def test_device_auto_picks_loader_workers_on_cuda_and_keeps_the_cpu_default() -> None:
    cuda = torch.device("cuda")
    workers, decode, line = choose_loading(cuda, "/data/ilsvrc", None, None, cores=16)
    assert (workers, decode) == (12, 0)  # capped; two cores stay for the training process
    assert line.count("\n") == 0 and "12 DataLoader worker processes" in line
    assert "16 usable cores" in line and "--loader-workers" in line
    assert choose_loading(cuda, "/data/x", None, None, cores=6)[:2] == (4, 0)
    assert choose_loading(cuda, "/data/x", None, None, cores=2)[:2] == (0, 0)
    assert choose_loading(cuda, "synthetic", None, None, cores=16) == (0, 0, None)
    assert choose_loading(CPU, "/data/x", None, None, cores=16) == (0, 0, None)  # as before
    assert choose_loading(cuda, "/data/x", None, 3, cores=16) == (0, 3, None)  # flags win
    assert choose_loading(cuda, "/data/x", 0, None, cores=16) == (0, 0, None)
    gpu_decoding = choose_loading(cuda, "/data/x", None, None, cores=16, decode_device="cuda")
    assert gpu_decoding[:2] == (0, 0) and "decodes JPEG records on the GPU" in gpu_decoding[2]


def test_train_cli_on_cpu_reads_in_the_training_process_and_says_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--method", "protonet", "--synthetic", "--steps", "2", "--device", "cpu"]
    args = train_cli.build_parser().parse_args([*argv, "--output", str(out)])
    config = train_cli.run_config_from_args(args)
    assert (config.loader_workers, config.decode_processes) == (0, 0)
    assert "loading:" not in capsys.readouterr().err
