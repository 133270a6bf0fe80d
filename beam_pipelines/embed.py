"""Moved to `python -m splits.embed`; `python -m beam_pipelines.embed` still runs it until 0.3.0."""

from episodes.util.moved_command import run_moved

__all__ = []

if __name__ == "__main__":
    run_moved("beam_pipelines.embed", "splits.embed")
