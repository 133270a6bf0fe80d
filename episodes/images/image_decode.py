"""Decode encoded images (JPEG, PNG, ...) into square RGB uint8 arrays, alone or in parallel.

Two ways to resize to `size` x `size` (both ignore the aspect ratio, as Meta-Dataset does; an
image already that size is never resampled):

- "reference" (the default): Meta-Dataset's own, TF1 bilinear with `align_corners=True` on the
  fully decoded image (`episodes.images.reference_resize`), so pixels match the reference reader's;
- "antialias": JPEGs are first reduced inside the decoder (DCT scaling by 1/2, 1/4 or 1/8, only
  while the result stays at least `size` on both sides), then Pillow's BILINEAR filter
  (antialiased when shrinking: its support grows with the scale factor). Less aliasing on large
  sources, and much faster for them (an ImageNet JPEG decodes at a quarter of its size).

JPEGs decode with simplejpeg (libjpeg-turbo, straight into the output array, no Python header
parsing: about twice as fast as `Image.open` on 84x84 records). "reference" asks it for TF's
default DCT (`INTEGER_FAST`) with fancy chroma upsampling, which gives `tf.io.decode_jpeg`'s
pixels exactly; "antialias" for the accurate DCT and the same DCT scaling `Image.draft` picks,
which gives Pillow's pixels exactly. Other formats, and the rare JPEGs libjpeg only decodes with
warnings, go through Pillow (accurate DCT). The GIL is released while decoding and resampling,
so a thread pool decodes partly in parallel.
"""

from __future__ import annotations

import io
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

import numpy as np
import simplejpeg
from PIL import Image, ImageFile

from episodes.images.image_size_limit import size_problem, use_image_size_limit
from episodes.images.reference_resize import reference_resize_into
from episodes.util.cli_errors import UsageError, UserError

__all__ = [
    "DEFAULT_RESIZE",
    "INTERPOLATION",
    "ImageDecodeError",
    "MIN_CHUNK",
    "ParallelismGauge",
    "RESIZE_MODES",
    "check_resize",
    "chunk_ranges",
    "decode_image",
    "decode_image_into",
    "decode_images",
    "draft_scale",
    "scale_images",
    "scale_images_into",
    "submit_chunks",
    "submit_jobs",
    "usable_cores",
    "wait_all",
]

ImageFile.LOAD_TRUNCATED_IMAGES = False
use_image_size_limit()  # the converter's limit: every converted image decodes

RESIZE_MODES = ("reference", "antialias")
DEFAULT_RESIZE = "reference"  # follows Meta-Dataset's decoder (docs/episodes.md, "Pixels: which resize, and why")
INTERPOLATION = "bilinear"  # what caches written before `resize` existed recorded (antialias)
_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP", "TIFF", "PPM")
MIN_CHUNK = 8  # images per thread-pool task: amortises the task overhead


class ImageDecodeError(UserError, ValueError):
    """Bytes that Pillow cannot decode into an image."""


def check_resize(resize: str) -> str:
    """`resize` itself when it names a resize mode, else UsageError naming the choices."""
    if resize not in RESIZE_MODES:
        raise UsageError(f"resize={resize!r}: expected one of {RESIZE_MODES}")
    return resize


