"""Training and evaluation on several processes (`torchrun`): who this process is, its process
group, and which items it reads.

`torchrun --nproc_per_node N -m learners.train ...` starts N processes with RANK, WORLD_SIZE,
LOCAL_RANK and LOCAL_WORLD_SIZE in their environment; `start_ranks` reads them, joins the process
group (NCCL on CUDA, Gloo on CPU, with a timeout so a lost peer ends every rank instead of a
hang) and picks the rank's device (cuda:LOCAL_RANK). One process (no torchrun, or WORLD_SIZE 1)
joins no group and runs exactly as before.

Gradients are not averaged by wrapping the learner in DistributedDataParallel: a learner is not
one `forward` (its methods call the backbone directly, MAML through `functional_call` and an
inner loop) and a meta-batch is M forward passes, so `learners.training.meta_batch` all-reduces the
flattened gradients once after the meta-batch's backward passes: the arithmetic of DDP with
`no_sync` over the first M-1 passes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from episodes.util.cli_errors import UserError, user_fault_lines
from learners import LearnerConfigError

__all__ = [
    "agree_on_setup",
    "all_reduce_sum",
    "barrier",
    "broadcast_module",
    "broadcast_object",
    "cores_per_rank",
    "gather_objects",
    "loading_note",
    "on_rank_zero",
    "one_line_per_fault",
    "PeerLost",
    "rank_device",
    "rank_info_from_env",
    "rank_session",
    "RankInfo",
    "RanksFault",
    "ShardPlan",
    "SINGLE_PROCESS",
    "split_cores",
    "TIMEOUT_MINUTES",
    "TORCHRUN_VARIABLES",
]

TIMEOUT_MINUTES = 30  # a collective waiting longer than this ends the rank (no hang)
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


class PeerLost(Exception):
    """A collective failed because another rank stopped (its own line says why)."""


class RanksFault(UserError):
    """A fault the ranks agreed on; its line already names the rank(s)."""


@dataclass(frozen=True)
class RankInfo:
    """This process's place among the training processes (`torchrun`'s variables)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size or not 0 <= self.local_rank < max(
            self.local_world_size, 1
        ):
            raise LearnerConfigError(
                f"RANK {self.rank}, WORLD_SIZE {self.world_size}, LOCAL_RANK {self.local_rank}, "
                f"LOCAL_WORLD_SIZE {self.local_world_size}: expected 0 <= RANK < WORLD_SIZE "
                "and 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE (start the command with torchrun)"
            )

    @property
    def is_writer(self) -> bool:
        """Rank 0 alone writes checkpoints, config, logs and progress."""
        return self.rank == 0

    @property
    def sharded(self) -> bool:
        return self.world_size > 1


SINGLE_PROCESS = RankInfo()


def _env_int(name: str, environ: dict[str, str], default: int | None = None) -> int:
    value = environ.get(name)
    if value is None:
        if default is None:
            raise LearnerConfigError(f"{name} is not set: start the command with torchrun")
        return default
    try:
        return int(value)
    except ValueError:
        raise LearnerConfigError(
            f"{name}={value!r}: expected an integer (set by torchrun)"
        ) from None


def rank_info_from_env(environ: dict[str, str] | None = None) -> RankInfo:
    """The torchrun variables of `environ` (default os.environ); one process when unset."""
    environ = dict(os.environ if environ is None else environ)
    if not any(name in environ for name in TORCHRUN_VARIABLES):
        return SINGLE_PROCESS
    world = _env_int("WORLD_SIZE", environ)
    return RankInfo(
        rank=_env_int("RANK", environ),
        world_size=world,
        local_rank=_env_int("LOCAL_RANK", environ),
        local_world_size=_env_int("LOCAL_WORLD_SIZE", environ, default=world),
    )


def rank_device(ranks: RankInfo, device: torch.device) -> torch.device:
    """Rank r of a sharded run on CUDA uses cuda:LOCAL_RANK (one GPU per process)."""
    if not ranks.sharded or device.type != "cuda":
        return device
    if device.index is not None:
        raise LearnerConfigError(
            f"--device {device}: under torchrun each rank uses cuda:LOCAL_RANK; "
            "give --device cuda or auto"
        )
    if ranks.local_rank >= torch.cuda.device_count():
        raise LearnerConfigError(
            f"LOCAL_RANK {ranks.local_rank}: this machine has {torch.cuda.device_count()} GPUs; "
            "start at most that many processes per node (--nproc_per_node)"
        )
    return torch.device("cuda", ranks.local_rank)


