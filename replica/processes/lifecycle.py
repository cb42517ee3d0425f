"""A testnet that runs in the background: ``replica testnet up | status | logs | down``.

``up`` creates the directory with empty subnets (canisters come by ``install_code``), or
resumes the stopped testnet it holds (``fresh`` starts over), starts the launcher as a detached process (``python -m replica.processes.lifecycle DIR``: the
``launch`` supervisor with no demo traffic, its output in ``logs/launcher.log``) and returns
once every subnet has finalized and certified a block after the start and published its
ingress endpoints. A second ``up`` on a running testnet is refused. ``down`` interrupts the
launcher, which settles (waits until every call is answered and every stream acknowledged),
stops every subnet process it started and writes the run log an audit replays; a second
``down`` is a no-op. ``status`` and ``logs`` only read the directory. The testnet runs one process per subnet
or one per node (``--process-model``, kept in the manifest: ``replica.testnet.launcher``).

In the node model ``kill_node`` SIGKILLs one node's process by its pid (with ``hold``, after
writing ``control/hold/<node>``, so the supervisor leaves it down) and ``restart_node``
removes the hold and SIGTERMs the node if it runs (the supervisor restarts it; if it does not
run, the supervisor starts it). Both mark the death as asked for
(``control/expected-death/<node>``), so it does not count toward the restart limit.

The directory is found as ``--dir``, else ``$REPLICA_TESTNET``, else ``.replica/testnet``
under the current directory, so later commands need no flags.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, TextIO

from consensus_stub.registry import RegistryError, decode_registry
from replica.ic.textual_ids import canister_text, subnet_text
from replica.progress import Progress

from replica.testnet.launcher import (
    DEFAULT_PROCESS_MODEL, PROCESS_MODELS, TestnetError, TestnetLayout, canister_range, create_testnet,
    process_model_of, testnet_nodes,
)
from .process_models import process_model
from .supervisor import launch

__all__ = [
    "DEFAULT_DIRECTORY", "testnet_directory", "running_launcher", "up", "down", "status", "SubnetStatus", "log_lines",
    "kill_node", "restart_node",
]

DEFAULT_DIRECTORY = Path(".replica") / "testnet"
_LAUNCHER_LOG = "launcher"


def testnet_directory(given: str | Path | None = None) -> Path:
    """``given``, else ``$REPLICA_TESTNET``, else ``.replica/testnet`` (module docstring)."""
    if given:
        return Path(given)
    return Path(os.environ.get("REPLICA_TESTNET") or DEFAULT_DIRECTORY)


def _is_ours(pid: int) -> bool:
    """The process ``pid`` runs and is one of ours (a reused pid of another program is not)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"replica" in part for part in cmdline)


