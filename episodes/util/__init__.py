"""Generic pieces every layer uses: atomic writes, one-line CLI faults, config flags, progress lines,
worker processes."""

# The modules are the API (each declares its own names).
__all__ = [
    "atomic_files",
    "cli_errors",
    "cli_style",
    "config_flags",
    "dead_job_leftovers",
    "folder_lock",
    "json_files",
    "lazy_names",
    "moved_command",
    "moved_modules",
    "npy_maps",
    "progress_lines",
    "release",
    "shared_segments",
    "termination",
    "worker_processes",
]
