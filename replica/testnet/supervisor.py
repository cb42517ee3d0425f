"""Running a testnet directory (``replica.testnet.launcher``): the supervisor of its processes
and ``launch``, the launcher's main loop.

The launcher supervises its processes (``Supervisor``), one "unit" per process: a subnet, or
a node. One that dies is logged and restarted on the same directory: it re-executes its
block log, binds new XNet ports and writes ``addresses/<subnet>.json``; the launcher
rewrites ``registry.bin`` with them, and every subnet process re-reads ``registry.bin``
whenever it changes, so its peers fetch from the new ports. A process that exits with ``EXIT_REFUSED`` (it refused to start, e.g. on a
corrupt block log) or dies ``RESTART_LIMIT`` times within ``RESTART_WINDOW_S`` seconds
stops the testnet with an error naming it and its log. SIGINT settles and stops as at the
end of the duration; SIGTERM stops every subnet process at once (SIGTERM, then SIGKILL
after ``STOP_TIMEOUT_S``), without settling or writing the run log. The subnet processes
run in their own session (a terminal's Ctrl-C reaches only the launcher) and stop by
themselves when the launcher dies.

In the node model a node is restarted the same way (a fresh ``endpoints.json``, then the
registry and ``http/<subnet>.json`` rewritten; the node binds the ports of its last life again
when it can, ``replica.node.ports``, so its addresses usually stay), except that a node with a hold
(``control/hold/<node>``) stays down until the hold is removed, and a death that was asked
for (``kill-node``, ``restart-node``, chaos: ``replica.testnet.chaos``) is restarted without
counting toward ``RESTART_LIMIT`` — also with ``restart=False`` (``--no-restart``), which
stops the testnet only at a death nobody asked for (a held node's death is asked for too).
"""

from __future__ import annotations

import collections
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from consensus_stub.registry import decode_registry
from replica.node.batch_processor import canister_classes
from replica.progress import Progress

from .launcher import (
    EXIT_REFUSED, INITIAL_BALANCE, LAUNCHER_PID_ENV, LIMIT_PRESETS, PROCESS_MODELS, RESTART_LIMIT, RESTART_WINDOW_S,
    STOP_TIMEOUT_S, TestnetError, TestnetLayout, has_genesis_apps, process_model_of, quiescent, read_statuses,
    testnet_nodes, total_supply, update_registry_file, write_atomically,
)

__all__ = ["Supervisor", "launch"]

class _Terminated(BaseException):
    """Raised in the launcher's main thread by SIGTERM (like ``KeyboardInterrupt`` for SIGINT)."""


def _child_command(layout: TestnetLayout, subnet: str) -> list[str]:
    return [sys.executable, "-m", "replica.testnet.subnet_process", str(layout.root), subnet]