def cores_per_rank(ranks: RankInfo, cores: int | None = None) -> int:
    """The machine's cores shared evenly by the ranks on it (at least one each)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, int(cores or 1) // max(1, ranks.local_world_size))


def split_cores(ranks: RankInfo) -> None:
    """Intra-op threads per rank: the node's cores divided by its ranks (torchrun's own default
    is 1 thread); an OMP_NUM_THREADS other than torchrun's 1 is the user's choice and kept."""
    if not ranks.sharded or os.environ.get("OMP_NUM_THREADS", "1") != "1":
        return
    torch.set_num_threads(cores_per_rank(ranks))


def loading_note(loader_workers: int, decode_processes: int, ranks: RankInfo) -> str | None:
    """A note when every rank's loading processes together outnumber the node's cores
    (`--loader-workers` and `--decode-processes` count per rank)."""
    per_rank = max(loader_workers, decode_processes)
    cores = cores_per_rank(SINGLE_PROCESS)
    if not ranks.sharded or per_rank * ranks.local_world_size <= cores:
        return None
    fits = max(0, cores // ranks.local_world_size - 1)
    return (
        f"note: {ranks.local_world_size} ranks x {per_rank} loading processes on {cores} cores: "
        f"--loader-workers and --decode-processes count per rank; about {fits} each fits"
    )


@contextmanager
def rank_session(
    device: torch.device, minutes: float = TIMEOUT_MINUTES, environ: dict[str, str] | None = None
) -> Iterator[tuple[RankInfo, torch.device]]:
    """Join the process group of a torchrun start (nothing for one process); yields the rank
    info and the rank's device, and leaves the group on the way out (errors included)."""
    ranks = rank_info_from_env(environ)
    if not ranks.sharded:
        yield ranks, device
        return
    device = rank_device(ranks, device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    split_cores(ranks)
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=ranks.rank,
        world_size=ranks.world_size,
        timeout=timedelta(minutes=minutes),
    )
    try:
        yield ranks, device
    except BaseException:
        dist.destroy_process_group()
        raise
    # Leave together: a rank that tore gloo down while another still finished its last
    # collective aborted now and then ("terminate called without an active exception").
    try:
        barrier(ranks)
    finally:
        dist.destroy_process_group()


@contextmanager
def one_line_per_fault(ranks: RankInfo) -> Iterator[None]:
    """Faults of a sharded run end in one line, however many ranks there are: the failing rank's
    `error:` line names it; a rank that only lost its peers (they said why), or was interrupted
    beside rank 0 (which prints the resume line), ends quietly. One process: unchanged."""
    if not ranks.sharded:
        yield
        return
    try:
        yield
    except KeyboardInterrupt:
        if ranks.is_writer:
            raise
        raise SystemExit(130) from None
    except PeerLost as lost:
        if ranks.is_writer and "time" in str(lost).lower():
            raise UserError(f"rank 0: {lost}; see the other ranks' lines") from None
        raise SystemExit(1) from None
    except RanksFault:
        raise
    except Exception as fault:
        lines = user_fault_lines(fault)
        if not lines:  # a bug keeps its traceback
            raise
        raise UserError(f"rank {ranks.rank} of {ranks.world_size}: {'; '.join(lines)}") from None


