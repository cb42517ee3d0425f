"""A testnet that runs in the background: ``replica testnet up | status | logs | down``.

``up`` creates the directory with empty subnets (canisters come by ``install_code``), or
resumes the stopped testnet it holds (``fresh`` starts over), starts the launcher as a detached process (``python -m replica.testnet.lifecycle DIR``: the
``launch`` supervisor with no demo traffic, its output in ``logs/launcher.log``) and returns
once every subnet has finalized and certified a block after the start and published its
ingress endpoints. A second ``up`` on a running testnet is refused. ``down`` interrupts the
launcher, which settles (waits until every call is answered and every stream acknowledged),
stops every subnet process it started and writes the run log an audit replays; a second
``down`` is a no-op. ``status`` and ``logs`` only read the directory.

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

from replica.progress import Progress

from .launcher import TestnetError, TestnetLayout, canister_range, create_testnet, launch

__all__ = [
    "DEFAULT_DIRECTORY", "testnet_directory", "running_launcher", "up", "down", "status", "SubnetStatus", "log_lines",
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

    def as_json(self) -> dict:
        return {"subnet": self.subnet, "nodes": self.nodes, "canister_range": list(self.canister_range),
                "running": self.running, "height": self.height, "certified_height": self.certified_height,
                "certified_root": self.certified_root, "endpoints": self.endpoints, "log": str(self.log)}


def status(directory: Path) -> list[SubnetStatus]:
    """What the directory says about each subnet (``running``: its process is alive now)."""
    layout = TestnetLayout(directory)
    if not layout.manifest.exists():
        raise TestnetError(f"{directory} holds no testnet; start one with `replica testnet up`")
    manifest = layout.read_manifest()
    rows = []
    for position, subnet in enumerate(manifest["subnets"]):
        current = layout.read_json(layout.status(subnet)) or {}
        endpoints = layout.read_json(layout.http(subnet)) or {}
        rows.append(SubnetStatus(
            subnet, manifest["nodes"], canister_range(position), _pid_of(layout, subnet) is not None,
            current.get("height"), current.get("certified_height"), current.get("certified_root"),
            dict(endpoints), layout.log(subnet)))
    return rows


def _ready(rows: list[SubnetStatus]) -> bool:
    return all(r.certified_height and r.height and r.endpoints for r in rows)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def up(directory: Path, *, subnets: int = 2, nodes: int = 4, round_ms: int = 500, fresh: bool = False,
       restart: bool = True, seed: str = "replica-testnet", timeout_s: float = 120.0,
       out: TextIO | None = None) -> list[SubnetStatus]:
    """Start (or resume) the testnet in ``directory`` in the background (module docstring);
    return the subnets' status once each has certified a block."""
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
    if layout.manifest.exists():
        manifest = layout.read_manifest()
        print(f"resuming the testnet in {directory}: {len(manifest['subnets'])} subnets x {manifest['nodes']} "
              f"nodes (use --fresh to start over)", file=out)
    else:
        create_testnet(directory, subnets, nodes, seed=hashlib.sha256(seed.encode()).digest(),
                       tick_s=round_ms / 1000, genesis_apps=False)
    for name in layout.read_manifest()["subnets"]:   # a status of the last run is not readiness
        layout.status(name).unlink(missing_ok=True)
    log_path = layout.log(_LAUNCHER_LOG)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "replica.testnet.lifecycle", str(directory.resolve())]
    if not restart:
        command.append("--no-restart")
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
    progress = Progress(f"testnet down in {directory}: settling, then stopping every subnet process")
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
    """Lines of the launcher's log (``name`` None), a subnet's, or the subnet's of node ``name``;
    with ``follow`` keep yielding new lines until interrupted."""
    layout = TestnetLayout(directory)
    manifest = layout.read_manifest()
    subnet = _LAUNCHER_LOG
    if name is not None:
        subnet = next((s for s in manifest["subnets"] if name == s or name.startswith(f"{s}-node")), "")
        if not subnet:
            raise TestnetError(f"no subnet or node {name!r}; the subnets are {', '.join(manifest['subnets'])}")
    path = layout.log(subnet)
    with open(path, errors="replace") as handle:
        while True:
            line = handle.readline()
            if line:
                yield line.rstrip("\n")
            elif follow:
                time.sleep(0.2)
            else:
                return


def _serve(argv: list[str]) -> int:
    """``python -m replica.testnet.lifecycle DIR [--no-restart]``: the background launcher,
    and the testnet's live status page (its URL in ``DIR/status-page.url``)."""
    from .status_page import StatusPage, page_url_path

    directory = Path(argv[0])
    page = StatusPage(directory)
    url_file = page_url_path(directory)
    url_file.write_text(page.start() + "\n")
    try:
        return launch(directory, duration_s=None, traffic=False, restart="--no-restart" not in argv[1:])
    finally:
        url_file.unlink(missing_ok=True)
        page.stop()


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
