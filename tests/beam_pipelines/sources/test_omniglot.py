"""Omniglot through the shared source test: alphabets as superclasses, the 5 smallest
background alphabets valid, evaluation test, 4 drawers per character, the truncated PNG
rejected. (The convert CLI's behaviour on Omniglot is tests/beam_pipelines/test_convert_omniglot.py.)"""

from __future__ import annotations

from beam_pipelines.sources.omniglot import OmniglotSource
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestOmniglot(SourceTestCase):
    SOURCE = OmniglotSource
    FIXTURE = write_omniglot_fixture
    CLASSES_PER_SPLIT = (18, 13, 7)
    IMAGES_PER_CLASS = 4  # one per drawer
    REJECTED = 1  # the truncated PNG
    IMAGE_FORMAT = "jpeg"  # the reference converter's pixels by default
    SPEC_KEYS = ("pixel_convention",)
