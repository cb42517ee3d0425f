"""A local multi-process testnet: ``replica testnet --subnets N --nodes M --dir DIR``.

``create_testnet`` writes a testnet directory; ``launch`` starts one process per subnet
(``replica.testnet.subnet_process``), each running its subnet's M nodes, all XNet endpoints on
127.0.0.1. The directory::

    manifest.json               subnets, canister modules, limits preset, tick, seed (hex)
    registry.bin                the registry (consensus_stub.registry encoding); rewritten
                                once every subnet process has bound its endpoints
    genesis/<subnet>.bin        genesis state (state_codec)
    secrets/<node>.bin          one node's secret key share and TLS key (mode 0600)
    addresses/<subnet>.json     {node id: "127.0.0.1:port"}, written by the subnet process
    blocks/<subnet>.blocks      the subnet's finalized blocks (consensus_stub.block_store)
                                and, in ``<subnet>.blocks.finalized``, the highest height
                                it holds: a log short of it refuses to start (exit code 3)
    status/<subnet>.json        height, certified root, streams, app counters (every tick)
    recordings/<subnet>.bin     genesis, batches and live hashes (replica.testnet.recording),
                                written when the process stops
    run/                        the whole run as the audit's run log: ``replica audit DIR/run``
    control/traffic-off         present: the processes stop submitting demo traffic
    logs/<subnet>.log           the subnet process's log (and the launcher's notes on it)
    pids/launcher.pid           the running launcher's pid, and each running subnet
    pids/<subnet>.pid           process's pid (removed once the process is stopped)

With ``genesis_apps`` (``replica testnet run``) every subnet hosts the example apps (ledger,
ping-pong, counter) and one user whose tokens live on its ledger, and with ``traffic`` each
process submits signed pings and cross-subnet transfers every tick; without (``replica
testnet up``) subnets start empty and users install canisters through the ingress API. At
the end the launcher turns traffic off, waits until every call is answered and every stream
acknowledged, checks that the genesis ledgers (if any) kept their total supply, and stops
the processes; then it writes the run log a determinism audit replays. A
restarted launch on the same directory resumes from the block logs.

The launcher supervises its subnet processes (``Supervisor``). One that dies is logged and
restarted on the same directory: it re-executes its block log, binds new XNet ports and
writes ``addresses/<subnet>.json``; the launcher rewrites ``registry.bin`` with them, and
every subnet process re-reads ``registry.bin`` whenever it changes, so its peers fetch from
the new ports. A process that exits with ``EXIT_REFUSED`` (it refused to start, e.g. on a
corrupt block log) or dies ``RESTART_LIMIT`` times within ``RESTART_WINDOW_S`` seconds
stops the testnet with an error naming it and its log. SIGINT settles and stops as at the
end of the duration; SIGTERM stops every subnet process at once (SIGTERM, then SIGKILL
after ``STOP_TIMEOUT_S``), without settling or writing the run log. The subnet processes
run in their own session (a terminal's Ctrl-C reaches only the launcher) and stop by
themselves when the launcher dies.
"""

from __future__ import annotations

import collections
import datetime
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from consensus_stub.genesis import SubnetSpec, encode_node_secrets, genesis_registry
from consensus_stub.registry import Registry, decode_registry, encode_registry
from examples.counter import Counter
from examples.ledger import Ledger, account_of
from examples.ping_pong import PingPong
from message_routing.limits import DEFAULT, MINIMAL
from replica.execution import install_canister, module_name_of
from replica.client import UserKey
from replica.errors import ReplicaError
from replica.node.batch_processor import canister_classes
from replica.progress import Progress
from replica.testnet.naming import subnet_names
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import encode_state

__all__ = [
    "LIMIT_PRESETS", "LEDGER", "PINGER", "COUNTER", "INITIAL_BALANCE", "TestnetError", "TestnetLayout",
    "canister_range", "user_key", "create_testnet", "has_genesis_apps", "update_registry_file", "launch", "quiescent", "total_supply", "Supervisor",
    "EXIT_REFUSED", "RESTART_LIMIT", "RESTART_WINDOW_S", "STOP_TIMEOUT_S", "LAUNCHER_PID_ENV",
]

