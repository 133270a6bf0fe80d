"""Episodes: dataset specs, record index and reader, the Meta-Dataset sampler, adapters.

The public API (docs/episodes.md, "Episodes"):

    from episodes import EpisodeReader, SamplerConfig, load_spec

plus the `python -m episodes.*` commands (`read`, `fetch`, `fixml`). The names load on first
use, so importing a single submodule stays light.

Sub-packages by role, each importing only the ones before it: `util` (no domain), `records`
(the stored formats), `images` and `hierarchy`, `sampling` (episode descriptions), `reading`
(episodes from records), `adapters` (torch and tf.data). The commands sit at this root.

Modules that moved keep their old import path until version 0.3.0, with a DeprecationWarning:
installing that finder (`episodes.util.moved_modules`) is the one thing importing this package
does besides defining names.
"""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names
from episodes.util.moved_modules import install as _install_moved_modules
from episodes.util.release import VERSION

__version__ = VERSION

__all__ = [
    "DatasetSpec",
    "Episode",
    "EpisodeDescription",
    "EpisodeReader",
    "EpisodeSampler",
    "ReaderError",
    "SamplerConfig",
    "Split",
    "__version__",
    "load_spec",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "EpisodeReader": "episodes.reading.reader",
        "SamplerConfig": "episodes.sampling.sampler_config",
        "load_spec": "episodes.records.dataset_spec",
        "DatasetSpec": "episodes.records.dataset_spec",
        "Split": "episodes.records.dataset_spec",
        "Episode": "episodes.sampling.episode",
        "EpisodeDescription": "episodes.sampling.episode",
        "EpisodeSampler": "episodes.sampling.sampler",
        "ReaderError": "episodes.records.reader_errors",
    },
)

_install_moved_modules()
