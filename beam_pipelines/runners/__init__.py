"""Running a Beam job anywhere: the local runner and its workers, Dask, portable runners'
pre-flight, the output lock, and one-line endings for interrupts and unwritable outputs.
"""

__all__ = [
    "beam_import_noise",
    "dask_runner",
    "interrupt_exit",
    "job_faults",
    "local_worker",
    "options",
    "output_lock",
    "portable_preflight",
]
