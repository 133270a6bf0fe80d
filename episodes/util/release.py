"""The toolkit's version and the release in which names deprecated in it go (CHANGELOG.md).

A release is a tag `vX.Y.Z` on main. A module, command or flag renamed or moved during the
development of version VERSION keeps its old name, with a warning, until REMOVAL_VERSION.
`setup.py` reads VERSION from this file, so the two cannot disagree.
"""

from __future__ import annotations

__all__ = ["REMOVAL_VERSION", "VERSION"]

VERSION = "0.2.0"
REMOVAL_VERSION = "0.3.0"
