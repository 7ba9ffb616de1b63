"""`python -m torch_neuronx.plan run --nproc-per-node N [--nnodes M] [--all-ranks] -- script.py args`

Plans a torchrun job of M x N ranks on one machine: one process per rank role (_roles.py: rank 0
and the last rank unless told otherwise), each with the environment torchrun would give that rank
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR/PORT, ...)
and `TORCH_NEURONX_DRY_RUN=1`, so its process group is the fake one of the full world size and it
needs no peer. A few run at a time (`--parallel`); their reports are merged (_merge.py).

Nothing listens on MASTER_ADDR:MASTER_PORT: the dry run's rendezvous never connects.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from .. import _child as child, _command as command, _dry_run_env as dry_run_env
from . import _merge as merge, _roles as roles

MASTER_PORT = 29500


class LaunchError(RuntimeError):
    """A bad layout or a rank that failed; the message says which and what to do."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The layout flags of `plan run` (the dry-run core's plan/_run.py adds them to its own)."""
    parser.add_argument("--nproc-per-node", type=int, default=None,
                        help="ranks per node, as torchrun's --nproc-per-node: plan a distributed job")
    parser.add_argument("--nnodes", type=int, default=None, help="nodes (instances), as torchrun's --nnodes")
    parser.add_argument("--all-ranks", action="store_true", help="run every rank, not one per rank role")
    parser.add_argument("--ranks", default=None, help="the ranks to run, e.g. 0,5,31 or 0-3 (default: 0 and the last)")
    parser.add_argument("--pp", type=int, default=None,
                        help="pipeline stages of the job (default PP_SIZE, else 1): one rank runs per stage")
    parser.add_argument("--parallel", type=int, default=max(1, min(2, os.cpu_count() or 1)),
                        help="rank processes at a time (default 2, or 1 on one core)")


def requested(args: argparse.Namespace) -> bool:
    """Did the user ask for a distributed plan (any layout flag)?"""
    return (args.nproc_per_node is not None or args.nnodes is not None or args.all_ranks
            or args.ranks is not None or args.pp is not None)


def pick_instance(nproc_per_node: int, instance: str | None, lnc: int | None = None) -> str:
    """The instance type of each node: the one asked for (checked), else the default if it has
    enough logical cores, else the smallest of the default's chip that does."""
    import neuron_hardware

    from ...runtime import env
    from ...runtime import resolve

    try:
        view = resolve(instance, lnc, instance_arg="--instance", lnc_arg="--lnc")
    except (neuron_hardware.HardwareChoiceError, env.NeuronEnvironmentError) as err:
        raise LaunchError(str(err)) from None
    cores = view.cores_per_instance
    if instance is not None or env.get(env.INSTANCE_TYPE) is not None:
        if cores < nproc_per_node:
            raise LaunchError(f"--nproc-per-node {nproc_per_node} is more ranks than {view.instance.name} has logical "
                              f"NeuronCores ({cores} at LNC={view.lnc}); "
                              f"use at most {cores} per node, more --nnodes, or a larger --instance")
        return view.instance.name
    if cores >= nproc_per_node:
        return view.instance.name
    views = [neuron_hardware.logical_core_view(n, view.lnc) for n, s in neuron_hardware.INSTANCES.items()
             if view.lnc in s.chip.supported_lnc]
    fitting = sorted((v.cores_per_instance, v.instance.name) for v in views
                     if v.chip.name == view.chip.name and v.cores_per_instance >= nproc_per_node)
    if not fitting:
        largest = max(v.cores_per_instance for v in views)
        raise LaunchError(f"--nproc-per-node {nproc_per_node}: no instance type has that many logical "
                          f"NeuronCores (at most {largest}); use more --nnodes with fewer ranks per node")
    return fitting[0][1]


def check_layout(nproc_per_node: int, nnodes: int, environ=os.environ) -> int:
    """World size of the job; a clear error for sizes torchrun would refuse or a layout that cannot
    fill it (TP_SIZE x FSDP_SIZE, the announcement scripts' convention, when both are set)."""
    for flag, value in (("--nproc-per-node", nproc_per_node), ("--nnodes", nnodes)):
        if value < 1:
            raise LaunchError(f"{flag} {value}: must be at least 1 (the ranks per node and the nodes of the job)")
    world = nproc_per_node * nnodes
    tp, fsdp = environ.get("TP_SIZE"), environ.get("FSDP_SIZE")
    if tp and fsdp:
        try:
            t, f = int(tp), int(fsdp)
        except ValueError:
            raise LaunchError(f"TP_SIZE={tp!r} FSDP_SIZE={fsdp!r}: both must be whole numbers") from None
        if t < 1 or f < 1 or t * f != world:
            raise LaunchError(f"TP_SIZE x FSDP_SIZE = {t} x {f} = {t * f} does not match the world size "
                              f"--nnodes x --nproc-per-node = {nnodes} x {nproc_per_node} = {world}: choose "
                              f"sizes whose product is {world}")
    return world


