"""A local multi-process testnet: ``replica testnet --subnets N --nodes M --dir DIR``.

``create_testnet`` writes a testnet directory; ``launch`` (``replica.processes.supervisor``) starts its processes, all endpoints
on 127.0.0.1, in one of two process models (the manifest's ``process_model``; absent:
``"subnet"``):

* ``"subnet"``: one process per subnet (``replica.processes.subnet_process``), each running its
  subnet's M nodes;
* ``"node"``: one process per node (``python -m replica node run --config
  DIR/nodes/<node>/config.json``, ``replica.node.process``), N x M processes.

The directory::

    manifest.json               subnets, canister modules, limits preset, tick, seed (hex),
                                process model
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

and in the node model, per node (``replica.node.process_config.NodeFiles``)::

    nodes/<node>/config.json    what the node is told (``NodeProcessConfig``), written by the
                                launcher before the first start, kept if present (editable)
    nodes/<node>/endpoints.json {"xnet", "agreement", "http": "127.0.0.1:port"}, written by the
                                node once bound (the launcher removes it before each start)
    nodes/<node>/ports.json     the ports the node bound last, which it asks for again when it
                                restarts (``replica.node.ports``)
    nodes/<node>/status.json    the node's status (as status/<subnet>.json, plus node_id;
                                removed by the launcher before each start)
    logs/<node>.log, pids/<node>.pid
    control/hold/<node>         present: the node is not restarted when it dies (and is
                                started once the file is removed): ``kill-node --hold``
    control/expected-death/<node>
                                the node's next death was asked for (``kill-node``,
                                ``restart-node``): restarted, not counted toward the limit

where the launcher, not a node, writes ``registry.bin`` (the nodes' XNet addresses, once
every (re)started node has written its endpoints), ``http/<subnet>.json`` (the ingress
addresses of the subnet's running, published nodes) and ``status/<subnet>.json`` (every
supervision tick: the status of the running node with the highest certified height, the
first in registry order on a tie), so every reader of those files works in both models.
The run log takes per subnet the recording of the node that executed the most batches from
genesis (``replica.testnet.recording.read_node_recording``).

With ``genesis_apps`` (``replica testnet run``) every subnet hosts the example apps (ledger,
ping-pong, counter) and one user whose tokens live on its ledger, and with ``traffic`` each
process submits signed pings and cross-subnet transfers every tick; without (``replica
testnet up``) subnets start empty and users install canisters through the ingress API. At
the end the launcher turns traffic off, waits until every call is answered and every stream
acknowledged, checks that the genesis ledgers (if any) kept their total supply, and stops
the processes; then it writes the run log a determinism audit replays. A
restarted launch on the same directory resumes from the block logs.

Running the directory — the supervisor and ``launch`` — is ``replica.processes.supervisor``.
"""

from __future__ import annotations

import datetime
import fcntl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from consensus_stub.genesis import SubnetSpec, encode_node_secrets, genesis_registry
from consensus_stub.registry import Registry, RegistryError, decode_registry, encode_registry
from examples.counter import Counter
from examples.ledger import Ledger, account_of
from examples.ping_pong import PingPong
from replica.execution import install_canister, module_name_of
from replica.client.identity import Ed25519Identity, source_of
from replica.node.testnet_dir import EXIT_REFUSED, LAUNCHER_PID_ENV, LIMIT_PRESETS, TestnetDirectory, TestnetError
from replica.testnet.naming import subnet_names
from state_manager import durable_files
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import encode_state

__all__ = [
    "LIMIT_PRESETS", "LEDGER", "PINGER", "COUNTER", "INITIAL_BALANCE", "TestnetError", "TestnetLayout",
    "canister_range", "user_key", "create_testnet", "has_genesis_apps", "update_registry_file", "quiescent",
    "total_supply", "read_statuses", "write_atomically",
    "EXIT_REFUSED", "RESTART_LIMIT", "RESTART_WINDOW_S", "STOP_TIMEOUT_S", "LAUNCHER_PID_ENV",
    "PROCESS_MODELS", "DEFAULT_PROCESS_MODEL", "process_model_of", "testnet_nodes",
]

