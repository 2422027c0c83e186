"""How many cores this process may use: the one count every thread pool sizes itself by,
and the one place that changes it (an MPI launcher's binding of a rank to one core)."""

from __future__ import annotations

import os

KEEP_BINDING = "FARM_KEEP_BINDING"
# set by an MPI launcher (MPICH's Hydra, Open MPI, PMIx, Intel MPI) in every process it starts
MPI_LAUNCHER_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "HYDRA_CONTROL_FD")


def launched_by_mpi() -> bool:
    """This process was started by an MPI launcher (it may still be the only rank)."""
    return any(v in os.environ for v in MPI_LAUNCHER_VARS)


def launcher_rank() -> int | None:
    """This process's rank as its MPI launcher (or srun) numbered it, before MPI starts;
    None when no launcher says."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def usable_cores() -> int:
    """Cores this process may run on: its affinity (a Slurm allocation, taskset), else
    every core of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def release_launcher_binding() -> int | None:
    """Let an MPI rank bound to a single core run on every core it may use; the cores
    then gained (None when nothing changed).

    Open MPI's mpiexec binds each process to one core when it starts two or fewer (its
    default; more are bound to a package). A farm rank is no single-threaded MPI
    program: the master writes the store and colours and encodes the video, a worker
    packs its tiles on a pool of threads, and each sizes its pools by the cores it may
    use (per node: the packers share them, see farm/schedule/packer.py). Bound to one
    core, ``mpiexec -n 2 farm render`` took 6.5 times as long as one process on the
    2-GPU H100 machine (BENCHMARKS.md, "Scaling over GPUs").

    The kernel intersects the request with the cgroup's cpuset, so a container or a
    batch allocation still bounds it. Left alone: under Slurm (its binding is the
    allocation: --cpus-per-task), a binding the user asked for (``mpiexec --bind-to``:
    Open MPI then passes its policy on in the environment), a binding to more than one
    core, any binding when FARM_KEEP_BINDING is set, and the binding of a rank of a node
    emulated on one machine (FARM_NODE set: its ranks run under ``taskset``, and the
    node's cores are the ones it was given)."""
    if (os.environ.get(KEEP_BINDING) or os.environ.get("FARM_NODE") or "SLURM_JOB_ID" in os.environ
            or _binding_asked()):
        return None
    try:
        before = len(os.sched_getaffinity(0))
        if before != 1:
            return None
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
        gained = len(os.sched_getaffinity(0)) - before
    except (AttributeError, OSError):  # not Linux, or a cpuset that refuses it
        return None
    return gained or None


def _binding_asked() -> bool:
    """Whether the launcher was told how to bind: Open MPI 4.1's ``--bind-to core``
    reaches each rank as OMPI_MCA_hwloc_base_binding_policy (its default binding
    leaves no trace; seen with Open MPI 4.1.6 on the 2-GPU H100 machine)."""
    return any(key.endswith("_binding_policy") and key.startswith(("OMPI_MCA", "PRTE_MCA"))
               for key in os.environ)