def torchrun_environment(rank: int, nproc_per_node: int, nnodes: int, base=os.environ) -> dict:
    """`base` with what torchrun's agent sets for `rank` (torch.distributed.elastic.agent); the
    dry run's own settings come from the planner's one child environment (_command.py)."""
    world = nproc_per_node * nnodes
    env = dict(base)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank % nproc_per_node), "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(nproc_per_node), "GROUP_RANK": str(rank // nproc_per_node),
        "GROUP_WORLD_SIZE": str(nnodes), "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "default", "MASTER_ADDR": env.get("MASTER_ADDR", "127.0.0.1"),
        "MASTER_PORT": env.get("MASTER_PORT", str(MASTER_PORT)),
        "TORCHELASTIC_RUN_ID": "torch_neuronx_plan", "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_USE_AGENT_STORE": "False",
    })
    if world > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does for several ranks per node
    return env


class _Rank:
    """One rank's dry-run process (plan/_child.py: `plan run -- script` in the rank's environment); its
    output is kept for an error message, rank 0's is also echoed."""

    def __init__(self, rank: int, argv: list[str], env: dict, echo: bool) -> None:
        self.rank = rank
        self.report_path = env[dry_run_env.REPORT]
        self.proc = child.Child(["run", "--", *argv], env, capture=True, merge=True,
                                on_line=self._echo if echo else None)

    def _echo(self, line: str) -> None:
        sys.stdout.write(f"[rank{self.rank}] {line}")
        sys.stdout.flush()

    def finish(self) -> child.Result:
        return self.proc.wait()


def _trace_path(trace: str | None, rank: int) -> str | None:
    if not trace:
        return None
    stem, ext = os.path.splitext(trace)
    return f"{stem}.rank{rank}{ext or '.json'}"


def run_ranks(argv: list[str], ranks: list[int], *, nproc_per_node: int, nnodes: int, instance: str,
              lnc: int | None = None, trace: str | None = None, parallel: int = 1,
              echo_rank: int | None = 0, view: tuple[bool, bool] | None = None) -> dict[int, dict]:
    """Start `ranks` (at most `parallel` at a time); return their reports by rank."""
    if parallel < 1:
        raise LaunchError(f"--parallel {parallel}: must be at least 1")
    reports: dict[int, dict] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="torch_neuronx_plan_") as workdir, child.supervise():
        pending, running = list(ranks), []
        while pending or running:
            while pending and len(running) < parallel and not failures:
                r = pending.pop(0)
                env = command.child_environment(instance=instance, lnc=lnc, report=os.path.join(workdir, f"rank{r}.json"),
                                                trace=_trace_path(trace, r), view=view,
                                                base=torchrun_environment(r, nproc_per_node, nnodes))
                running.append(_Rank(r, argv, env, echo=(r == echo_rank)))
            if failures:
                pending.clear()
            done = [p for p in running if p.proc.poll() is not None]
            if not done:
                time.sleep(0.05)
                continue
            for p in done:
                running.remove(p)
                result = p.finish()
                if os.path.exists(p.report_path) and result.returncode == 0:
                    with open(p.report_path) as f:
                        reports[p.rank] = json.load(f)
                else:
                    tail = "".join(result.stdout_tail)
                    failures.append(f"rank {p.rank} exited with code {result.returncode}; the end of its output:\n{tail}")
    if failures:
        raise LaunchError("dry run failed:\n" + "\n".join(failures))
    return reports


def run(args: argparse.Namespace, argv: list[str], view: tuple[bool, bool] | None = None) -> dict:
    """Validate the layout, run the rank roles, merge: the merged report (also written to --json).
    `args` is `plan run`'s (its layout flags and --instance, --lnc, --trace, --json)."""
    if not argv:
        raise LaunchError("give the script to plan after --, e.g. "
                          "python -m torch_neuronx.plan run --nproc-per-node 4 -- train.py")
    nproc, nnodes = _or(args.nproc_per_node, 1), _or(args.nnodes, 1)
    world = check_layout(nproc, nnodes)
    instance = pick_instance(nproc, args.instance, args.lnc)
    try:
        pp = _pp(args.pp)
        ranks = roles.choose_ranks(world, all_ranks=args.all_ranks, ranks=args.ranks, pp=pp)
    except ValueError as err:
        raise LaunchError(str(err)) from None
    reports = run_ranks(argv, ranks, nproc_per_node=nproc, nnodes=nnodes, instance=instance,
                        lnc=args.lnc, trace=args.trace, parallel=args.parallel, view=view)
    merged = merge.merge(reports, world_size=world, nnodes=nnodes, nproc_per_node=nproc, pp=pp)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(merged, f, indent=1)
    return merged


def _pp(flag: int | None, environ=os.environ) -> int:
    """--pp, else PP_SIZE (the announcement scripts' convention, as TP_SIZE and FSDP_SIZE), else 1."""
    if flag is not None:
        return flag
    text = environ.get("PP_SIZE")
    try:
        return int(text) if text else 1
    except ValueError:
        raise ValueError(f"PP_SIZE={text!r}: must be a whole number (the pipeline stages)") from None


def _or(value, default):
    return default if value is None else value


def main(args: argparse.Namespace, argv: list[str], view: tuple[bool, bool] | None = None) -> int:
    """`plan run` with layout flags: the merged markdown, then rank 0's own report."""
    from .._report import markdown as rank_markdown

    try:
        merged = run(args, argv, view)
    except LaunchError as err:
        print(f"plan run: {err}", file=sys.stderr)
        return 1 if "exited with code" in str(err) else 2
    print(merge.markdown(merged))
    print()
    print(rank_markdown(merged["ranks"][str(merged["ranks_run"][0])]))
    return 0