LEDGER, PINGER, COUNTER = 1, 2, 3
INITIAL_BALANCE = 1_000_000
CANISTERS_PER_SUBNET = 1_000
APPS = (Ledger, PingPong, Counter)
#: ``TINY_QUEUES``: ``MINIMAL``'s queues, streams, slices and round budgets (back-pressure on
#: every path), with ingress, blocks and expiries large enough to install canisters.
LIMIT_PRESETS = {
    "DEFAULT": DEFAULT, "MINIMAL": MINIMAL,
    "TINY_QUEUES": MINIMAL.with_(max_ingress_bytes=DEFAULT.max_ingress_bytes // 64,
                                 max_block_payload_bytes=DEFAULT.max_block_payload_bytes // 32,
                                 max_ingress_ttl_ns=DEFAULT.max_ingress_ttl_ns,
                                 ingress_history_retention_ns=DEFAULT.ingress_history_retention_ns),
}

#: A subnet process exiting with this code refused to start (e.g. a corrupt block log):
#: restarting it would only fail again, so the launcher stops the testnet instead.
EXIT_REFUSED = 3
#: A subnet process that dies this many times within ``RESTART_WINDOW_S`` is not restarted.
RESTART_LIMIT = 3
RESTART_WINDOW_S = 30.0
#: Seconds a subnet process gets to stop after SIGTERM before it is SIGKILLed.
STOP_TIMEOUT_S = 20.0
#: Set in a subnet process's environment: the launcher's pid (the process stops when it dies).
LAUNCHER_PID_ENV = "REPLICA_TESTNET_LAUNCHER_PID"


class TestnetError(ReplicaError, RuntimeError):
    """The testnet directory or one of its processes is not usable."""


def canister_range(position: int) -> tuple[int, int]:
    return (position * CANISTERS_PER_SUBNET, (position + 1) * CANISTERS_PER_SUBNET - 1)


def user_key(subnet: str) -> UserKey:
    """The demo user whose tokens live on ``subnet``'s ledger."""
    return UserKey.from_seed(f"user-of-{subnet}".encode())


def _write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Atomically replace ``path`` with ``data``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


@dataclass(frozen=True)
class TestnetLayout:
    """Paths inside a testnet directory."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def registry(self) -> Path:
        return self.root / "registry.bin"

    def genesis(self, subnet: str) -> Path:
        return self.root / "genesis" / f"{subnet}.bin"

    def secrets(self, node: str) -> Path:
        return self.root / "secrets" / f"{node}.bin"

    def addresses(self, subnet: str) -> Path:
        return self.root / "addresses" / f"{subnet}.json"

    @property
    def http_dir(self) -> Path:
        return self.root / "http"

    def http(self, subnet: str) -> Path:
        """``http/<subnet>.json``: ``{node id: "127.0.0.1:port"}`` of its nodes' ingress HTTP APIs."""
        return self.http_dir / f"{subnet}.json"

    def blocks(self, subnet: str) -> Path:
        return self.root / "blocks" / f"{subnet}.blocks"

    def status(self, subnet: str) -> Path:
        return self.root / "status" / f"{subnet}.json"

    @property
    def traffic_off(self) -> Path:
        return self.root / "control" / "traffic-off"

    def log(self, subnet: str) -> Path:
        return self.root / "logs" / f"{subnet}.log"

    def pid(self, name: str) -> Path:
        """``pids/<name>.pid``: the pid of the launcher (``"launcher"``) or of a subnet process."""
        return self.root / "pids" / f"{name}.pid"

    def recording(self, subnet: str) -> Path:
        return self.root / "recordings" / f"{subnet}.bin"

    @property
    def run(self) -> Path:
        return self.root / "run"

    def read_manifest(self) -> dict[str, Any]:
        try:
            return json.loads(self.manifest.read_text())
        except (OSError, ValueError) as exc:
            raise TestnetError(f"{self.root} is not a testnet directory: {exc}") from exc

    def write_json(self, path: Path, value: Any) -> None:
        _write(path, json.dumps(value, sort_keys=True).encode())

    def read_json(self, path: Path) -> Any | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None


def _genesis_state(registry, subnet: str, position: int, genesis_time: int, apps: bool) -> bytes:
    state = ReplicatedState(subnet, registry.topology(registry.latest_version))
    state.metadata.batch_time = genesis_time
    if not apps:
        return encode_state(state)
    base = canister_range(position)[0]
    holder = account_of(user_key(subnet).source)
    install_canister(state, base + LEDGER, Ledger, {"balances": ((holder, INITIAL_BALANCE),)})
    install_canister(state, base + PINGER, PingPong)
    install_canister(state, base + COUNTER, Counter)
    return encode_state(state)


