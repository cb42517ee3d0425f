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
for (``kill-node``, ``restart-node``, chaos: ``replica.processes.chaos``) is restarted without
counting toward ``RESTART_LIMIT`` — also with ``restart=False`` (``--no-restart``), which
stops the testnet only at a death nobody asked for (a held node's death is asked for too).
"""

from __future__ import annotations

import collections
import datetime
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

from replica.testnet.launcher import (
    EXIT_REFUSED, INITIAL_BALANCE, LAUNCHER_PID_ENV, LIMIT_PRESETS, RESTART_LIMIT, RESTART_WINDOW_S,
    STOP_TIMEOUT_S, TestnetError, TestnetLayout, has_genesis_apps, quiescent, read_statuses, total_supply,
    update_registry_file, write_atomically,
)
from .process_models import ProcessModel, process_model

__all__ = ["Supervisor", "launch"]

class _Terminated(BaseException):
    """Raised in the launcher's main thread by SIGTERM (like ``KeyboardInterrupt`` for SIGINT)."""


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """The launcher's processes, one per unit (a subnet, or a node in the node model): start
    each, notice one that died and restart it (module docstring), publish restarted
    processes' addresses, keep the subnets' ``status`` and ``http`` files, stop them all."""

    def __init__(self, layout: TestnetLayout, subnets: list[str], out, *, restart: bool = True,
                 publish_timeout_s: float = 120.0, process_model_name: str | None = None) -> None:
        self.layout = layout
        self.subnets = list(subnets)
        self.out = out
        self.restart = restart
        self.publish_timeout_s = publish_timeout_s
        #: How the directory runs (``replica.processes.process_models``).
        self.model: ProcessModel = process_model(layout, self.subnets, process_model_name)
        #: The supervised units: the subnets, or every node of every subnet.
        self.units: list[str] = self.model.units
        self.subnet_of: dict[str, str] = self.model.subnet_of
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
        #: What each running, published unit bound.
        self._endpoints: dict[str, dict[str, str]] = {}

    @property
    def nodes_by_subnet(self) -> dict[str, list[str]]:
        """``{subnet: [node, ...]}`` of the node processes (chaos picks its victims there)."""
        return self.model.nodes_by_subnet

    def restarts_of(self, subnet: str) -> int:
        """Restarts of the subnet's process, or of its nodes' processes."""
        return sum(self.restarts[u] for u in self.units if self.subnet_of[u] == subnet)

    # -- starting and publishing ------------------------------------------------------------

    def start_all(self) -> None:
        self.model.clear()
        for unit in self.units:
            if self.model.is_held(unit):
                self.held.add(unit)
                self.note(unit, f"{unit} is held ({self.layout.hold(unit)}): not starting it "
                                f"(`replica testnet restart-node {unit}` starts it)")
                continue
            self._start(unit)

    def _start(self, unit: str) -> None:
        layout = self.layout
        command = self.model.command(unit)
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

    def _publish(self) -> None:
        """Once every (re)started process has written its addresses, put them into the registry."""
        if not self._unpublished:
            return
        now = time.monotonic()
        bound = {unit: self.model.bound(unit) for unit in sorted(self._unpublished)}
        late = [unit for unit, b in bound.items()
                if b is None and now - self._unpublished[unit] > self.publish_timeout_s]
        if late:
            kind = "nodes" if self.model.has_node_processes else "subnets"
            raise TestnetError(f"{kind} {late} did not bind their endpoints in {self.publish_timeout_s} s; "
                               f"see {self.layout.log(late[0])}")
        if any(b is None for b in bound.values()):
            return
        found = self.model.xnet_addresses(bound)   # type: ignore[arg-type]
        update_registry_file(self.layout, lambda registry: registry.with_node_addresses(found))
        self._endpoints.update(bound)   # type: ignore[arg-type]
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
        self.model.keep_files(set(self.processes), self._endpoints)

    def down_units(self) -> set[str]:
        """Units not serving: not running, not yet re-published, or held (chaos's view)."""
        return {u for u in self.units if u not in self.processes or u in self._unpublished or self.model.is_held(u)}

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
        if self.model.is_held(unit):
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
            self.note(unit, f"{what}; restarting it ({self.model.resumes_from(unit)})")
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
        self.model.stopped()


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
    never more than f of a subnet down (``replica.processes.chaos``, seeded by ``chaos_seed``)."""
    layout = TestnetLayout(Path(directory))
    manifest = layout.read_manifest()
    subnets = list(manifest["subnets"])
    out = stream or sys.stdout
    if traffic:
        layout.traffic_off.unlink(missing_ok=True)
    else:
        write_atomically(layout.traffic_off, b"")
    if chaos_kill < 0:
        raise TestnetError(f"--chaos-kill is kills per second, not {chaos_kill!r}")
    supervisor = Supervisor(layout, subnets, out, restart=restart)
    model = supervisor.model
    if chaos_kill and not model.has_node_processes:
        raise TestnetError(f"--chaos-kill kills nodes: the testnet in {layout.root} runs one process per subnet "
                           f"(process model 'subnet'); use a testnet of process model 'node'")
    chaos = None
    previous = _install_handlers()
    write_atomically(layout.pid("launcher"), f"{os.getpid()}\n".encode())
    try:
        try:
            supervisor.start_all()
            supervisor.wait_published()
            status = Progress(f"testnet: {len(subnets)} subnets x {manifest['nodes']} nodes in {layout.root}"
                              + (", one process per node" if model.has_node_processes else ""))
            if chaos_kill:
                from replica.processes.chaos import DEFAULT_CHAOS_SEED, Chaos

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
        print(f"\nterminated: stopped every {model.kind}", file=out)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print(f"\ninterrupted: stopped every {model.kind}", file=out)
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


def _write_run_log(layout: TestnetLayout, subnets: list[str], out) -> None:
    """Assemble the recordings of the directory's process model into ``DIR/run`` (checked by
    replaying)."""
    from replica.audit.run_log import write_run_log
    from replica.testnet.recording import run_log_from_recordings

    manifest = layout.read_manifest()
    recordings = process_model(layout, subnets).recordings()
    registry = decode_registry(layout.registry.read_bytes())
    classes = canister_classes(manifest["canister_modules"])
    limits = LIMIT_PRESETS[manifest["limits"]]
    log = run_log_from_recordings(recordings, classes, limits, [r.topology() for r in registry.records])
    write_run_log(log, layout.run)
    print(f"  run log: {layout.run} (audit it with: replica audit {layout.run})", file=out)


def _describe(statuses: dict[str, dict]) -> str:
    return " ".join(f"{s}={st.get('height', '?')}" for s, st in statuses.items())
