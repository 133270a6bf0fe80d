"""GPU JPEG decoding (`EpisodeReader(decode_device="cuda")`, `episodes.images.gpu_decode`): its
resize is the reference resize's arithmetic, byte for byte, given the same decoded pixels (run
here on the CPU); without CUDA the option is refused in one line before any work. The decode
itself (nvJPEG against libjpeg-turbo) is compared on a GPU only: those tests wait for one."""

from __future__ import annotations

import io

import numpy as np
import pytest
import simplejpeg
import torch
from PIL import Image

from episodes.images.gpu_decode import gpu_decode_problem, reference_resize_torch
from episodes.images.image_decode import decode_image
from episodes.images.reference_resize import reference_resize_into
from episodes.reading.reader import EpisodeReader
from episodes.records.reader_errors import ReaderError
from episodes.sampling.sampler import SamplerConfig
from tests.fixtures.reader_datasets import write_dataset

CUDA = torch.cuda.is_available() and gpu_decode_problem("cuda") is None


@pytest.mark.parametrize(
    "shape, size", [((224, 224), 84), ((375, 500), 84), ((40, 30), 84), ((84, 84), 84), ((2, 1), 5)]
)
def test_the_torch_resize_gives_the_reference_resizes_bytes(shape, size):
    rng = np.random.default_rng(sum(shape) + size)
    pixels = rng.integers(0, 256, size=(*shape, 3), dtype=np.uint8)
    expected = np.empty((size, size, 3), np.uint8)
    reference_resize_into(pixels, expected)
    got = reference_resize_torch(torch.from_numpy(pixels), size)
    assert got.dtype == torch.uint8 and tuple(got.shape) == (size, size, 3)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_on_a_jpeg_the_torch_resize_matches_the_reference_path():
    """The reference path's full-size JPEG decode then the torch resize = `decode_image`."""
    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.integers(-3, 4, size=(75, 101, 3)), axis=1) + 128
    buffer = io.BytesIO()
    Image.fromarray(np.clip(smooth, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    data = buffer.getvalue()
    full = simplejpeg.decode_jpeg(data, "RGB", fastdct=True, fastupsample=False)  # as it does
    got = reference_resize_torch(torch.from_numpy(full), 20).numpy()
    np.testing.assert_array_equal(got, decode_image(data, 20))


@pytest.mark.skipif(CUDA, reason="this machine can decode on the GPU")
def test_without_cuda_decode_device_cuda_is_refused_in_one_line(tmp_path):
    spec = write_dataset(tmp_path / "toy", per_class=(3,) * 9, fmt="JPEG")
    with pytest.raises(ReaderError, match=r"decode_device='cuda': ") as caught:
        EpisodeReader(spec.root, "test", SamplerConfig.fixed(3, 1, 1), 0, decode_device="cuda")
    assert "\n" not in str(caught.value)
    assert gpu_decode_problem("cpu") == "device 'cpu': GPU decoding needs a CUDA device"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"decode_device": "tpu"}, r"decode_device='tpu': expected one of \('cpu', 'cuda'\)"),
        ({"decode_device": "cuda", "dtype": "float32"}, "gives uint8 images"),
        ({"decode_device": "cuda", "resize": "antialias"}, "resizes like the reference"),
    ],
)
def test_bad_decode_device_options_are_refused(tmp_path, options, message):
    spec = write_dataset(tmp_path / "toy", per_class=(3,) * 9, fmt="JPEG")
    with pytest.raises(ReaderError, match=message):
        EpisodeReader(spec.root, "test", SamplerConfig.fixed(3, 1, 1), 0, **options)


@pytest.mark.skipif(not CUDA, reason="waits for a GPU run: needs CUDA and torchvision")
def test_gpu_decoded_episodes_are_close_to_the_reference(tmp_path):  # pragma: no cover
    spec = write_dataset(tmp_path / "toy", per_class=(20,) * 9, fmt="JPEG")
    config = SamplerConfig.fixed(3, 5, 5)
    cpu = EpisodeReader(spec.root, "test", config, 0, image_size=32, decode_processes=0)
    gpu = EpisodeReader(spec.root, "test", config, 0, image_size=32, decode_device="cuda")
    with cpu, gpu:
        for a, b in zip(cpu.episodes(0, 4), gpu.episodes(0, 4)):
            assert b.query_images.is_cuda and b.query_images.dtype == torch.uint8
            diff = np.abs(b.query_images.cpu().numpy().astype(int) - a.query_images)
            assert diff.mean() < 2.0 and diff.max() <= 32
            np.testing.assert_array_equal(a.query_labels, b.query_labels)