def create_testnet(directory: Path | str, subnets: int, nodes: int, *, seed: bytes, tick_s: float = 0.5,
                   genesis_apps: bool = True, limits: str = "DEFAULT") -> TestnetLayout:
    """Write a fresh testnet directory (refuses a directory that already holds one). With
    ``genesis_apps`` every subnet starts with the example apps and the demo user's tokens
    (``replica testnet run``); without, it starts empty and canisters come by ``install_code``
    (``replica testnet up``). ``limits`` names one of ``LIMIT_PRESETS``."""
    layout = TestnetLayout(Path(directory))
    if limits not in LIMIT_PRESETS:
        raise TestnetError(f"no limits preset {limits!r}; the presets are {', '.join(LIMIT_PRESETS)}")
    if layout.manifest.exists():
        raise TestnetError(f"{layout.root} already holds a testnet; launch it, or choose another directory")
    if subnets < 1 or nodes < 1:
        raise TestnetError("a testnet needs at least one subnet of at least one node")
    ids = subnet_names(subnets)
    specs = [SubnetSpec(s, nodes, (canister_range(i),)) for i, s in enumerate(ids)]
    not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    registry, secrets = genesis_registry(specs, seed, not_before=not_before)
    genesis_time = time.time_ns()
    for position, subnet in enumerate(ids):
        _write(layout.genesis(subnet), _genesis_state(registry, subnet, position, genesis_time, genesis_apps))
    for node_id, node_secrets in secrets.items():
        _write(layout.secrets(node_id), encode_node_secrets(node_secrets), mode=0o600)
    _write(layout.registry, encode_registry(registry))
    layout.write_json(layout.manifest, {
        "version": 1,
        "subnets": ids,
        "nodes": nodes,
        "canister_modules": [module_name_of(cls) for cls in APPS] if genesis_apps else [],
        "genesis_apps": genesis_apps,
        "limits": limits,
        "tick_s": tick_s,
        "seed": seed.hex(),
    })
    return layout


