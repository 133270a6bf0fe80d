"""Decoding in worker processes (`EpisodeReader(decode_processes=N)`): the same pixels as inline
decoding, byte for byte; errors from workers name the file, class and record; abandoned
streams, dead workers and closing leave no slot or process behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from episodes.reading.decode_processes import (
    BUSY_SHARES,
    DecodeProcessError,
    check_shared_memory_room,
    share_count,
    split_rows,
)
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import Split
from episodes.records.example_proto import encode_image_example
from episodes.records.reader_errors import ReaderError
from episodes.records.record_index import index_path_for
from episodes.records.record_reader import CorruptRecordError
from episodes.records.tfrecord_io import write_records
from episodes.sampling.episode import EpisodeDescription
from episodes.sampling.sampler import SamplerConfig
from tests.fixtures.paths import REPO
from tests.fixtures.reader_datasets import ListSampler, solid_image, write_dataset

SHM = Path("/dev/shm")


def description(class_ids=(6, 7), support=((0, 3), (5,)), query=((1,), (2, 4)), index=0):
    return EpisodeDescription("toy", Split.TEST, index, class_ids, support, query)


@pytest.fixture
def toy(tmp_path):
    return write_dataset(tmp_path / "toy", per_class=(20,) * 9, fmt="JPEG")


def segments() -> set[str]:
    return set(os.listdir(SHM)) if SHM.is_dir() else set()


def test_split_rows_covers_every_row_once_in_order():
    rows = np.arange(7 * 3).reshape(7, 3)
    for parts in (1, 2, 3, 7, 9):
        pieces = split_rows(rows, parts)
        assert len(pieces) == min(parts, 7)
        assert np.array_equal(np.concatenate(pieces), rows)
        assert max(map(len, pieces)) - min(map(len, pieces)) <= 1
    assert split_rows(rows[:0], 2) == []


def test_process_decoding_equals_inline_decoding_byte_for_byte(toy):
    config = SamplerConfig(min_ways=2, max_ways=3)
    inline = EpisodeReader(
        toy.root, "test", config, 3, image_size=20, num_threads=0, decode_processes=0
    )
    workers = EpisodeReader(toy.root, "test", config, 3, image_size=20, decode_processes=2)
    with inline, workers:
        pairs = list(zip(inline.episodes(0, 12), workers.episodes(0, 12)))
        single = workers.episode(5)  # outside a stream: one ticket, collected at once
        ours = {name.lstrip("/") for name in workers._process_pool._segments}
        assert len(ours) >= 12  # episodes still held keep their own segments: none is reused
        for _ in workers.episodes(20, 30):  # each episode dropped before the next arrives
            ours |= {name.lstrip("/") for name in workers._process_pool._segments}
        # 30 more episodes, a few segments: those in flight (up to BUSY_SHARES per worker
        # while workers would idle) and the spares
        assert len(ours) <= 13 + workers.prefetch + 4 + BUSY_SHARES * 2
        live = {name.lstrip("/") for name in workers._process_pool._segments}
        assert live <= segments()
        processes = list(workers._process_pool._processes)
        assert len(processes) == 2 and all(p.is_alive() for p in processes)
    for a, b in pairs:
        assert a.episode_index == b.episode_index
        for key in ("support_images", "query_images", "support_labels", "query_class_ids"):
            assert np.array_equal(getattr(a, key), getattr(b, key)), key
    assert np.array_equal(single.query_images, pairs[5][0].query_images)
    assert all(not p.is_alive() for p in processes)  # closing stopped the workers
    assert not ours & segments()  # and unlinked their shared memory


def test_episodes_returned_do_not_alias_reused_memory(toy):
    config = SamplerConfig.fixed(ways=3, shots=2, query=2)
    with EpisodeReader(toy.root, "test", config, 0, image_size=16, decode_processes=1) as reader:
        first = reader.episode(0)
        kept = first.support_images.copy()
        for _ in reader.episodes(1, 6):
            pass
        assert np.array_equal(first.support_images, kept)


def test_abandoned_stream_gives_its_segments_back(toy):
    config = SamplerConfig.fixed(ways=3, shots=2, query=2)
    with EpisodeReader(
        toy.root, "test", config, 0, image_size=16, decode_processes=2, prefetch=3
    ) as reader:
        for _ in range(3):
            stream = reader.episodes(0, 50)
            next(stream)
            stream.close()  # 3 episodes still being decoded are discarded
        after = [e.episode_index for e in reader.episodes(10, 4)]
        assert after == [10, 11, 12, 13]
        assert len(reader._process_pool._segments) <= reader.prefetch + 3


def test_worker_reports_a_corrupt_record_with_file_class_and_record(toy):
    path = toy.root / "7.tfrecords"
    data = bytearray(path.read_bytes())
    offsets = np.frombuffer(index_path_for(path).read_bytes()[24:], dtype="<u8")
    data[int(offsets[4]) + 40] ^= 0xFF  # inside the payload of record 4
    path.write_bytes(bytes(data))
    reader = EpisodeReader(
        toy.root,
        "test",
        sampler=ListSampler([description(), description(index=1)]),
        image_size=8,
        decode_processes=2,
    )
    with reader:
        with pytest.raises(CorruptRecordError, match=rf"{path}.*class 7.*record 4"):
            reader.episode(0)
        # The pool is still usable after a worker reported an error.
        ok = reader.read(description(query=((1,), (2,))))
        assert len(ok.query_images) == 2


def test_worker_reports_an_undecodable_image(toy):
    path = toy.root / "6.tfrecords"
    payloads = [encode_image_example(solid_image(6, k), 6) for k in range(20)]
    payloads[3] = encode_image_example(b"\xff\xd8 a JPEG cut short", 6)
    write_records(str(path), payloads)
    index_path_for(path).unlink()  # rebuilt by the parent before workers read
    reader = EpisodeReader(
        toy.root, "test", sampler=ListSampler([description()]), image_size=8, decode_processes=2
    )
    with reader, pytest.raises(CorruptRecordError, match=rf"{path}.*class 6.*record 3"):
        reader.episode(0)
    assert index_path_for(path).exists()


def test_record_out_of_range_fails_in_the_parent_before_any_work(toy):
    reader = EpisodeReader(
        toy.root,
        "test",
        sampler=ListSampler([description(support=((0, 30), (5,)))]),
        image_size=8,
        decode_processes=2,
    )
    with reader:
        with pytest.raises(ReaderError, match=r"6.tfrecords, class 6: record 30"):
            reader.episode(0)
        assert reader._process_pool is None  # no worker was started for a bad episode


def test_a_dead_worker_is_reported_not_waited_for(toy):
    config = SamplerConfig.fixed(ways=3, shots=2, query=2)
    reader = EpisodeReader(toy.root, "test", config, 0, image_size=16, decode_processes=2)
    with reader:
        reader.episode(0)
        victim = reader._process_pool._processes[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=5)
        with pytest.raises(DecodeProcessError, match=rf"{victim.pid} exited unexpectedly"):
            reader.episode(1)
        with pytest.raises(DecodeProcessError, match="stopped earlier"):
            reader.episode(2)


@pytest.mark.parametrize("value", [-1, 1.5, "2"])
def test_bad_process_count_is_rejected(toy, value):
    with pytest.raises(ReaderError, match=rf"decode_processes={value!r}"):
        EpisodeReader(toy.root, "test", decode_processes=value)


def test_cli_prints_the_same_episodes_with_worker_processes(toy, capsys):
    from episodes.read import main

    argv = [
        "--dataset",
        str(toy.root),
        "--split",
        "test",
        "--mode",
        "fixed",
        "--ways",
        "3",
        "--shots",
        "2",
        "--query",
        "3",
        "--episodes",
        "3",
        "--image-size",
        "12",
    ]

    def printed() -> list[str]:  # without the timing lines
        return [
            line
            for line in capsys.readouterr().out.splitlines()
            if " ms" not in line and "/s" not in line
        ]

    assert main(argv) == 0
    inline = printed()
    assert main([*argv, "--decode-processes", "2"]) == 0
    assert printed() == inline
    assert sum(line.startswith("episode ") for line in inline) == 3


def test_too_little_shared_memory_is_reported_before_workers_write(tmp_path):
    check_shared_memory_room(1 << 20, str(tmp_path))  # a megabyte fits anywhere
    with pytest.raises(DecodeProcessError, match=rf"{tmp_path} has .* MB free .*--shm-size"):
        check_shared_memory_room(1 << 60, str(tmp_path))  # an exabyte fits nowhere


def _finalize_inherited_copy(reader) -> None:  # runs in a forked child
    reader._process_pool._finalizer()  # what garbage collection does at the child's exit
    os._exit(0)


def test_a_forked_child_leaves_the_parents_workers_and_memory_alone(toy):
    import multiprocessing

    config = SamplerConfig.fixed(ways=3, shots=2, query=2)
    with EpisodeReader(toy.root, "test", config, 0, image_size=16, decode_processes=2) as reader:
        before = reader.episode(0)
        names = {name.lstrip("/") for name in reader._process_pool._segments}
        child = multiprocessing.get_context("fork").Process(
            target=_finalize_inherited_copy, args=(reader,)
        )
        child.start()
        child.join(timeout=20)
        assert child.exitcode == 0
        assert all(p.is_alive() for p in reader._process_pool._processes)
        if SHM.is_dir():
            assert names <= segments()
        again = reader.episode(0)
        assert np.array_equal(again.query_images, before.query_images)


UNGUARDED_SCRIPT = """
import sys
import numpy as np
from episodes.reading.reader import EpisodeReader
from episodes.sampling.sampler import SamplerConfig

