"""Descriptions computed ahead in a helper process: the same stream as the sampler's, in
order, for finite and endless ranges; errors keep their type and message; the helper stops when
the stream is closed."""

from __future__ import annotations

import numpy as np
import pytest

from episodes.images.decoded_cache import write_decoded_cache
from episodes.reading.description_prefetch import DescriptionPrefetcher
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import Split
from episodes.records.reader_errors import ReaderError
from episodes.sampling.sampler import EpisodeSampler, SamplerConfig
from tests.fixtures.reader_datasets import ListSampler, write_dataset


@pytest.fixture
def toy(tmp_path):
    return write_dataset(tmp_path / "toy", per_class=(20,) * 9)


def test_prefetched_stream_equals_the_samplers_own(toy):
    sampler = EpisodeSampler(toy, Split.TRAIN, SamplerConfig(min_ways=2, max_ways=3), 11)
    with DescriptionPrefetcher(sampler, start=5, stop=80, batch=7, ahead=2) as stream:
        got = list(stream)
    assert [d.episode_index for d in got] == list(range(5, 80))  # last batch is partial
    assert got == [sampler.episode(i) for i in range(5, 80)]


def test_endless_stream_stops_its_helper_when_closed(toy):
    sampler = EpisodeSampler(toy, Split.TEST, SamplerConfig.fixed(ways=3, shots=2, query=2), 0)
    stream = DescriptionPrefetcher(sampler, start=1000, stop=None, batch=16)
    first = [next(stream) for _ in range(50)]
    assert [d.episode_index for d in first] == list(range(1000, 1050))
    process = stream._process
    assert process.is_alive()
    stream.close()
    assert not process.is_alive()
    stream.close()  # idempotent


def test_helper_errors_keep_their_type_and_message(toy):
    sampler = EpisodeSampler(toy, Split.TEST, SamplerConfig.fixed(ways=3, shots=2, query=2), 0)
    listed = ListSampler([sampler.episode(i) for i in range(10)])
    stream = DescriptionPrefetcher(listed, start=0, stop=25, batch=4)
    got = []
    with pytest.raises(IndexError, match="list index out of range"):
        for description in stream:
            got.append(description)
    assert len(got) == 8  # the batches before the failing one (indices 8..11) arrived
    assert not stream._process.is_alive()


def test_an_unpicklable_sampler_is_refused_before_any_process_starts():
    class LocalSampler:
        def __init__(self):
            self.draw = lambda i: i  # lambdas do not pickle

        def episode(self, index):
            return self.draw(index)

    with pytest.raises(ReaderError, match="LocalSampler.*cannot be sent to a helper process"):
        DescriptionPrefetcher(LocalSampler())


def test_reader_with_sampler_process_reads_the_same_episodes(toy):
    config = SamplerConfig.fixed(ways=3, shots=2, query=3)
    write_decoded_cache(toy, 12)
    for cache in ("never", "always"):
        plain = EpisodeReader(toy.root, "test", config, 4, image_size=12, decoded_cache=cache)
        ahead = EpisodeReader(
            toy.root, "test", config, 4, image_size=12, decoded_cache=cache, sampler_process=True
        )
        with plain, ahead:
            pairs = list(zip(plain.episodes(3, 40), ahead.episodes(3, 40)))
            assert len(pairs) == 40
            for a, b in pairs:
                assert a.episode_index == b.episode_index
                assert a.class_names == b.class_names
                assert np.array_equal(a.support_images, b.support_images)
                assert np.array_equal(a.query_images, b.query_images)