def _node_command(layout: TestnetLayout, node: str) -> list[str]:
    return [sys.executable, "-m", "replica.cli", "node", "run", "--config", str(layout.node_files(node).config)]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _read_endpoints(path: Path) -> dict[str, str] | None:
    """A node's ``endpoints.json`` once it names at least its XNet and HTTP addresses."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in ("xnet", "http")):
        return None
    return value


class Supervisor:
    """The launcher's processes, one per unit (a subnet, or a node in the node model): start
    each, notice one that died and restart it (module docstring), publish restarted
    processes' addresses, keep the subnets' ``status`` and ``http`` files, stop them all."""

    def __init__(self, layout: TestnetLayout, subnets: list[str], out, *, restart: bool = True,
                 publish_timeout_s: float = 120.0, process_model: str | None = None) -> None:
        self.layout = layout
        self.subnets = list(subnets)
        self.out = out
        self.restart = restart
        self.publish_timeout_s = publish_timeout_s
        self.model = process_model or process_model_of(layout.read_manifest())
        if self.model not in PROCESS_MODELS:
            raise TestnetError(f"no process model {self.model!r}; the models are {', '.join(PROCESS_MODELS)}")
        #: ``{subnet: [node, ...]}`` in registry order (node model; empty lists otherwise).
        self.nodes_by_subnet: dict[str, list[str]] = (
            testnet_nodes(layout, self.subnets) if self.model == "node" else {s: [] for s in self.subnets})
        #: The supervised units: the subnets, or every node of every subnet.
        self.units: list[str] = (
            [n for s in self.subnets for n in self.nodes_by_subnet[s]] if self.model == "node" else list(self.subnets))
        self.subnet_of: dict[str, str] = (
            {n: s for s, nodes in self.nodes_by_subnet.items() for n in nodes} if self.model == "node"
            else {s: s for s in self.subnets})
        self.processes: dict[str, subprocess.Popen] = {}
        #: Restarts per unit (for the summary and tests).
        self.restarts: collections.Counter[str] = collections.Counter()
        self._deaths: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        #: (Re)started units whose addresses are not in the registry yet, with their start time.
        self._unpublished: dict[str, float] = {}
        #: Dead nodes the supervisor does not restart while their hold file exists.
        self.held: set[str] = set()
        #: Deaths the launcher itself asked for (chaos), with the cause.
        self._expected: dict[str, str] = {}
        #: Node model: the endpoints of each running, published node.
        self._endpoints: dict[str, dict[str, str]] = {}
        self._http_written: dict[str, dict[str, str]] = {}
        self._status_written: dict[str, dict] = {}

    def restarts_of(self, subnet: str) -> int:
        """Restarts of the subnet's process, or of its nodes' processes."""
        return sum(self.restarts[u] for u in self.units if self.subnet_of[u] == subnet)

    # -- starting and publishing ------------------------------------------------------------

    def start_all(self) -> None:
        if self.model == "node":
            for subnet in self.subnets:   # the launcher writes these from the nodes' files
                self.layout.http(subnet).unlink(missing_ok=True)
                self.layout.status(subnet).unlink(missing_ok=True)
            for node in self.units:      # deaths asked of a previous launcher's processes
                self.layout.expected_death(node).unlink(missing_ok=True)
        for unit in self.units:
            if self.model == "node" and self.layout.hold(unit).exists():
                self.held.add(unit)
                self.note(unit, f"{unit} is held ({self.layout.hold(unit)}): not starting it "
                                f"(`replica testnet restart-node {unit}` starts it)")
                continue
            self._start(unit)

    def _start(self, unit: str) -> None:
        layout = self.layout
        if self.model == "node":
            command = self._prepare_node(unit)
        else:
            layout.addresses(unit).unlink(missing_ok=True)
            layout.http(unit).unlink(missing_ok=True)
            layout.status(unit).unlink(missing_ok=True)
            command = _child_command(layout, unit)
        layout.log(unit).parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env[LAUNCHER_PID_ENV] = str(os.getpid())
        with open(layout.log(unit), "ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True,  # a terminal's Ctrl-C goes to the launcher only
            )
        self.processes[unit] = process
        write_atomically(layout.pid(unit), f"{process.pid}\n".encode())
        self._unpublished[unit] = time.monotonic()

    def _prepare_node(self, node: str) -> list[str]:
        """Write the node's config unless it has one; remove what its last run bound and said."""
        from replica.node.process_config import NodeProcessConfig

        files = self.layout.node_files(node)
        if not files.config.exists():
            tick_s = float(self.layout.read_manifest().get("tick_s", 0.5))
            config = NodeProcessConfig(testnet_dir=str(self.layout.root.resolve()), node_id=node,
                                       subnet_id=self.subnet_of[node], tick_s=tick_s, block_interval_s=tick_s,
                                       round_timeout_s=max(1.0, 2 * tick_s))
            write_atomically(files.config, config.to_json().encode())
        files.endpoints.unlink(missing_ok=True)   # stale ports are never published
        files.status.unlink(missing_ok=True)      # nor a stale status taken for this run's
        return _node_command(self.layout, node)

    @property
    def published(self) -> bool:
        """Every (re)started process's addresses are in ``registry.bin``."""
        return not self._unpublished

    def wait_published(self) -> None:
        """Supervise until every process has bound and the registry lists its addresses."""
        while not self.published:
            self.check()
            if not self.published:
                time.sleep(0.05)

    def _bound(self, unit: str) -> dict[str, str] | None:
        """What ``unit`` bound: ``{node: xnet address}`` (subnet model), or its endpoints."""
        if self.model == "node":
            return _read_endpoints(self.layout.node_files(unit).endpoints)
        return self.layout.read_json(self.layout.addresses(unit))

    def _publish(self) -> None:
        """Once every (re)started process has written its addresses, put them into the registry."""
        if not self._unpublished:
            return
        now = time.monotonic()
        bound = {unit: self._bound(unit) for unit in sorted(self._unpublished)}
        late = [unit for unit, b in bound.items()
                if b is None and now - self._unpublished[unit] > self.publish_timeout_s]
        if late:
            kind = "nodes" if self.model == "node" else "subnets"
            raise TestnetError(f"{kind} {late} did not bind their endpoints in {self.publish_timeout_s} s; "
                               f"see {self.layout.log(late[0])}")
        if any(b is None for b in bound.values()):
            return
        if self.model == "node":
            found = {node: endpoints["xnet"] for node, endpoints in bound.items()}
        else:
            found = {node: address for addresses in bound.values() for node, address in addresses.items()}
        update_registry_file(self.layout, lambda registry: registry.with_node_addresses(found))
        if self.model == "node":
            self._endpoints.update(bound)
        self._unpublished.clear()

    # -- supervision ------------------------------------------------------------------------

    def check(self) -> None:
        """Handle every process that exited (log it, restart it or raise ``TestnetError``),
        start held nodes whose hold is gone, then publish restarted processes' addresses and
        (node model) rewrite the subnets' ``http`` and ``status`` files."""
        for unit, process in list(self.processes.items()):
            if process.poll() is not None:
                self._died(unit, process)
        for node in sorted(self.held):
            if not self.layout.hold(node).exists():
                self.held.discard(node)
                self.note(node, f"the hold on {node} is gone: starting it")
                self._start(node)
                self.restarts[node] += 1
                self.note(node, f"started {node} as pid {self.processes[node].pid}")
        self._publish()
        if self.model == "node":
            self._write_http()
            self._write_status()

    def down_units(self) -> set[str]:
        """Units not serving: not running, not yet re-published, or held (chaos's view)."""
        down = {u for u in self.units if u not in self.processes or u in self._unpublished}
        if self.model == "node":
            down |= {u for u in self.units if self.layout.hold(u).exists()}
        return down

    def note(self, unit: str, message: str) -> None:
        """Tell the launcher's output stream and the unit's log."""
        print(f"testnet: {message}", file=self.out, flush=True)
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        try:
            with open(self.layout.log(unit), "a") as log:
                log.write(f"{stamp} launcher: {message}\n")
        except OSError:
            pass


    def _consume_expected(self, unit: str) -> str | None:
        """The cause of ``unit``'s death if it was asked for (the marker is consumed)."""
        cause = self._expected.pop(unit, None)
        marker = self.layout.expected_death(unit)
        try:
            text = marker.read_text().strip()
        except OSError:
            return cause
        marker.unlink(missing_ok=True)
        return cause or text or "asked for"

    def _died(self, unit: str, process: subprocess.Popen) -> None:
        del self.processes[unit]
        self.layout.pid(unit).unlink(missing_ok=True)
        self._unpublished.pop(unit, None)
        self._endpoints.pop(unit, None)
        log = self.layout.log(unit)
        what = f"the process of {unit} (pid {process.pid}) exited with {_describe_exit(process.returncode)}"
        if process.returncode == EXIT_REFUSED:
            self.note(unit, f"{what}: it refused to start, not restarting")
            raise TestnetError(f"{what}: it refused to start (exit code {EXIT_REFUSED}: do not restart); "
                               f"see {log}")
        expected = self._consume_expected(unit)
        if self.model == "node" and self.layout.hold(unit).exists():
            self.held.add(unit)
            self.note(unit, f"{what}; {unit} is held ({self.layout.hold(unit)}): not restarting it until "
                            f"the hold is removed (`replica testnet restart-node {unit}`)")
            return
        if expected is not None:
            self.note(unit, f"{what} ({expected}); restarting it (not counted toward the restart limit)")
        else:
            if not self.restart:
                self.note(unit, f"{what}; restarts are off (--no-restart)")
                raise TestnetError(f"{what}; see {log}")
            now = time.monotonic()
            deaths = self._deaths[unit]
            deaths.append(now)
            while deaths and now - deaths[0] > RESTART_WINDOW_S:
                deaths.popleft()
            if len(deaths) >= RESTART_LIMIT:
                self.note(unit, f"{what}, the {len(deaths)}th time within {RESTART_WINDOW_S:.0f} s: not restarting")
                raise TestnetError(f"{what}; it died {len(deaths)} times within {RESTART_WINDOW_S:.0f} s, "
                                   f"so it is not restarted; see {log}")
            if self.model == "node":
                self.note(unit, f"{what}; restarting it (it resumes from {self.layout.node_files(unit).root})")
            else:
                self.note(unit, f"{what}; restarting it (it re-executes {self.layout.blocks(unit)})")
        self._start(unit)
        self.restarts[unit] += 1
        self.note(unit, f"restarted {unit} as pid {self.processes[unit].pid}")

    def kill(self, unit: str, cause: str) -> bool:
        """SIGKILL ``unit``'s running process (a death asked for: restarted at once, not
        counted toward the restart limit); ``False`` if it does not run."""
        process = self.processes.get(unit)
        if process is None or process.poll() is not None:
            return False
        self._expected[unit] = cause
        self.note(unit, f"{cause}: killing {unit} (pid {process.pid}) with SIGKILL")
        process.kill()
        process.wait()
        self._died(unit, process)
        return True

    # -- the subnets' files (node model) ----------------------------------------------------

    def _write_http(self) -> None:
        """``http/<subnet>.json``: the ingress addresses of the subnet's running, published nodes."""
        for subnet, nodes in self.nodes_by_subnet.items():
            serving = {n: self._endpoints[n]["http"] for n in nodes if n in self._endpoints}
            if serving == self._http_written.get(subnet):
                continue
            if serving:
                self.layout.write_json(self.layout.http(subnet), serving)
            else:
                self.layout.http(subnet).unlink(missing_ok=True)
            self._http_written[subnet] = serving

    def _write_status(self) -> None:
        """``status/<subnet>.json``: the status of the subnet's running node with the highest
        certified height (the first in registry order on a tie)."""
        for subnet, nodes in self.nodes_by_subnet.items():
            best: dict | None = None
            for node in nodes:
                if node not in self.processes:
                    continue
                current = self.layout.read_json(self.layout.node_files(node).status)
                if not isinstance(current, dict):
                    continue
                if best is None or (current.get("certified_height") or 0) > (best.get("certified_height") or 0):
                    best = current
            if best is not None and best != self._status_written.get(subnet):
                self.layout.write_json(self.layout.status(subnet), best)
                self._status_written[subnet] = best

    # -- stopping ---------------------------------------------------------------------------

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every process, SIGKILL one still running after ``timeout_s``; each by its
        own pid, and each reaped. In the node model nothing serves the subnets' ingress
        addresses afterwards: ``http/<subnet>.json`` is removed."""
        processes = list(self.processes.items())
        for _, process in processes:
            if process.poll() is None:
                try:
                    process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        for unit, process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.note(unit, f"the process of {unit} (pid {process.pid}) did not stop in "
                                f"{timeout_s:.0f} s: killing it")
                process.kill()
                process.wait()
            self.layout.pid(unit).unlink(missing_ok=True)
            del self.processes[unit]
            self._endpoints.pop(unit, None)
        if self.model == "node":
            for subnet in self.subnets:
                self.layout.http(subnet).unlink(missing_ok=True)
                self._http_written[subnet] = {}


def _install_handlers() -> dict[int, Any] | None:
    """SIGTERM raises ``_Terminated``, SIGINT ``KeyboardInterrupt`` (also when the shell
    started us with SIGINT ignored); only possible in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminated(signum, frame):
        raise _Terminated(signum)

    return {signal.SIGTERM: signal.signal(signal.SIGTERM, terminated),
            signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler)}


