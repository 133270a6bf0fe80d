"""Apache Beam jobs: dataset conversion, verification, episode shards, the decoded cache, raw
data (downloads and the embedded glyph dataset), and what they share (runners, the writer).

Importing the package changes no process state. A `python -m beam_pipelines.<command>` run
drops Beam's "apitools not found" import line (`beam_pipelines.runners.beam_import_noise`): the filter
is added here only while such a command starts, before the command module imports Beam.
"""

from episodes.util.release import VERSION

__version__ = VERSION
__all__ = ["__version__"]


def _quiet_a_starting_command() -> None:
    from beam_pipelines.runners.beam_import_noise import quiet_beam_import_noise, starting_a_command

    if starting_a_command():
        quiet_beam_import_noise()


_quiet_a_starting_command()