def update_registry_file(layout: TestnetLayout, change: Callable[[Registry], Registry]) -> Registry:
    """Apply ``change`` to ``registry.bin`` and write the result atomically; return it. The
    launcher (node addresses) and a migration (new versions) both rewrite the file: an
    exclusive lock on ``registry.bin.lock`` keeps one from undoing the other."""
    lock_path = layout.registry.with_name(layout.registry.name + ".lock")
    with open(lock_path, "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            registry = change(decode_registry(layout.registry.read_bytes()))
            _write(layout.registry, encode_registry(registry))
            return registry
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# -- the launcher -----------------------------------------------------------------------------

def _statuses(layout: TestnetLayout, subnets: list[str]) -> dict[str, dict]:
    return {s: layout.read_json(layout.status(s)) or {} for s in subnets}


def quiescent(statuses: dict[str, dict]) -> bool:
    """Every call answered (no open call contexts, no escrow) and every stream between two
    subnets garbage-collected and acknowledged by its receiver."""
    for subnet, status in statuses.items():
        if not status or status.get("open_calls") or status.get("escrow"):
            return False
        for dst, (begin, end, _signals_end) in status.get("streams", {}).items():
            peer = statuses.get(dst, {}).get("streams", {}).get(subnet)
            if begin != end or peer is None or peer[2] != end:
                return False
    return True


def has_genesis_apps(manifest: dict[str, Any]) -> bool:
    """The testnet started with the example apps (manifests before ``genesis_apps`` always did)."""
    return bool(manifest.get("genesis_apps", True))


def total_supply(statuses: dict[str, dict]) -> int:
    return sum(status.get("balances", 0) + status.get("escrow", 0) for status in statuses.values())


class _Terminated(BaseException):
    """Raised in the launcher's main thread by SIGTERM (like ``KeyboardInterrupt`` for SIGINT)."""


def _child_command(layout: TestnetLayout, subnet: str) -> list[str]:
    return [sys.executable, "-m", "replica.testnet.subnet_process", str(layout.root), subnet]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """The launcher's subnet processes: start each, notice one that died and restart it
    (module docstring), publish restarted processes' addresses, and stop them all."""

    def __init__(self, layout: TestnetLayout, subnets: list[str], out, *, restart: bool = True,
                 publish_timeout_s: float = 120.0) -> None:
        self.layout = layout
        self.subnets = list(subnets)
        self.out = out
        self.restart = restart
        self.publish_timeout_s = publish_timeout_s
        self.processes: dict[str, subprocess.Popen] = {}
        #: Restarts per subnet (for the summary and tests).
        self.restarts: collections.Counter[str] = collections.Counter()
        self._deaths: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._unpublished: set[str] = set()
        self._publish_deadline = 0.0

    # -- starting and publishing ------------------------------------------------------------

    def start_all(self) -> None:
        for subnet in self.subnets:
            self._start(subnet)

    def _start(self, subnet: str) -> None:
        layout = self.layout
        layout.addresses(subnet).unlink(missing_ok=True)
        layout.http(subnet).unlink(missing_ok=True)
        layout.status(subnet).unlink(missing_ok=True)
        layout.log(subnet).parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env[LAUNCHER_PID_ENV] = str(os.getpid())
        with open(layout.log(subnet), "ab") as log:
            process = subprocess.Popen(
                _child_command(layout, subnet), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True,  # a terminal's Ctrl-C goes to the launcher only
            )
        self.processes[subnet] = process
        _write(layout.pid(subnet), f"{process.pid}\n".encode())
        if not self._unpublished:
            self._publish_deadline = time.monotonic() + self.publish_timeout_s
        self._unpublished.add(subnet)

    @property
    def published(self) -> bool:
        """Every (re)started process's addresses are in ``registry.bin``."""
        return not self._unpublished

    def wait_published(self) -> None:
        """Supervise until every subnet process has bound and the registry lists its addresses."""
        while not self.published:
            self.check()
            if not self.published:
                time.sleep(0.05)

    def _publish(self) -> None:
        """Once every (re)started process has written its addresses, put them into the registry."""
        if not self._unpublished:
            return
        found: dict[str, str] = {}
        for subnet in sorted(self._unpublished):
            addresses = self.layout.read_json(self.layout.addresses(subnet))
            if addresses is None:
                if time.monotonic() > self._publish_deadline:
                    raise TestnetError(
                        f"subnets {sorted(self._unpublished)} did not bind their endpoints in "
                        f"{self.publish_timeout_s} s; see {self.layout.log(subnet)}")
                return
            found.update(addresses)
        update_registry_file(self.layout, lambda registry: registry.with_node_addresses(found))
        self._unpublished.clear()

    # -- supervision ------------------------------------------------------------------------

    def check(self) -> None:
        """Handle every subnet process that exited (log it, restart it or raise
        ``TestnetError``), then publish restarted processes' addresses."""
        for subnet, process in list(self.processes.items()):
            if process.poll() is not None:
                self._died(subnet, process)
        self._publish()

    def _note(self, subnet: str, message: str) -> None:
        """Tell the launcher's output stream and the subnet's log."""
        print(f"testnet: {message}", file=self.out, flush=True)
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        try:
            with open(self.layout.log(subnet), "a") as log:
                log.write(f"{stamp} launcher: {message}\n")
        except OSError:
            pass

    def _died(self, subnet: str, process: subprocess.Popen) -> None:
        del self.processes[subnet]
        self.layout.pid(subnet).unlink(missing_ok=True)
        self._unpublished.discard(subnet)
        log = self.layout.log(subnet)
        what = f"the process of {subnet} (pid {process.pid}) exited with {_describe_exit(process.returncode)}"
        if process.returncode == EXIT_REFUSED:
            self._note(subnet, f"{what}: it refused to start, not restarting")
            raise TestnetError(f"{what}: it refused to start (exit code {EXIT_REFUSED}: do not restart); "
                               f"see {log}")
        if not self.restart:
            self._note(subnet, f"{what}; restarts are off (--no-restart)")
            raise TestnetError(f"{what}; see {log}")
        now = time.monotonic()
        deaths = self._deaths[subnet]
        deaths.append(now)
        while deaths and now - deaths[0] > RESTART_WINDOW_S:
            deaths.popleft()
        if len(deaths) >= RESTART_LIMIT:
            self._note(subnet, f"{what}, the {len(deaths)}th time within {RESTART_WINDOW_S:.0f} s: not restarting")
            raise TestnetError(f"{what}; it died {len(deaths)} times within {RESTART_WINDOW_S:.0f} s, "
                               f"so it is not restarted; see {log}")
        self._note(subnet, f"{what}; restarting it (it re-executes {self.layout.blocks(subnet)})")
        self._start(subnet)
        self.restarts[subnet] += 1
        self._note(subnet, f"restarted {subnet} as pid {self.processes[subnet].pid}")

    # -- stopping ---------------------------------------------------------------------------

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every subnet process, SIGKILL one still running after ``timeout_s``; each
        by its own pid, and each reaped."""
        processes = list(self.processes.items())
        for _, process in processes:
            if process.poll() is None:
                try:
                    process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        for subnet, process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._note(subnet, f"the process of {subnet} (pid {process.pid}) did not stop in "
                                   f"{timeout_s:.0f} s: killing it")
                process.kill()
                process.wait()
            self.layout.pid(subnet).unlink(missing_ok=True)
            del self.processes[subnet]


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
) -> int:
    """Run the testnet in ``directory`` for ``duration_s`` seconds (``None``: until
    interrupted), then settle, check and stop. Returns 0 when the ledgers kept their supply,
    128 + SIGTERM when terminated. ``restart``: restart a subnet process that dies (module
    docstring); otherwise its death stops the testnet with ``TestnetError``."""
    layout = TestnetLayout(Path(directory))
    manifest = layout.read_manifest()
    subnets = list(manifest["subnets"])
    out = stream or sys.stdout
    if traffic:
        layout.traffic_off.unlink(missing_ok=True)
    else:
        _write(layout.traffic_off, b"")
    supervisor = Supervisor(layout, subnets, out, restart=restart)
    previous = _install_handlers()
    _write(layout.pid("launcher"), f"{os.getpid()}\n".encode())
    try:
        try:
            supervisor.start_all()
            supervisor.wait_published()
            status = Progress(f"testnet: {len(subnets)} subnets x {manifest['nodes']} nodes in {layout.root}")
            started = time.monotonic()
            try:
                while duration_s is None or time.monotonic() - started < duration_s:
                    supervisor.check()
                    statuses = _statuses(layout, subnets)
                    status.update(_describe(statuses))
                    time.sleep(0.5)
            except KeyboardInterrupt:
                print("\ninterrupted: settling (interrupt again to stop at once)", file=out)
            _write(layout.traffic_off, b"")
            settle = Progress("testnet: traffic off, waiting until every call is answered")
            deadline = time.monotonic() + settle_timeout_s
            statuses = _statuses(layout, subnets)
            while not (supervisor.published and quiescent(statuses)):
                supervisor.check()
                if time.monotonic() > deadline:
                    print(f"not quiescent after {settle_timeout_s} s: {_describe(statuses)}", file=out)
                    return 1
                settle.update(_describe(statuses))
                time.sleep(0.5)
                statuses = _statuses(layout, subnets)
            settle.finish()
        finally:
            _hold_signals(previous)
            supervisor.stop()
    except _Terminated:
        print("\nterminated: stopped every subnet process", file=out)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("\ninterrupted: stopped every subnet process", file=out)
        return 128 + signal.SIGINT
    finally:
        _hold_signals(previous)
        supervisor.stop()  # a no-op unless a signal cut the inner ``finally`` short
        layout.pid("launcher").unlink(missing_ok=True)
        _restore_signals(previous)
    _write_run_log(layout, subnets, out)
    if not has_genesis_apps(manifest):
        for subnet in subnets:
            s = statuses[subnet]
            restarted = f", restarted {supervisor.restarts[subnet]}x" if supervisor.restarts[subnet] else ""
            print(f"  {subnet}: height {s['height']}, xnet inducted {s['xnet_inducted']}, "
                  f"root {s['certified_root'][:16]}{restarted}", file=out)
        return 0
    supply = total_supply(statuses)
    expected = INITIAL_BALANCE * len(subnets)
    for subnet in subnets:
        s = statuses[subnet]
        restarted = f", restarted {supervisor.restarts[subnet]}x" if supervisor.restarts[subnet] else ""
        print(f"  {subnet}: height {s['height']}, xnet inducted {s['xnet_inducted']}, "
              f"pings {s['pings']}, counter {s['counter']}, root {s['certified_root'][:16]}{restarted}", file=out)
    ok = supply == expected
    print(f"  ledger supply {supply} (initial {expected}): {'invariant holds' if ok else 'INVARIANT BROKEN'}",
          file=out)
    return 0 if ok else 1


def _write_run_log(layout: TestnetLayout, subnets: list[str], out) -> None:
    """Assemble the subnet processes' recordings into ``DIR/run`` (checked by replaying)."""
    from replica.audit.run_log import write_run_log
    from replica.testnet.recording import decode_recording, run_log_from_recordings

    manifest = layout.read_manifest()
    recordings = [decode_recording(layout.recording(subnet).read_bytes()) for subnet in subnets]
    registry = decode_registry(layout.registry.read_bytes())
    classes = canister_classes(manifest["canister_modules"])
    limits = LIMIT_PRESETS[manifest["limits"]]
    log = run_log_from_recordings(recordings, classes, limits, [r.topology() for r in registry.records])
    write_run_log(log, layout.run)
    print(f"  run log: {layout.run} (audit it with: replica audit {layout.run})", file=out)


def _describe(statuses: dict[str, dict]) -> str:
    return " ".join(f"{s}={st.get('height', '?')}" for s, st in statuses.items())
