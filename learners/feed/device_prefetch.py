"""Items to the device ahead of the step: their uint8 images copied from pinned memory on a side
CUDA stream while the previous step computes (double-buffered: one item on its way while the
step uses the other); the step then scales, normalises and lays them out on the device
(`episode_batch.images_to_tensor`), so 4x fewer bytes cross the bus than float32 would.

A background thread draws items from the feed (the reader's sampling and bookkeeping, the
DataLoader's pinning) so that the training thread only waits when loading is truly slower than
the step. On a CPU device nothing is copied and, by default, no thread runs: items pass through
unchanged (the same tensors as without this module). Items are dict episodes (`*_images`
tensors) or (images, class ids) batches, as `episode_feed.item_tensors` makes them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["DevicePrefetcher", "image_tensors", "map_images", "prefetch_to_device"]

_END = object()


@dataclass
class _Failure:
    """An exception raised while drawing items, re-raised in the consuming thread."""

    error: BaseException


@dataclass
class _Staged:
    """An item whose images are being copied on the side stream (`event` marks the end)."""

    item: Any
    event: Any = None  # torch.cuda.Event, None when nothing was copied


def map_images(item: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`item` with `fn` applied to its image tensors (dict `*_images` values, or a batch's
    first element); everything else is kept as it is."""
    if isinstance(item, tuple):
        images, *rest = item
        return (fn(images) if isinstance(images, torch.Tensor) else images, *rest)
    if isinstance(item, dict):
        return {
            key: fn(value) if key.endswith("_images") and isinstance(value, torch.Tensor) else value
            for key, value in item.items()
        }
    return item


def image_tensors(item: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    map_images(item, lambda t: found.append(t) or t)
    return found


def _pinned(tensor: torch.Tensor) -> torch.Tensor:
    """Page-locked host memory (what an asynchronous copy needs); device tensors as they are."""
    if tensor.device.type != "cpu" or tensor.is_pinned():
        return tensor
    return tensor.pin_memory()


class DevicePrefetcher:
    """Iterate `items` with their images already on `device` (see the module docstring).

    `stage_ahead` items are copied ahead of the one handed out (1 on CUDA: double-buffered; 0
    on CPU, where nothing is copied); `thread` draws and pins items in a background thread
    (default: on CUDA only), keeping up to `queue_size` of them ready. Order and contents are
    those of `items`; an error raised while drawing reaches the consumer as itself. `close()`
    (also on exhaustion, errors and garbage collection of the generator) stops the thread and
    closes `items`."""

    def __init__(
        self,
        items: Iterator[Any],
        device: torch.device | str,
        stage_ahead: int | None = None,
        thread: bool | None = None,
        queue_size: int = 2,
    ):
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        self.stage_ahead = (1 if cuda else 0) if stage_ahead is None else stage_ahead
        if self.stage_ahead < 0 or queue_size < 1:
            raise ValueError(
                f"stage_ahead {stage_ahead} / queue_size {queue_size}: expected >= 0 / 1"
            )
        self.items = items
        self.stream = torch.cuda.Stream(self.device) if cuda else None
        self._pin = cuda
        self._queue: queue.Queue | None = None
        self._exhausted = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if cuda if thread is None else thread:
            self._queue = queue.Queue(maxsize=queue_size)
            self._thread = threading.Thread(
                target=self._produce, name="device-prefetch", daemon=True
            )
            self._thread.start()

    # -- the drawing side ----------------------------------------------------------------

    def _host(self, item: Any) -> Any:
        return map_images(item, _pinned) if self._pin else item

    def _produce(self) -> None:
        assert self._queue is not None
        try:
            for item in self.items:
                self._put(self._host(item))
                if self._stop.is_set():
                    break
        except BaseException as error:  # handed to the consumer, which raises it
            self._put(_Failure(error))
            return
        finally:
            close = getattr(self.items, "close", None)
            if close is not None:
                close()  # in this thread, which is the one that ran the generator
        self._put(_END)

    def _put(self, item: Any) -> None:
        """Queue `item` (or an end marker), waiting for room unless the consumer has stopped."""
        assert self._queue is not None
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _draw(self) -> Any:
        """The next host item, `_END` when there is none."""
        if self._exhausted:
            return _END
        if self._queue is None:
            try:
                return self._host(next(self.items))
            except StopIteration:
                self._exhausted = True
                return _END
        marker = self._queue.get()
        if isinstance(marker, _Failure):
            self._exhausted = True
            raise marker.error
        if marker is _END:
            self._exhausted = True
        return marker

    # -- the device side -----------------------------------------------------------------

    def _stage(self, item: Any) -> _Staged:
        """Start copying `item`'s images to the device on the side stream."""
        if self.device.type == "cpu":
            return _Staged(item)  # already there: the very same tensors
        if self.stream is None:  # another accelerator: a plain copy
            return _Staged(map_images(item, lambda t: t.to(self.device)))
        with torch.cuda.stream(self.stream):
            moved = map_images(item, lambda t: t.to(self.device, non_blocking=True))
            event = torch.cuda.Event()
            event.record(self.stream)
        return _Staged(moved, event)

    def _hand_over(self, staged: _Staged) -> Any:
        """The item, once the consumer's stream waits for its copy (and owns its memory)."""
        if staged.event is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(staged.event)
            for tensor in image_tensors(staged.item):
                tensor.record_stream(current)  # not reused before the step is done with it
        return staged.item

    def __iter__(self) -> Iterator[Any]:
        staged: list[_Staged] = []
        error: BaseException | None = None  # raised once the items before it are handed out
        try:
            while True:
                while error is None and len(staged) <= self.stage_ahead:
                    try:
                        item = self._draw()
                    except Exception as exc:
                        error = exc
                        break
                    if item is _END:
                        break
                    staged.append(self._stage(item))
                if not staged:
                    if error is not None:
                        raise error
                    return
                yield self._hand_over(staged.pop(0))
        finally:
            self.close()

    def close(self) -> None:
        """Stop drawing (the thread finishes its current item, then closes `items`)."""
        self._stop.set()
        if self._thread is not None:
            if self._thread is not threading.current_thread():
                self._thread.join()
            self._thread = None
        else:
            close = getattr(self.items, "close", None)
            if close is not None:
                close()


def prefetch_to_device(items: Iterator[Any], device: torch.device | str) -> Iterator[Any]:
    """`items` through a `DevicePrefetcher` with the defaults for `device`."""
    return iter(DevicePrefetcher(items, device))