def _pid_of(layout: TestnetLayout, name: str) -> int | None:
    try:
        pid = int(layout.pid(name).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_ours(pid) else None


def running_launcher(layout: TestnetLayout) -> int | None:
    """The pid of the launcher running this testnet, or ``None``."""
    return _pid_of(layout, "launcher")


@dataclass(frozen=True)
class SubnetStatus:
    subnet: str
    nodes: int
    canister_range: tuple[int, int]
    running: bool
    height: int | None
    certified_height: int | None
    certified_root: str | None
    endpoints: dict[str, str]
    log: Path
    #: ``"subnet"`` (one process per subnet) or ``"node"`` (one per node).
    process_model: str = "subnet"
    #: Nodes whose process runs (subnet model: all of them while the subnet's process runs).
    nodes_running: int = 0
    #: Nodes with a hold (``control/hold/<node>``; node model).
    held: tuple[str, ...] = ()
    #: The subnet's IC principal (``replica.ic.textual_ids.subnet_text``), shown beside its name.
    principal: str | None = None

    def as_json(self) -> dict:
        return {"subnet": self.subnet, "principal": self.principal,
                "canister_range": [canister_text(i) for i in self.canister_range], "nodes": self.nodes,
                "running": self.running, "height": self.height, "certified_height": self.certified_height,
                "certified_root": self.certified_root, "endpoints": self.endpoints, "log": str(self.log),
                "process_model": self.process_model, "nodes_running": self.nodes_running, "held": list(self.held)}


def status(directory: Path) -> list[SubnetStatus]:
    """What the directory says about each subnet (``running``: its process, or in the node
    model one of its nodes' processes, is alive now; ``log``: the subnet's log, or in the node
    model its first node's)."""
    layout = TestnetLayout(directory)
    if not layout.manifest.exists():
        raise TestnetError(f"{directory} holds no testnet; start one with `replica testnet up`")
    manifest = layout.read_manifest()
    model = process_model(layout, list(manifest["subnets"]))
    principals = _subnet_principals(layout)
    rows = []
    for position, subnet in enumerate(manifest["subnets"]):
        current = layout.read_json(layout.status(subnet)) or {}
        endpoints = layout.read_json(layout.http(subnet)) or {}
        units = model.units_of(subnet)
        running = sum(model.nodes_in(unit) for unit in units if _pid_of(layout, unit) is not None)
        held = tuple(unit for unit in units if model.is_held(unit))
        rows.append(SubnetStatus(
            subnet, manifest["nodes"], canister_range(position), running > 0,
            current.get("height"), current.get("certified_height"), current.get("certified_root"),
            dict(endpoints), layout.log(units[0]), model.name, running, held, principals.get(subnet)))
    return rows


def _subnet_principals(layout: TestnetLayout) -> dict[str, str]:
    """``{subnet: its IC principal}`` from the threshold keys of the registry's latest version."""
    try:
        record = decode_registry(layout.registry.read_bytes()).latest()
    except (OSError, RegistryError):
        return {}
    return {s.subnet_id: subnet_text(s.public_key) for s in record.subnets}


def _ready(rows: list[SubnetStatus]) -> bool:
    return all(r.certified_height and r.height and r.endpoints for r in rows)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _chosen_model(layout: TestnetLayout, process_model: str | None) -> str:
    """The process model to run: the manifest's (``process_model`` must agree with it:
    the two keep their state in different files), or for a new testnet ``process_model``."""
    if process_model is not None and process_model not in PROCESS_MODELS:
        raise TestnetError(f"no process model {process_model!r}; the models are {', '.join(PROCESS_MODELS)}")
    if not layout.manifest.exists():
        return process_model or DEFAULT_PROCESS_MODEL
    existing = process_model_of(layout.read_manifest())
    if process_model is not None and process_model != existing:
        raise TestnetError(f"the testnet in {layout.root} runs process model {existing!r}, not {process_model!r}; "
                           f"start over with --fresh to change it")
    return existing


def up(directory: Path, *, subnets: int = 2, nodes: int = 4, round_ms: int = 500, fresh: bool = False,
       restart: bool = True, seed: str = "replica-testnet", timeout_s: float = 120.0,
       out: TextIO | None = None, process_model: str | None = None, chaos_kill: float = 0.0,
       chaos_seed: int | None = None) -> list[SubnetStatus]:
    """Start (or resume) the testnet in ``directory`` in the background (module docstring);
    return the subnets' status once each has certified a block. ``process_model``: of a new
    testnet (``None``: ``DEFAULT_PROCESS_MODEL``); a resumed one keeps its own and refuses
    another. ``chaos_kill`` / ``chaos_seed``: ``launch``'s (node model)."""
    import hashlib

    out = out or sys.stdout
    layout = TestnetLayout(directory)
    pid = running_launcher(layout)
    if pid is not None:
        raise TestnetError(f"a testnet is already running in {directory} (launcher pid {pid}); "
                           f"stop it with `replica testnet down` first")
    if fresh and directory.exists():
        if any(directory.iterdir()) and not layout.manifest.exists():
            raise TestnetError(f"{directory} is not a testnet directory; refusing to delete it")
        shutil.rmtree(directory)
    model = _chosen_model(layout, process_model)
    if chaos_kill and model != "node":
        raise TestnetError("--chaos-kill kills nodes: it needs a testnet of process model 'node' "
                           "(--process-model node)")
    if layout.manifest.exists():
        manifest = layout.read_manifest()
        print(f"resuming the testnet in {directory}: {len(manifest['subnets'])} subnets x {manifest['nodes']} "
              f"nodes (use --fresh to start over)", file=out)
    else:
        create_testnet(directory, subnets, nodes, seed=hashlib.sha256(seed.encode()).digest(),
                       tick_s=round_ms / 1000, genesis_apps=False, process_model=model)
    for name in layout.read_manifest()["subnets"]:   # a status of the last run is not readiness
        layout.status(name).unlink(missing_ok=True)
    log_path = layout.log(_LAUNCHER_LOG)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "replica.processes.lifecycle", str(directory.resolve())]
    if not restart:
        command.append("--no-restart")
    if chaos_kill:
        command += ["--chaos-kill", repr(float(chaos_kill))]
    if chaos_seed is not None:
        command += ["--chaos-seed", str(chaos_seed)]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    progress = Progress(f"testnet up in {directory}")
    deadline = time.monotonic() + timeout_s
    while True:
        rows = status(directory)
        if _ready(rows):
            break
        if process.poll() is not None:
            raise TestnetError(f"the launcher exited with {process.returncode} while starting; "
                               f"its log ({log_path}) ends:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            raise TestnetError(f"not every subnet certified a block within {timeout_s:.0f} s; "
                               f"see {log_path} and the subnet logs; `replica testnet down` stops it")
        certified = sum(1 for r in rows if r.certified_height)
        progress.update(f"{certified}/{len(rows)} subnets certified")
        time.sleep(0.1)
    progress.finish(f"{len(rows)} subnets certified")
    return rows


def down(directory: Path, *, timeout_s: float = 150.0, out: TextIO | None = None) -> bool:
    """Stop the testnet in ``directory`` (module docstring); ``False`` if none was running."""
    out = out or sys.stdout
    layout = TestnetLayout(directory)
    pid = running_launcher(layout)
    if pid is None:
        return False
    progress = Progress(f"testnet down in {directory}: settling, then stopping every process")
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout_s
    while _is_ours(pid) and time.monotonic() < deadline:
        progress.update()
        time.sleep(0.1)
    if _is_ours(pid):
        print(f"the launcher (pid {pid}) did not settle within {timeout_s:.0f} s: stopping it now", file=out)
        os.kill(pid, signal.SIGTERM)
        while _is_ours(pid):
            time.sleep(0.1)
    progress.finish()
    return True