# Top level, no `if __name__ == "__main__":` guard, as in a notebook turned into a script.
config = SamplerConfig(min_ways=2, max_ways=3)
with EpisodeReader(sys.argv[1], "test", config, 3, image_size=12, decode_processes=2) as reader:
    episodes = list(reader.episodes(0, 3))
    workers = len(reader._process_pool._processes)
np.save(sys.argv[2], np.concatenate([e.query_images for e in episodes]))
print("workers", workers)
"""


@pytest.mark.parametrize("how", ["script", "python -c"])
def test_workers_start_from_a_script_without_main_guard(toy, tmp_path, how):
    """Workers never import the caller's __main__ (spawn and forkserver would re-run the
    script in each worker, which then dies bootstrapping)."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT)
    out = tmp_path / "pixels.npy"
    program = [str(script)] if how == "script" else ["-c", UNGUARDED_SCRIPT]
    root = str(REPO)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, *program, str(toy.root), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "workers 2" in done.stdout and "bootstrapping" not in done.stderr
    config = SamplerConfig(min_ways=2, max_ways=3)
    with EpisodeReader(
        toy.root, "test", config, 3, image_size=12, num_threads=0, decode_processes=0
    ) as reader:
        expected = np.concatenate([e.query_images for e in reader.episodes(0, 3)])
    assert np.array_equal(np.load(out), expected)