LEDGER, PINGER, COUNTER = 1, 2, 3
INITIAL_BALANCE = 1_000_000
CANISTERS_PER_SUBNET = 1_000
APPS = (Ledger, PingPong, Counter)
#: A subnet process that dies this many times within ``RESTART_WINDOW_S`` is not restarted.
RESTART_LIMIT = 3
RESTART_WINDOW_S = 30.0
#: Seconds a subnet process gets to stop after SIGTERM before it is SIGKILLed.
STOP_TIMEOUT_S = 20.0
#: ``"subnet"``: one process per subnet; ``"node"``: one process per node (module docstring).
PROCESS_MODELS = ("subnet", "node")
#: The process model of a new testnet when none is asked for.
DEFAULT_PROCESS_MODEL = "node"


def canister_range(position: int) -> tuple[int, int]:
    return (position * CANISTERS_PER_SUBNET, (position + 1) * CANISTERS_PER_SUBNET - 1)


def user_key(subnet: str) -> Ed25519Identity:
    """The demo user whose tokens live on ``subnet``'s ledger."""
    return Ed25519Identity.from_seed(f"user-of-{subnet}".encode())


def write_atomically(path: Path, data: bytes, mode: int | None = None) -> None:
    """Atomically and durably replace ``path`` with ``data`` (its directory created if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    durable_files.write_atomically(path, data, mode=mode)


@dataclass(frozen=True)
class TestnetLayout(TestnetDirectory):
    """Paths inside a testnet directory: what its nodes read (``TestnetDirectory``) and what
    the launcher and its tools keep there."""

    def addresses(self, subnet: str) -> Path:
        return self.root / "addresses" / f"{subnet}.json"

    @property
    def http_dir(self) -> Path:
        return self.root / "http"

    def http(self, subnet: str) -> Path:
        """``http/<subnet>.json``: ``{node id: "127.0.0.1:port"}`` of its nodes' ingress HTTP APIs."""
        return self.http_dir / f"{subnet}.json"

    def blocks(self, subnet: str) -> Path:
        """The block log of ``subnet``: its subnet process's, or (one process per node) the
        longest of its nodes' logs — every node's log is a prefix of the one finalized chain."""
        own = self.root / "blocks" / f"{subnet}.blocks"
        nodes = self.root / "nodes"
        if own.exists() or not nodes.is_dir():
            return own
        logs = [p / "blocks.log" for p in sorted(nodes.glob(f"{subnet}-node-*")) if (p / "blocks.log").exists()]
        return max(logs, key=lambda p: p.stat().st_size, default=own)

    def status(self, subnet: str) -> Path:
        return self.root / "status" / f"{subnet}.json"

    @property
    def traffic_off(self) -> Path:
        return self.root / "control" / "traffic-off"

    def log(self, name: str) -> Path:
        """``logs/<name>.log``: the log of a subnet process, or of a node process (node model)."""
        return self.root / "logs" / f"{name}.log"

    def pid(self, name: str) -> Path:
        """``pids/<name>.pid``: the pid of the launcher (``"launcher"``), a subnet or a node process."""
        return self.root / "pids" / f"{name}.pid"

    def hold(self, node: str) -> Path:
        """``control/hold/<node>``: present, the node is not restarted when it dies."""
        return self.root / "control" / "hold" / node

    def expected_death(self, node: str) -> Path:
        """``control/expected-death/<node>``: the node's next death was asked for."""
        return self.root / "control" / "expected-death" / node

    def recording(self, subnet: str) -> Path:
        return self.root / "recordings" / f"{subnet}.bin"

    @property
    def run(self) -> Path:
        return self.root / "run"