def log_lines(directory: Path, name: str | None, follow: bool) -> Iterator[str]:
    """Lines of the launcher's log (``name`` None), a subnet's, or the subnet's of node ``name``
    (node model: node ``name``'s own log; a subnet has none there); with ``follow`` keep
    yielding new lines until interrupted."""
    layout = TestnetLayout(directory)
    which = _LAUNCHER_LOG
    if name is not None:
        which = process_model(layout, list(layout.read_manifest()["subnets"])).log_unit(name)
    path = layout.log(which)
    if not path.exists():
        raise TestnetError(f"{path} does not exist (yet): {name or 'the launcher'} has not run in {directory}")
    with open(path, errors="replace") as handle:
        while True:
            line = handle.readline()
            if line:
                yield line.rstrip("\n")
            elif follow:
                time.sleep(0.2)
            else:
                return


def _node_of(layout: TestnetLayout, node: str, command: str) -> None:
    """Refuse ``command`` unless the testnet runs one process per node and ``node`` is one."""
    if not layout.manifest.exists():
        raise TestnetError(f"{layout.root} holds no testnet; start one with `replica testnet up --process-model node`")
    model = process_model_of(layout.read_manifest())
    if model != "node":
        raise TestnetError(f"the testnet in {layout.root} runs one process per subnet (process model {model!r}): "
                           f"{command} needs one process per node (`replica testnet up --fresh --process-model node`)")
    nodes = [n for members in testnet_nodes(layout).values() for n in members]
    if node not in nodes:
        raise TestnetError(f"no node {node!r}; the nodes are {', '.join(nodes)}")


def kill_node(directory: Path, node: str, *, hold: bool = False) -> str:
    """SIGKILL ``node``'s process by its pid (module docstring); with ``hold`` the supervisor
    leaves it down. Returns what was done; ``TestnetError`` if the node does not run."""
    layout = TestnetLayout(directory)
    _node_of(layout, node, "kill-node")
    pid = _pid_of(layout, node)
    if pid is None:
        held = " (it is held)" if layout.hold(node).exists() else ""
        raise TestnetError(f"{node} is not running{held}: no live process in {layout.pid(node)}")
    if hold:
        layout.hold(node).parent.mkdir(parents=True, exist_ok=True)
        layout.hold(node).write_text("kill-node --hold\n")
    marker = layout.expected_death(node)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("kill-node --hold" if hold else "kill-node")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        marker.unlink(missing_ok=True)
        raise TestnetError(f"{node} (pid {pid}) is not running") from None
    if hold:
        return (f"killed {node} (pid {pid}) with SIGKILL; it is held ({layout.hold(node)}): it stays down until "
                f"`replica testnet restart-node {node}`")
    return f"killed {node} (pid {pid}) with SIGKILL; the supervisor restarts it"


def restart_node(directory: Path, node: str) -> str:
    """Remove ``node``'s hold (if any); SIGTERM its process if it runs (the supervisor restarts
    it), else leave the start to the supervisor. Returns what was done."""
    layout = TestnetLayout(directory)
    _node_of(layout, node, "restart-node")
    done = []
    if layout.hold(node).exists():
        layout.hold(node).unlink(missing_ok=True)
        done.append(f"removed the hold on {node}")
    pid = _pid_of(layout, node)
    if pid is not None:
        marker = layout.expected_death(node)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("restart-node")
        try:
            os.kill(pid, signal.SIGTERM)
            done.append(f"sent SIGTERM to {node} (pid {pid}); the supervisor restarts it")
        except ProcessLookupError:
            marker.unlink(missing_ok=True)
            pid = None
    if pid is None:
        if running_launcher(layout) is not None:
            done.append(f"{node} is not running; the supervisor starts it")
        else:
            done.append(f"{node} is not running, and no launcher runs in {directory}: `replica testnet up` starts it")
    return "; ".join(done)


def _serve(argv: list[str]) -> int:
    """``python -m replica.processes.lifecycle DIR [--no-restart] [--chaos-kill R] [--chaos-seed N]``:
    the background launcher, and the testnet's live status page (its URL in ``DIR/status-page.url``)."""
    import argparse

    from replica.observe.status_page import StatusPage, page_url_path

    parser = argparse.ArgumentParser(prog="python -m replica.processes.lifecycle")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--no-restart", action="store_true")
    parser.add_argument("--chaos-kill", type=float, default=0.0)
    parser.add_argument("--chaos-seed", type=int, default=None)
    args = parser.parse_args(argv)
    directory = args.directory
    page = StatusPage(directory)
    url_file = page_url_path(directory)
    url_file.write_text(page.start() + "\n")
    try:
        return launch(directory, duration_s=None, traffic=False, restart=not args.no_restart,
                      chaos_kill=args.chaos_kill, chaos_seed=args.chaos_seed)
    finally:
        url_file.unlink(missing_ok=True)
        page.stop()


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