def draft_scale(width: int, height: int, size: int) -> int:
    """The DCT reduction `Image.draft` picks for a `size` x `size` target: 8, 4, 2 or 1."""
    ratio = min(width // size, height // size)
    return next((s for s in (8, 4, 2) if ratio >= s), 1)


def _open_rgb(data: bytes, size: int | None, draft: bool) -> Image.Image:
    """Any format through Pillow, converted to RGB; JPEG draft reduction when `draft`."""
    image = Image.open(io.BytesIO(data), formats=_FORMATS)
    if draft and size is not None and image.format == "JPEG":
        width, height = image.size
        if width >= 2 * size and height >= 2 * size:  # else draft would keep scale 1
            image.draft("RGB", (size, size))
    if image.mode == "RGB":
        image.load()  # decode in place: convert("RGB") would only copy the pixels
    else:
        image = image.convert("RGB")  # also forces the full decode
    return image


def _decode_jpeg(data: bytes, size: int, antialias: bool, out: np.ndarray) -> np.ndarray | None:
    """Decode a JPEG with simplejpeg: into `out` when it has the right size already (returns
    None), else a new array at the decoded size; raises ValueError for what it cannot decode
    cleanly (the caller then asks Pillow)."""
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    if size_problem(width, height):  # Pillow refuses it with the same limit
        raise ValueError("over the image size limit")
    scale = draft_scale(width, height, size) if antialias else 1
    options = {"fastdct": not antialias, "fastupsample": False}
    if scale > 1:
        options.update(min_height=-(-height // scale), min_width=-(-width // scale))
        options["min_factor"] = scale
    elif (height, width) == out.shape[:2]:
        simplejpeg.decode_jpeg(data, "RGB", buffer=out, **options)
        return None
    return simplejpeg.decode_jpeg(data, "RGB", **options)


def _decode_into(data: bytes, out: np.ndarray, resize: str) -> None:
    size = out.shape[0]
    antialias = resize == "antialias"
    pixels = None
    if data[:2] == b"\xff\xd8":  # JPEG
        try:
            pixels = _decode_jpeg(data, size, antialias, out)
            if pixels is None:
                return
        except ValueError:  # CMYK, 12-bit, corrupt or only decodable with warnings: Pillow
            pixels = None
    if pixels is None:
        image = _open_rgb(data, size, draft=antialias)
        if image.size == (size, size):
            out[...] = np.asarray(image)
            return
        if antialias:
            out[...] = np.asarray(image.resize((size, size), Image.Resampling.BILINEAR))
            return
        pixels = np.asarray(image)
    if antialias:
        if pixels.shape[:2] == out.shape[:2]:
            out[...] = pixels
        else:
            image = Image.fromarray(pixels)
            out[...] = np.asarray(image.resize((size, size), Image.Resampling.BILINEAR))
        return
    reference_resize_into(pixels, out)


def decode_image(data: bytes, size: int | None = 84, resize: str = DEFAULT_RESIZE) -> np.ndarray:
    """(size, size, 3) uint8 RGB array of an encoded image; `size=None` keeps the source size."""
    check_resize(resize)
    if size is None:
        try:
            return np.asarray(_open_rgb(data, None, draft=False))
        except Exception as exc:  # Pillow raises many types for bad bytes
            raise ImageDecodeError(f"not a decodable image ({type(exc).__name__}: {exc})") from None
    if size < 1:
        raise UsageError(f"image size must be >= 1, got {size}")
    out = np.empty((size, size, 3), np.uint8)
    decode_image_into(data, out, resize)
    return out


def decode_image_into(data: bytes, out: np.ndarray, resize: str = DEFAULT_RESIZE) -> None:
    """Decode and resize into a preallocated (S, S, 3) uint8 array."""
    try:
        _decode_into(data, out, resize)
    except Exception as exc:  # Pillow raises many types for bad bytes
        raise ImageDecodeError(f"not a decodable image ({type(exc).__name__}: {exc})") from None


def scale_images(
    images: np.ndarray, dtype: np.dtype | str, float_range: tuple[float, float] = (0.0, 1.0)
) -> np.ndarray:
    """uint8 images unchanged, or as `dtype` floats mapping 0..255 linearly onto float_range."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return images
    out = np.empty(images.shape, dtype)
    scale_images_into(images, out, float_range)
    return out


def scale_images_into(
    images: np.ndarray, out: np.ndarray, float_range: tuple[float, float] = (0.0, 1.0)
) -> None:
    """`scale_images` written into a float array of the same shape (decode workers use it, so
    both give the same bits)."""
    lo, hi = float_range
    out[...] = images
    out *= (hi - lo) / 255.0
    if lo:
        out += lo


def chunk_ranges(count: int, parts: int, min_chunk: int = MIN_CHUNK) -> list[range]:
    """Split 0..count-1 into about `parts` contiguous ranges of at least `min_chunk`."""
    if count <= 0:
        return []
    size = max(min_chunk, -(-count // max(1, parts)))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


Task = tuple[Future, Callable[[], None]]


def submit_jobs(executor: Executor, jobs: Sequence[Callable[[], None]]) -> list[Task]:
    """Queue `jobs` on `executor`; `wait_all` runs any that did not start in the waiting thread."""
    return [(executor.submit(job), job) for job in jobs]


def submit_chunks(
    fill: Callable[[int], None], count: int, executor: Executor | None, workers: int
) -> list[Task] | None:
    """Run `fill(i)` for i in 0..count-1: in chunks on `executor`, or inline when it is None.

    About 4 chunks per worker, so that the thread waiting in `wait_all` can take the chunks
    nobody started yet. Returns the tasks (wait with `wait_all`), or None when done inline."""
    if executor is None:
        for i in range(count):
            fill(i)
        return None

    def job(chunk: range) -> Callable[[], None]:
        def run() -> None:
            for i in chunk:
                fill(i)

        return run

    return submit_jobs(executor, [job(c) for c in chunk_ranges(count, 4 * workers)])


def wait_all(tasks: list[Task] | None) -> None:
    """Finish every task: those not started yet run here (the waiting thread helps instead of
    idling), the others are waited for; then the first error is raised, once nothing still
    writes."""
    if not tasks:
        return
    error: BaseException | None = None
    for future, job in reversed(tasks):  # the last queued are the least likely started
        if future.cancel():
            try:
                job()
            except BaseException as exc:  # re-raised below, after the others finished
                error = error or exc
    for future, _ in tasks:
        if not future.cancelled():
            exc = future.exception()
            if exc is not None and error is None:
                error = exc
    if error is not None:
        raise error


def decode_images(
    images: Sequence[bytes],
    size: int,
    executor: Executor | None = None,
    workers: int = 1,
    describe: Callable[[int], str] | None = None,
    resize: str = DEFAULT_RESIZE,
) -> np.ndarray:
    """Decode many images into one (len(images), size, size, 3) uint8 array, optionally in
    parallel; a failure names the image through `describe(i)`."""
    out = np.empty((len(images), size, size, 3), dtype=np.uint8)

    def fill(i: int) -> None:
        try:
            decode_image_into(images[i], out[i], resize)
        except ImageDecodeError as exc:
            where = describe(i) if describe is not None else f"image {i}"
            raise ImageDecodeError(f"{where}: {exc}") from None

    wait_all(submit_chunks(fill, len(images), executor, workers))
    return out


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


class ParallelismGauge:
    """Decides, episode by episode, whether the reader decodes on its thread pool or inline.

    Pillow holds the GIL while it parses headers, so for small images (and on one free core: a
    CPU quota, or other processes on the others) worker threads can be slower than decoding
    inline; for large images, whose decoding runs without the GIL, they are faster. So both are
    timed, in cycles: a probe decodes `settle + window` episodes on the pool *synchronously*
    (the first `settle` not counted: they may share the threads with episodes still in flight),
    then `window` inline; each counted episode gives its decode time per image. The way with
    the lower median then runs `backoff` episodes (the pool pipelined), and a new probe
    follows. `backoff` doubles while the same way keeps winning, up to `max_backoff`. The pool
    must be faster by `margin` (10%): a hysteresis against load noise, in favour of the way
    that leaves the caller's cores free. Timing whole episodes in isolation keeps the caller's
    pauses and the pipeline's bursts out of the comparison."""

    def __init__(
        self,
        workers: int,
        window: int = 3,
        settle: int = 2,
        backoff: int = 16,
        max_backoff: int = 256,
        margin: float = 1.1,
    ):
        self.enabled = workers >= 1 and usable_cores() >= 2
        self.window = max(1, window)
        self.settle = max(0, settle)
        self.first_backoff = backoff
        self.max_backoff = max_backoff
        self.backoff = backoff
        self.margin = margin
        self.rates: dict[str, float] = {}  # "inline" / "pool" -> images per second, last probe
        self.winner: str | None = None
        self._samples: dict[str, list[float]] = {"pool": [], "inline": []}
        self._plan: deque[tuple[str, bool, bool]] = deque()
        self._running = False  # the plan holds the winner's run (else a probe)
        self._lock = threading.Lock()
        self._plan_probe()

    def _plan_probe(self) -> None:
        self._samples = {"pool": [], "inline": []}
        self._plan.extend([("pool", True, False)] * self.settle)
        self._plan.extend([("pool", True, True)] * self.window)
        self._plan.extend([("inline", True, True)] * self.window)

    def next_episode(self) -> tuple[str, bool, bool]:
        """(mode, synchronous, timed) for the next episode: mode "pool" or "inline"; a
        synchronous episode is finished before the reader goes on; a timed one is reported
        with `record`."""
        if not self.enabled:
            return "inline", True, False
        with self._lock:
            if not self._plan:
                self._decide()
            return self._plan.popleft()

    def record(self, mode: str, images: int, seconds: float) -> None:
        """A timed episode of `images` images took `seconds` to decode in `mode`."""
        if images > 0 and seconds > 0:
            with self._lock:
                self._samples[mode].append(seconds / images)

    def _decide(self) -> None:  # with the lock held; the plan is empty
        if self._running:
            self._running = False
            self._plan_probe()
            return
        for mode, samples in self._samples.items():
            if samples:
                self.rates[mode] = 1.0 / float(np.median(samples))
        if "pool" in self.rates and "inline" in self.rates:
            pool_wins = self.rates["pool"] > self.margin * self.rates["inline"]
            winner = "pool" if pool_wins else "inline"
        else:  # nothing measured (all episodes empty): keep decoding inline for a while
            winner = "inline"
        if winner == self.winner:
            self.backoff = min(2 * self.backoff, self.max_backoff)
        else:
            self.backoff = self.first_backoff
        self.winner = winner
        self._plan.extend([(winner, False, False)] * self.backoff)
        self._running = True
