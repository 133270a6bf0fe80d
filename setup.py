"""Few-shot taskset toolkit: Beam converters, ATG splits, Meta-Dataset episodes, learners."""

import re
from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

DATA_FOLDERS = (
    "beam_pipelines.sources.reference_data",
    "learners.recipes",
    "episodes.records.published",
)

# The one version number, read (not imported) from episodes/util/release.py.
RELEASE = (Path(__file__).resolve().parent / "episodes" / "util" / "release.py").read_text()
VERSION = re.search(r'^VERSION = "([^"]+)"$', RELEASE, re.MULTILINE).group(1)

setup(
    name="fewshot-tasksets",
    version=VERSION,
    description=(
        "Convert image datasets to per-class TFRecords with Apache Beam, generate class "
        "splits of controlled difficulty (ATG), sample Meta-Dataset episodes, train learners."
    ),
    # tomllib (learners.train --recipe) is 3.11's
    python_requires=">=3.11",
    # the data folders (recipes/<paper>/, published/<source>/, reference_data/) are listed as
    # packages too, so setuptools installs them without a warning block per folder
    packages=find_packages(include=["episodes*", "beam_pipelines*", "splits*", "learners*"])
    + find_namespace_packages(include=[f"{folder}*" for folder in DATA_FOLDERS]),
    package_data={
        "episodes.records": ["published/*.json", "published/*/*.json"],
        "beam_pipelines.sources": ["reference_data/*"],
        "learners": ["recipes/*/*.toml"],
    },
    include_package_data=True,
    install_requires=[
        "apache-beam>=2.60",
        "crcmod>=1.7",
        "google-crc32c>=1.5",
        "tensorflow-cpu>=2.16; platform_machine=='x86_64'",
        "tensorflow-datasets>=4.9",
        "numpy>=1.26",
        "scikit-learn>=1.4",
        "scipy>=1.11",
        "fonttools>=4.40",
        "protobuf>=4.25",
        "pillow>=10",
        # libjpeg-turbo with the DCT choice: TF's exact JPEG pixels, decoded into the output.
        "simplejpeg>=1.8",
        "matplotlib>=3.8",
        "tqdm>=4.66",
        # Pinned exactly in requirements.lock (CPU wheel); see BUILD.md for CUDA builds.
        "torch>=2.3",
    ],
    extras_require={
        "dev": ["pytest>=8", "ruff>=0.6"],
        # Object storage through Beam's FileSystems: s3:// needs boto3; gs:// Beam's GCS client
        # (google-auth-httplib2 makes Beam use Google credentials; BUILD.md, object storage).
        "s3": ["boto3>=1.34"],
        "gcs": [
            "google-cloud-storage>=2.14",
            "google-apitools>=0.5.31",
            "google-auth-httplib2>=0.2",
        ],
        # `--runner DaskRunner` (beam_pipelines.runners.dask_runner), as Beam's own dask extra.
        "dask": ["dask>=2024.4.2", "distributed>=2024.4.2"],
        # GPU JPEG decoding (decode_device="cuda"): the torchvision built for the CUDA torch
        # installed (BUILD.md, GPU install); NVML for the feed benchmark's GPU utilisation.
        "gpu": ["torchvision>=0.18", "nvidia-ml-py>=12"],
    },
)