def test_multi_source_episodes_decode_the_same_in_workers(tmp_path):
    first = write_dataset(tmp_path / "one", name="one", per_class=(20,) * 9, fmt="JPEG")
    second = write_dataset(tmp_path / "two", name="two", per_class=(16,) * 6)  # PNG
    config = SamplerConfig(min_ways=2, max_ways=3)
    roots = [first.root, second.root]
    inline = EpisodeReader(
        roots, "test", config, 1, image_size=10, num_threads=0, decode_processes=0, dtype="float32"
    )
    workers = EpisodeReader(
        roots, "test", config, 1, image_size=10, decode_processes=2, dtype="float32"
    )
    with inline, workers:
        pairs = list(zip(inline.episodes(0, 16), workers.episodes(0, 16)))
    assert {a.source for a, _ in pairs} == {"one", "two"}
    for a, b in pairs:
        assert a.source == b.source and a.query_images.dtype == np.float32
        assert np.array_equal(a.support_images, b.support_images)
        assert np.array_equal(a.query_images, b.query_images)


def test_share_count_divides_the_workers_and_keeps_shares_large():
    for processes in (1, 2, 3, 4, 7, 8, 12, 15):
        for total in (0, 1, 15, 16, 33, 100, 500):
            parts = share_count(total, processes, min_share=16)
            assert processes % parts == 0
            assert parts == 1 or total // parts >= 16
            larger = [d for d in range(parts + 1, processes + 1) if processes % d == 0]
            assert all(total // d < 16 for d in larger)  # the largest such divisor
    assert share_count(100, 8, 16) == 4 and share_count(100, 15, 16) == 5
    assert share_count(100, 7, 16) == 1  # whole episodes: 7 has no divisor in 2..6


@pytest.mark.parametrize("min_share", [1, 6, 1000])  # spread, a few shares, whole episodes
def test_every_dispatch_gives_inline_bytes_in_order(toy, min_share):
    config = SamplerConfig.fixed(ways=3, shots=4, query=4)  # 24 images
    inline = EpisodeReader(
        toy.root, "test", config, 2, image_size=12, num_threads=0, decode_processes=0
    )
    workers = EpisodeReader(toy.root, "test", config, 2, image_size=12, decode_processes=4)
    with inline, workers:
        pool = workers._processes()
        pool.min_share = min_share
        depths, used = [], set()
        submit = pool.submit

        def recording_submit(*args):
            ticket = submit(*args)
            depths.append(len(pool._pending))
            used.update(position for position, _ in ticket.workers)
            return ticket

        pool.submit = recording_submit
        got = list(workers.episodes(0, 16))
        expected = list(inline.episodes(0, 16))
    assert [e.episode_index for e in got] == list(range(16))
    for a, b in zip(expected, got):
        assert np.array_equal(a.support_images, b.support_images)
        assert np.array_equal(a.query_images, b.query_images)
        assert np.array_equal(a.query_labels, b.query_labels)
    assert used == {0, 1, 2, 3}  # every worker decoded
    if min_share == 1000:  # one worker per episode: 4 workers need more than prefetch + 1
        assert max(depths) > workers.prefetch + 1
    assert max(depths) <= workers.prefetch + 1 + BUSY_SHARES * 4


def test_shares_go_to_the_least_busy_workers_in_turn(toy):
    config = SamplerConfig.fixed(ways=3, shots=2, query=2)
    pool_reader = EpisodeReader(toy.root, "test", config, image_size=8, decode_processes=3)
    rows = [(0, 6, 0), (1, 6, 1)]
    with pool_reader:
        pool = pool_reader._processes()
        count = 3 * BUSY_SHARES  # 2 images: one share each
        tickets = [pool.submit("toy", rows, 2) for _ in range(count)]
        assert [t.workers[0][0] for t in tickets] == [0, 1, 2] * BUSY_SHARES
        assert pool._queued_shares == [BUSY_SHARES] * 3 and not pool.hungry()
        first = pool.collect(tickets[0]).copy()
        assert pool._queued_shares == [BUSY_SHARES - 1, BUSY_SHARES, BUSY_SHARES]
        assert pool.hungry()
        assert pool.submit("toy", rows, 2).workers[0][0] == 0  # the least busy one
        for ticket in tickets[1:]:
            assert np.array_equal(pool.collect(ticket), first)  # same rows, same pixels


def test_the_benchmarks_emulated_decode_sleeps_instead_of_decoding(toy):
    config = SamplerConfig.fixed(ways=3, shots=2, query=2)
    with EpisodeReader(toy.root, "test", config, 0, image_size=8, decode_processes=2) as reader:
        reader._emulate_decode_s = 0.001  # benchmarks/episodes.py --emulate-decode-ms 1
        emulated = list(reader.episodes(0, 3))
        assert [e.episode_index for e in emulated] == [0, 1, 2]
        assert all(not e.support_images.any() for e in emulated)  # fresh segments: nothing written
    with EpisodeReader(toy.root, "test", config, 0, image_size=8, decode_processes=2) as reader:
        assert all(e.support_images.any() for e in reader.episodes(0, 3))  # decoded for real