def _hold_signals(previous: dict[int, Any] | None) -> None:
    """While stopping: a further SIGTERM / SIGINT must not abandon the processes."""
    if previous is not None:
        for sig in previous:
            signal.signal(sig, lambda *_: None)


def _restore_signals(previous: dict[int, Any] | None) -> None:
    if previous is not None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def launch(
    directory: Path | str,
    *,
    duration_s: float | None,
    traffic: bool = True,
    settle_timeout_s: float = 120.0,
    stream=None,
    restart: bool = True,
    chaos_kill: float = 0.0,
    chaos_seed: int | None = None,
) -> int:
    """Run the testnet in ``directory`` for ``duration_s`` seconds (``None``: until
    interrupted), then settle, check and stop. Returns 0 when the ledgers kept their supply,
    128 + SIGTERM when terminated. ``restart``: restart a process that dies (module
    docstring); otherwise a death nobody asked for stops the testnet with ``TestnetError``.
    ``chaos_kill`` (node model): SIGKILL about that many random nodes a second while it runs,
    never more than f of a subnet down (``replica.testnet.chaos``, seeded by ``chaos_seed``)."""
    layout = TestnetLayout(Path(directory))
    manifest = layout.read_manifest()
    subnets = list(manifest["subnets"])
    out = stream or sys.stdout
    if traffic:
        layout.traffic_off.unlink(missing_ok=True)
    else:
        write_atomically(layout.traffic_off, b"")
    model = process_model_of(manifest)
    kind = "subnet process" if model == "subnet" else "node process"
    if chaos_kill < 0:
        raise TestnetError(f"--chaos-kill is kills per second, not {chaos_kill!r}")
    if chaos_kill and model != "node":
        raise TestnetError(f"--chaos-kill kills nodes: the testnet in {layout.root} runs one process per subnet "
                           f"(process model 'subnet'); use a testnet of process model 'node'")
    supervisor = Supervisor(layout, subnets, out, restart=restart, process_model=model)
    chaos = None
    previous = _install_handlers()
    write_atomically(layout.pid("launcher"), f"{os.getpid()}\n".encode())
    try:
        try:
            supervisor.start_all()
            supervisor.wait_published()
            status = Progress(f"testnet: {len(subnets)} subnets x {manifest['nodes']} nodes in {layout.root}"
                              + (", one process per node" if model == "node" else ""))
            if chaos_kill:
                from replica.testnet.chaos import DEFAULT_CHAOS_SEED, Chaos

                chaos = Chaos(supervisor, chaos_kill, DEFAULT_CHAOS_SEED if chaos_seed is None else chaos_seed)
            started = time.monotonic()
            shown = 0.0
            try:
                while duration_s is None or time.monotonic() - started < duration_s:
                    supervisor.check()   # every 0.1 s: a died or released node is restarted at once
                    if chaos is not None:
                        chaos.tick()
                    if time.monotonic() - shown >= 0.5:
                        shown = time.monotonic()
                        statuses = read_statuses(layout, subnets)
                        status.update(_describe(statuses))
                    time.sleep(0.1)
            except KeyboardInterrupt:
                print("\ninterrupted: settling (interrupt again to stop at once)", file=out)
            write_atomically(layout.traffic_off, b"")
            settle = Progress("testnet: traffic off, waiting until every call is answered")
            deadline = time.monotonic() + settle_timeout_s
            statuses = read_statuses(layout, subnets)
            while not (supervisor.published and quiescent(statuses)):
                supervisor.check()
                if time.monotonic() > deadline:
                    print(f"not quiescent after {settle_timeout_s} s: {_describe(statuses)}", file=out)
                    return 1
                settle.update(_describe(statuses))
                time.sleep(0.5)
                statuses = read_statuses(layout, subnets)
            settle.finish()
        finally:
            _hold_signals(previous)
            supervisor.stop()
    except _Terminated:
        print(f"\nterminated: stopped every {kind}", file=out)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print(f"\ninterrupted: stopped every {kind}", file=out)
        return 128 + signal.SIGINT
    finally:
        _hold_signals(previous)
        supervisor.stop()  # a no-op unless a signal cut the inner ``finally`` short
        layout.pid("launcher").unlink(missing_ok=True)
        _restore_signals(previous)
        if chaos is not None:
            print(f"  {chaos.summary()}", file=out)
    _write_run_log(layout, subnets, out)
    if not has_genesis_apps(manifest):
        for subnet in subnets:
            s = statuses[subnet]
            restarted = f", restarted {supervisor.restarts_of(subnet)}x" if supervisor.restarts_of(subnet) else ""
            print(f"  {subnet}: height {s['height']}, xnet inducted {s['xnet_inducted']}, "
                  f"root {s['certified_root'][:16]}{restarted}", file=out)
        return 0
    supply = total_supply(statuses)
    expected = INITIAL_BALANCE * len(subnets)
    for subnet in subnets:
        s = statuses[subnet]
        restarted = f", restarted {supervisor.restarts_of(subnet)}x" if supervisor.restarts_of(subnet) else ""
        print(f"  {subnet}: height {s['height']}, xnet inducted {s['xnet_inducted']}, "
              f"pings {s['pings']}, counter {s['counter']}, root {s['certified_root'][:16]}{restarted}", file=out)
    ok = supply == expected
    print(f"  ledger supply {supply} (initial {expected}): {'invariant holds' if ok else 'INVARIANT BROKEN'}",
          file=out)
    return 0 if ok else 1


