"""`python tests/enospc_launcher.py FOLDER LIMIT -m MODULE ARGS...`: run a command whose writes
under FOLDER fail with ENOSPC once LIMIT bytes were written there: a full disk simulated at the
write call, for machines where no small file system can be mounted (not root, no tmpfs).

Files opened through Python's `open` (also `Path.open`, PIL, torch saving to a file object)
are counted; writes from C code that opens files itself and from other processes are not.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import runpy
import sys

_open = io.open


class _FullDiskFile:
    """A file under FOLDER whose writes stop with ENOSPC at the limit."""

    def __init__(self, handle, budget: list[int]):
        self._handle = handle
        self._budget = budget

    def write(self, data):
        if len(data) > self._budget[0]:
            self._budget[0] = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._budget[0] -= len(data)
        return self._handle.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __iter__(self):
        return iter(self._handle)

    def __getattr__(self, name):
        return getattr(self._handle, name)


def main() -> None:
    folder, limit, flag, module, *args = sys.argv[1:]
    assert flag == "-m", "usage: enospc_launcher.py FOLDER LIMIT -m MODULE ARGS..."
    folder = os.path.realpath(folder)
    budget = [int(limit)]

    def limited_open(file, mode="r", *more, **kwargs):
        handle = _open(file, mode, *more, **kwargs)
        inside = isinstance(file, str | bytes | os.PathLike) and os.path.realpath(
            os.fsdecode(file)
        ).startswith(folder + os.sep)
        if inside and any(m in mode for m in "wax+"):
            return _FullDiskFile(handle, budget)
        return handle

    builtins.open = io.open = limited_open
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
