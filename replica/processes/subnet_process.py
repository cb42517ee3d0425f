"""One subnet of a local testnet, as its own process: ``python -m replica.processes.subnet_process DIR SUBNET``.

Reads the testnet directory (``replica.testnet.launcher``), builds the subnet's nodes from the
registry, their secrets and the genesis state, re-executes its block log, binds every
node's XNet endpoint on 127.0.0.1 and publishes the addresses (``addresses/<subnet>.json``),
then every node's ingress HTTP API (``http/<subnet>.json``); once the launcher has put
every subnet's addresses into the registry it starts fetching, then makes one height per
tick until SIGTERM / SIGINT. Each tick it may submit demo traffic (signed pings, transfers
and counter increments from the subnet's user) and writes its status file; when it stops
it writes its recording (genesis, batches, live hashes) for the run log.
A block log it must not start on (corrupt, or behind its finalized height: see
``consensus_stub.block_store``) is logged and makes it exit with ``EXIT_REFUSED`` (3), which
the launcher does not restart.

Each tick it also re-reads ``registry.bin`` if the file changed
(``replica.node.registry_file``: a failed read is logged and retried): the launcher
rewrites it with the new addresses of a subnet process it restarted, and the peers fetch
from those; a migration publishes new versions. Its nodes run in this one process, so they
take a new version together, before the next height. The status file says the registry
version of the latest batch, the newest version read and why the last read failed.
Started by the launcher (``LAUNCHER_PID_ENV`` set), it stops when the launcher dies
(``PR_SET_PDEATHSIG`` on Linux, and a parent-pid check every tick elsewhere).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from consensus_stub.block_store import BlockStoreError
from consensus_stub.genesis import decode_node_secrets
from consensus_stub.registry import Registry, RegistryRecord
from replica.execution import ExecutionEnvironment
from replica.node.batch_processor import canister_classes
from replica.node.delegation import DelegationFetcher
from replica.client.subnet_ids import root_subnet_id, subnet_principal_of
from replica.node.replica_node import NodeConfig
from replica.testnet.demo_traffic import DemoTraffic, subnet_status
from replica.testnet.recording import encode_recording
from replica.node.registry_file import RegistryFile
from replica.inprocess.http_apis import SubnetHttpApis
from replica.inprocess.subnet import Subnet
from replica.testnet.launcher import (
    EXIT_REFUSED, LAUNCHER_PID_ENV, LIMIT_PRESETS, TestnetError, TestnetLayout, has_genesis_apps,
)
from state_manager.durable_files import write_atomically

__all__ = ["main"]

_log = logging.getLogger("replica.processes.subnet_process")


def _published(registry: Registry, addresses: dict[str, str]) -> bool:
    """The registry lists our freshly bound addresses (and every other node has one)."""
    record = registry.latest()
    if any(n.xnet_address.endswith(":0") for n in record.nodes):
        return False
    return all(record.node(node).xnet_address == address for node, address in addresses.items())


class _Launcher:
    """The launcher that started us (if any): ``gone`` once it died."""

    def __init__(self) -> None:
        value = os.environ.get(LAUNCHER_PID_ENV, "")
        self.pid = int(value) if value.isdigit() else None
        if self.pid is not None and sys.platform.startswith("linux"):
            try:  # SIGTERM us when the launcher dies (its SIGTERM handler stops us cleanly)
                import ctypes
                pr_set_pdeathsig = 1
                ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
            except (OSError, AttributeError):
                pass

    @property
    def gone(self) -> bool:
        return self.pid is not None and os.getppid() != self.pid


def _write_recording(layout: TestnetLayout, sub: Subnet) -> None:
    path = layout.recording(sub.subnet_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, encode_recording(sub.recording))


def _delegation_fetcher(record: RegistryRecord, subnet: str, layout: TestnetLayout) -> DelegationFetcher | None:
    """The root subnet's delegation to ``subnet``, asked of the root subnet's process over
    HTTP at the addresses it publishes (``replica.node.delegation``); none for the root subnet."""
    root = root_subnet_id(record)
    if root == subnet:
        return None

    def endpoints() -> list[str]:
        try:
            return sorted(json.loads(layout.http(root).read_text()).values())
        except (OSError, ValueError, AttributeError):
            return []   # the root subnet's process has not published its addresses yet

    fetcher = DelegationFetcher(subnet_principal_of(record, subnet), subnet_principal_of(record, root),
                                record.subnets[0].public_key, endpoints)
    fetcher.start()
    return fetcher


def run(root: Path, subnet: str) -> int:
    layout = TestnetLayout(root)
    manifest = layout.read_manifest()
    subnets = list(manifest["subnets"])
    if subnet not in subnets:
        raise TestnetError(f"{subnet!r} is not a subnet of this testnet")
    tick_s = float(manifest["tick_s"])
    registry_file = RegistryFile(layout.registry, subnet)
    holder = registry_file.holder
    record = holder.get().latest().subnet(subnet)
    secrets = [decode_node_secrets(layout.secrets(node).read_bytes()) for node in record.node_ids]
    environment = ExecutionEnvironment(canister_classes(manifest["canister_modules"]))
    config = NodeConfig(refresh_interval_s=min(0.5, max(0.02, tick_s / 2)), fetch_timeout_s=2.0)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    launcher = _Launcher()
    if launcher.gone:
        _log.warning("%s: the launcher (pid %d) is gone; not starting", subnet, launcher.pid)
        return 0

    _log.info("%s: re-executing the block log", subnet)
    try:
        sub = Subnet(subnet, holder, secrets, layout.genesis(subnet).read_bytes(), environment,
                     LIMIT_PRESETS[manifest["limits"]], config=config, block_log=layout.blocks(subnet))
    except BlockStoreError as exc:
        # A corrupt block log, or one behind its finalized height: starting would re-make
        # finalized heights, and so would a restart; the launcher does not restart on this code.
        _log.error("%s refused to start: %s (exit code %d: do not restart)", subnet, exc, EXIT_REFUSED)
        return EXIT_REFUSED
    http_apis: SubnetHttpApis | None = None
    fetcher: DelegationFetcher | None = None
    try:
        addresses = sub.start_servers()
        layout.write_json(layout.addresses(subnet), addresses)
        fetcher = _delegation_fetcher(holder.get().latest(), subnet, layout)
        http_apis = SubnetHttpApis(sub, delegation=(lambda certified: None) if fetcher is None else fetcher.current,
                                   operators=frozenset({layout.operator(manifest).principal.raw}))
        layout.write_json(layout.http(subnet), http_apis.start())
        _log.info("%s: height %d, endpoints %s, ingress HTTP APIs %s", subnet, sub.height, addresses,
                  {node: server.address for node, server in http_apis.servers.items()})
        while not stop.is_set() and not launcher.gone:
            registry_file.poll()
            if _published(holder.get(), addresses):
                break
            stop.wait(0.05)
        sub.start_fetching()
        apps = has_genesis_apps(manifest)
        traffic = DemoTraffic(subnet, subnets) if apps else None
        position = subnets.index(subnet)
        while not stop.wait(tick_s):
            if launcher.gone:
                _log.warning("%s: the launcher (pid %d) is gone; stopping", subnet, launcher.pid)
                break
            if registry_file.poll():
                _log.info("%s: re-read the registry (version %d)", subnet, holder.get().latest_version)
            if traffic is not None and not layout.traffic_off.exists():
                traffic.tick(sub)
            sub.step()
            status = subnet_status(sub, position, apps)
            status["registry_read"], status["registry_error"] = holder.get().latest_version, registry_file.error
            layout.write_json(layout.status(subnet), status)
    finally:
        if fetcher is not None:
            fetcher.stop()
        if http_apis is not None:
            http_apis.stop()
            layout.http(subnet).unlink(missing_ok=True)  # nothing serves there any more
        sub.stop()
        _write_recording(layout, sub)
    _log.info("%s: stopped at height %d", subnet, sub.height)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m replica.processes.subnet_process DIR SUBNET", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(Path(args[0]), args[1])


if __name__ == "__main__":
    sys.exit(main())
