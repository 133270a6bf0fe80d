"""The conversion job (`python -m beam_pipelines.convert`) and what only it uses: the
pipeline, its options and progress, the writer of class files, image codecs and pixel conventions.
"""

from episodes.util.moved_modules import moved_names

__all__ = [
    "frame_spill",
    "image_codec",
    "jpeg_markers",
    "options",
    "pipeline",
    "pixel_conventions",
    "progress",
    "whole_class_file",
    "writer",
]

# `beam_pipelines.conversion` was the pipeline's module until 0.2.0: its names still resolve
# here, with a DeprecationWarning naming beam_pipelines.conversion.pipeline (until 0.3.0).
__getattr__ = moved_names(
    __name__,
    {
        "ConversionReport": "beam_pipelines.conversion.pipeline",
        "abort_output": "beam_pipelines.conversion.pipeline",
        "begin_output": "beam_pipelines.conversion.pipeline",
        "check_output": "beam_pipelines.conversion.pipeline",
        "clean_leftovers": "beam_pipelines.conversion.pipeline",
        "commit_output": "beam_pipelines.conversion.pipeline",
        "conversion_inputs": "beam_pipelines.conversion.pipeline",
        "convert": "beam_pipelines.conversion.pipeline",
        "lock_local_output": "beam_pipelines.conversion.pipeline",
        "output_exists": "beam_pipelines.conversion.pipeline",
        "remote_input_sources": "beam_pipelines.conversion.pipeline",
    },
)