@contextmanager
def agree_on_setup(ranks: RankInfo) -> Iterator[None]:
    """Every rank runs the block (opening data, say); if it failed on any rank, rank 0 prints
    one line naming the first failing rank and the others end quietly with the same status
    (2), instead of W copies of the same line. Sharded runs only: one process is unchanged."""
    if not ranks.sharded:
        yield
        return
    failure: BaseException | None = None
    try:
        yield
    except Exception as error:  # every rank learns of it, so none waits for the others
        failure = error
    # Each rank's outcome: None (fine), its fault's lines, or "bug" (it keeps its traceback).
    outcome: list[str] | str | None = None
    if failure is not None:
        outcome = user_fault_lines(failure) or "bug"
    outcomes = gather_objects(outcome, ranks)
    failed = [(rank, lines) for rank, lines in enumerate(outcomes) if lines is not None]
    if not failed:
        return
    if outcome == "bug":
        raise failure  # type: ignore[misc]
    if any(lines == "bug" for _, lines in failed):
        raise SystemExit(1)  # another rank's bug, printed there with its traceback
    if ranks.is_writer:
        rank, lines = failed[0]
        where = "every rank" if len(failed) == ranks.world_size else f"rank {rank}"
        raise RanksFault(f"{where} of {ranks.world_size}: {'; '.join(lines)}")
    raise SystemExit(2)


def on_rank_zero(action: Any, ranks: RankInfo) -> None:
    """Run `action()` (writing or checking outputs) on rank 0 alone; a refusal there ends every
    rank at once: rank 0 raises it, the others end quietly with the same status (2)."""
    refusal: BaseException | None = None
    if ranks.is_writer:
        try:
            action()
        except Exception as error:  # the others learn of it instead of waiting
            refusal = error
    status = 0 if refusal is None else (2 if user_fault_lines(refusal) else 1)
    status = broadcast_object(status, ranks)
    if refusal is not None:
        raise refusal  # a bug with its traceback, a user fault as one line
    if status:
        raise SystemExit(status)


def _collective(call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a collective; a peer's loss (closed connection, timeout) becomes `PeerLost`."""
    try:
        return call(*args, **kwargs)
    except (RuntimeError, dist.DistError) as error:
        raise PeerLost(f"another rank stopped ({str(error).splitlines()[0][:200]})") from error


def broadcast_object(value: Any, ranks: RankInfo) -> Any:
    """Rank 0's `value` on every rank (the value itself for one process)."""
    if not ranks.sharded:
        return value
    box = [value if ranks.is_writer else None]
    _collective(dist.broadcast_object_list, box, src=0)
    return box[0]


def broadcast_module(module: torch.nn.Module, ranks: RankInfo) -> None:
    """Rank 0's parameters and buffers on every rank (as DDP does when it wraps a model)."""
    if not ranks.sharded:
        return
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            _collective(dist.broadcast, tensor.data, src=0)


def all_reduce_sum(tensor: torch.Tensor, ranks: RankInfo) -> torch.Tensor:
    """`tensor` summed over the ranks, in place."""
    if ranks.sharded:
        _collective(dist.all_reduce, tensor, op=dist.ReduceOp.SUM)
    return tensor


def gather_objects(value: Any, ranks: RankInfo) -> list[Any]:
    """Every rank's `value`, in rank order, on every rank."""
    if not ranks.sharded:
        return [value]
    out: list[Any] = [None] * ranks.world_size
    _collective(dist.all_gather_object, out, value)
    return out


def barrier(ranks: RankInfo) -> None:
    if ranks.sharded:
        _collective(dist.barrier)


@dataclass(frozen=True)
class ShardPlan:
    """Which items rank r of W reads with M items per rank and step: step s (0-based) takes the
    global items s*M*W + r*M ... s*M*W + r*M + M-1, so the ranks of a step together read the
    M*W items one process with a meta-batch of M*W reads, and no two ranks read the same."""

    meta_batch: int = 1
    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        if self.meta_batch < 1:
            raise LearnerConfigError(f"--meta-batch {self.meta_batch}: expected >= 1")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} of {self.world_size}: expected 0 <= rank < W")

    @property
    def global_meta_batch(self) -> int:
        """Items per optimiser step, all ranks together."""
        return self.meta_batch * self.world_size

    def global_index(self, position: int) -> int:
        """The global item read at position `position` of this rank's stream."""
        step, offset = divmod(position, self.meta_batch)
        return step * self.global_meta_batch + self.rank * self.meta_batch + offset

    def step_indices(self, step: int) -> list[int]:
        """The global items this rank trains on at 1-based `step`."""
        first = (step - 1) * self.meta_batch
        return [self.global_index(first + j) for j in range(self.meta_batch)]
