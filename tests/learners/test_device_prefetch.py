"""The copy to the device ahead of the step (`learners.feed.device_prefetch`): items keep their order
and bytes, and give the learner the same normalised inputs as the feed without it; errors
arrive as themselves; closing stops the drawing thread and closes the feed. On CPU the staging
and the thread run as on CUDA minus the copy (CUDA streams wait for a GPU run)."""

from __future__ import annotations

import functools
import threading

import numpy as np
import pytest
import torch

from learners.feed.device_prefetch import DevicePrefetcher, image_tensors, prefetch_to_device
from learners.feed.episode_feed import FeedConfig, _loader_items, feed
from learners.feed.episode_source import EpisodeOptions, open_batch_source, open_episode_source
from learners.methods.registry import build_learner, learner_config
from tests.fixtures.jpeg_records import assert_same_items

CPU = torch.device("cpu")
OPTIONS = EpisodeOptions(ways=3, shots=2, query=2, image_size=16)


def numbered(count: int, fail_at: int | None = None, closed: list | None = None):
    """Episode-like dicts 0..count-1 with uint8 images whose pixels are their number."""
    try:
        for i in range(count):
            if i == fail_at:
                raise ValueError(f"item {i}: bad record")
            yield {
                "support_images": torch.full((2, 4, 4, 3), i, dtype=torch.uint8),
                "support_labels": np.array([0, 1]),
                "source": f"s{i}",
            }
    finally:
        if closed is not None:
            closed.append(True)


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "device-prefetch"]


def test_cpu_default_passes_items_through_unchanged():
    items = list(numbered(4))
    got = list(prefetch_to_device(iter(items), "cpu"))
    assert [g is i for g, i in zip(got, items)] == [True] * 4  # no thread, no copy, no staging
    assert not prefetch_threads()


@pytest.mark.parametrize("stage_ahead", [0, 1, 3])
def test_staged_and_threaded_items_keep_order_and_bytes(stage_ahead):
    prefetcher = DevicePrefetcher(numbered(9), CPU, stage_ahead=stage_ahead, thread=True)
    got = list(prefetcher)
    assert [g["source"] for g in got] == [f"s{i}" for i in range(9)]
    for i, g in enumerate(got):
        assert g["support_images"].dtype == torch.uint8  # uint8 until the step normalises
        assert torch.equal(g["support_images"], torch.full((2, 4, 4, 3), i, dtype=torch.uint8))
    assert not prefetch_threads()  # exhausted: the thread ended


def test_an_error_while_drawing_reaches_the_consumer_as_itself():
    closed: list = []
    prefetcher = DevicePrefetcher(numbered(9, fail_at=3, closed=closed), CPU, 1, thread=True)
    stream = iter(prefetcher)
    assert [next(stream)["source"] for _ in range(3)] == ["s0", "s1", "s2"]
    with pytest.raises(ValueError, match="item 3: bad record"):
        next(stream)
    assert closed == [True] and not prefetch_threads()


@pytest.mark.parametrize("thread", [False, True])
def test_closing_early_stops_the_thread_and_closes_the_feed(thread):
    closed: list = []
    stream = iter(DevicePrefetcher(numbered(1000, closed=closed), CPU, 1, thread=thread))
    assert next(stream)["source"] == "s0"
    stream.close()
    assert closed == [True] and not prefetch_threads()


def test_batches_map_their_images_only():
    batch = (torch.zeros(3, 4, 4, 3, dtype=torch.uint8), np.array([5, 6, 7]))
    assert [t.shape for t in image_tensors(batch)] == [(3, 4, 4, 3)]
    got = list(DevicePrefetcher(iter([batch]), CPU, stage_ahead=1, thread=True))
    assert torch.equal(got[0][0], batch[0]) and got[0][1] is batch[1]


@pytest.mark.parametrize("channels_last", [False, True])
def test_the_learner_gets_the_same_normalised_inputs(jpeg_dataset, channels_last):
    """Through a real feed (JPEG records): the prefetcher's items, staged and drawn in a
    thread, give the same normalised NCHW inputs as the items of today's path."""
    opener = functools.partial(open_episode_source, str(jpeg_dataset), "train", None, OPTIONS, 1)
    source = opener()
    try:
        plain = _loader_items(source, opener, 3, FeedConfig(0), CPU)
        expected = [next(plain) for _ in range(4)]
        plain.close()
        staged = iter(
            DevicePrefetcher(
                _loader_items(source, opener, 3, FeedConfig(0), CPU), CPU, 1, thread=True
            )
        )
        got = [next(staged) for _ in range(4)]
        staged.close()
    finally:
        source.close()
    assert_same_items(got, expected)
    learner = build_learner(learner_config("protonet", backbone="cnn4", image_size=16, width=0.25))
    learner.set_precision("off", channels_last)
    for a, b in zip(got, expected):
        ta, tb = learner.to_tensors(a), learner.to_tensors(b)
        assert torch.equal(ta.support_images, tb.support_images)
        assert torch.equal(ta.query_images, tb.query_images)
        assert ta.query_images.is_contiguous(memory_format=learner.memory_format)


def test_feed_batches_still_arrive_as_before(jpeg_dataset):
    opener = functools.partial(open_batch_source, str(jpeg_dataset), None, 8, OPTIONS, 1)
    source = opener()
    try:
        items = feed(source, opener, 0, FeedConfig(0), CPU)
        got = [next(items) for _ in range(2)]
        items.close()
    finally:
        source.close()
    assert [tuple(g[0].shape) for g in got] == [(8, 16, 16, 3)] * 2
    assert all(g[0].dtype == torch.uint8 and len(g[1]) == 8 for g in got)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="waits for a GPU run: needs CUDA")
def test_on_cuda_images_arrive_on_the_device_as_uint8_in_order():  # pragma: no cover
    device = torch.device("cuda")
    got = list(DevicePrefetcher(numbered(6), device))
    assert [g["source"] for g in got] == [f"s{i}" for i in range(6)]
    for i, g in enumerate(got):
        images = g["support_images"]
        assert images.is_cuda and images.dtype == torch.uint8
        assert torch.equal(images.cpu(), torch.full((2, 4, 4, 3), i, dtype=torch.uint8))
    assert not prefetch_threads()