def _node_recordings(layout: TestnetLayout, subnets: list[str]) -> list:
    """Per subnet, the recording of the node that executed the most batches from genesis
    (the first in registry order on a tie); a node whose log does not start at genesis
    (e.g. after a state sync) has none. ``TestnetError`` for a subnet without one."""
    from replica.testnet.recording import read_node_recording

    recordings = []
    for subnet, nodes in testnet_nodes(layout, subnets).items():
        best = None
        for node in nodes:
            recording = read_node_recording(layout.node_files(node))
            if recording is not None and (best is None or len(recording.batches) > len(best.batches)):
                best = recording
        if best is None:
            raise TestnetError(f"no node of {subnet} holds its executed log from genesis: no run log is written")
        recordings.append(best)
    return recordings


def _write_run_log(layout: TestnetLayout, subnets: list[str], out) -> None:
    """Assemble the recordings into ``DIR/run`` (checked by replaying): the subnet processes',
    or per subnet the longest of its nodes' (``_node_recordings``)."""
    from replica.audit.run_log import write_run_log
    from replica.testnet.recording import decode_recording, run_log_from_recordings

    manifest = layout.read_manifest()
    if process_model_of(manifest) == "node":
        recordings = _node_recordings(layout, subnets)
    else:
        recordings = [decode_recording(layout.recording(subnet).read_bytes()) for subnet in subnets]
    registry = decode_registry(layout.registry.read_bytes())
    classes = canister_classes(manifest["canister_modules"])
    limits = LIMIT_PRESETS[manifest["limits"]]
    log = run_log_from_recordings(recordings, classes, limits, [r.topology() for r in registry.records])
    write_run_log(log, layout.run)
    print(f"  run log: {layout.run} (audit it with: replica audit {layout.run})", file=out)


def _describe(statuses: dict[str, dict]) -> str:
    return " ".join(f"{s}={st.get('height', '?')}" for s, st in statuses.items())