def _genesis_state(registry, subnet: str, position: int, genesis_time: int, apps: bool) -> bytes:
    state = ReplicatedState(subnet, registry.topology(registry.latest_version))
    state.metadata.batch_time = genesis_time
    if not apps:
        return encode_state(state)
    base = canister_range(position)[0]
    holder = account_of(source_of(user_key(subnet)))
    install_canister(state, base + LEDGER, Ledger, {"balances": ((holder, INITIAL_BALANCE),)})
    install_canister(state, base + PINGER, PingPong)
    install_canister(state, base + COUNTER, Counter)
    return encode_state(state)


def create_testnet(directory: Path | str, subnets: int, nodes: int, *, seed: bytes, tick_s: float = 0.5,
                   genesis_apps: bool = True, limits: str = "DEFAULT",
                   process_model: str = DEFAULT_PROCESS_MODEL) -> TestnetLayout:
    """Write a fresh testnet directory (refuses a directory that already holds one). With
    ``genesis_apps`` every subnet starts with the example apps and the demo user's tokens
    (``replica testnet run``); without, it starts empty and canisters come by ``install_code``
    (``replica testnet up``). ``limits`` names one of ``LIMIT_PRESETS``; ``process_model``
    one of ``PROCESS_MODELS`` (module docstring)."""
    layout = TestnetLayout(Path(directory))
    if limits not in LIMIT_PRESETS:
        raise TestnetError(f"no limits preset {limits!r}; the presets are {', '.join(LIMIT_PRESETS)}")
    if process_model not in PROCESS_MODELS:
        raise TestnetError(f"no process model {process_model!r}; the models are {', '.join(PROCESS_MODELS)}")
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
        write_atomically(layout.genesis(subnet), _genesis_state(registry, subnet, position, genesis_time, genesis_apps))
    for node_id, node_secrets in secrets.items():
        write_atomically(layout.secrets(node_id), encode_node_secrets(node_secrets), mode=0o600)
    write_atomically(layout.registry, encode_registry(registry))
    layout.write_json(layout.manifest, {
        "version": 1,
        "subnets": ids,
        "nodes": nodes,
        "canister_modules": [module_name_of(cls) for cls in APPS] if genesis_apps else [],
        "genesis_apps": genesis_apps,
        "limits": limits,
        "tick_s": tick_s,
        "seed": seed.hex(),
        "process_model": process_model,
    })
    return layout


def process_model_of(manifest: dict[str, Any]) -> str:
    """The manifest's process model (``"subnet"`` for manifests from before the field)."""
    model = manifest.get("process_model", "subnet")
    if model not in PROCESS_MODELS:
        raise TestnetError(f"the manifest names process model {model!r}; the models are {', '.join(PROCESS_MODELS)}")
    return model


def testnet_nodes(layout: TestnetLayout, subnets: list[str] | None = None) -> dict[str, list[str]]:
    """``{subnet: [node id, ...]}`` in registry order (the latest version of ``registry.bin``)."""
    try:
        record = decode_registry(layout.registry.read_bytes()).latest()
    except (OSError, RegistryError) as exc:
        raise TestnetError(f"{layout.root} holds no readable registry: {exc}") from exc
    chosen = record.subnet_ids() if subnets is None else subnets
    nodes: dict[str, list[str]] = {}
    for subnet in chosen:
        members = record.subnet(subnet)
        if members is None:
            raise TestnetError(f"the registry of {layout.root} has no subnet {subnet!r}")
        nodes[subnet] = list(members.node_ids)
    return nodes


def update_registry_file(layout: TestnetLayout, change: Callable[[Registry], Registry]) -> Registry:
    """Apply ``change`` to ``registry.bin`` and write the result atomically; return it. The
    launcher (node addresses) and a migration (new versions) both rewrite the file: an
    exclusive lock on ``registry.bin.lock`` keeps one from undoing the other."""
    lock_path = layout.registry.with_name(layout.registry.name + ".lock")
    with open(lock_path, "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            registry = change(decode_registry(layout.registry.read_bytes()))
            write_atomically(layout.registry, encode_registry(registry))
            return registry
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# -- the launcher -----------------------------------------------------------------------------

def read_statuses(layout: TestnetLayout, subnets: list[str]) -> dict[str, dict]:
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
