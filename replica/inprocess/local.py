"""Several subnets in one process, talking XNet over real gRPC on 127.0.0.1 (shell).

``LocalTestnet`` deals the genesis registry (threshold keys, node TLS identities), builds
each subnet's genesis state (``setup(subnet_id, state)`` installs canisters), starts every
node's XNet endpoint on an ephemeral loopback port, publishes the bound addresses in the
registry, and starts every node's slice refresher; with ``http_api=True`` also every node's
ingress HTTP API (``http_endpoints``: ``{subnet: {node id: address}}``). With ``block_log_dir`` every subnet
keeps its finalized blocks in ``<dir>/<subnet>.blocks``; a testnet built again on the same
directory, seed, setup and ``genesis_time`` re-executes them and continues where it stopped. ``step()`` makes one height on every
subnet in turn; ``run_until(predicate)`` steps until the predicate holds or a deadline
passes. ``stop()`` (or the context manager) ends every thread, channel and server.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

from consensus_stub.genesis import NodeSecrets, SubnetSpec, genesis_registry
from consensus_stub.registry import Registry
from message_routing.executor import Executor
from message_routing.limits import Limits
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import encode_state

from replica.node.replica_node import NodeConfig, RegistryHolder
from replica.progress import Progress
from replica.inprocess.http_apis import SubnetHttpApis, in_process_delegation
from replica.client.subnet_ids import root_subnet_id
from replica.inprocess.subnet import NodeHooks, Subnet

__all__ = ["LocalTestnet", "GenesisSetup"]

GenesisSetup = Callable[[str, ReplicatedState], None]


class LocalTestnet:
    def __init__(
        self,
        specs: Iterable[SubnetSpec],
        environment: Executor,
        limits: Limits,
        *,
        seed: bytes,
        setup: GenesisSetup | None = None,
        config: NodeConfig = NodeConfig(),
        hooks: Mapping[str, NodeHooks] | None = None,
        clock: Callable[[], int] = time.time_ns,
        genesis_time: int | None = None,
        block_log_dir: Path | str | None = None,
        http_api: bool = False,
    ) -> None:
        specs = list(specs)
        # TLS checks certificates against the wall clock: make them valid from a little while ago.
        not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
        registry, secrets = genesis_registry(specs, seed, not_before=not_before)
        self.secrets: dict[str, NodeSecrets] = secrets
        self.registry = RegistryHolder(registry)
        self.environment = environment
        self.limits = limits
        hooks = dict(hooks or {})
        genesis_time = clock() if genesis_time is None else genesis_time
        self.subnets: dict[str, Subnet] = {}
        for spec in sorted(specs, key=lambda s: s.subnet_id):
            state = ReplicatedState(spec.subnet_id, registry.topology(registry.latest_version))
            state.metadata.batch_time = genesis_time
            if setup is not None:
                setup(spec.subnet_id, state)
            subnet_hooks = {n: h for n, h in hooks.items() if secrets.get(n) and secrets[n].subnet_id == spec.subnet_id}
            self.subnets[spec.subnet_id] = Subnet(
                spec.subnet_id, self.registry, [s for s in secrets.values() if s.subnet_id == spec.subnet_id],
                encode_state(state), environment, limits, config=config, clock=clock, hooks=subnet_hooks,
                block_log=None if block_log_dir is None else Path(block_log_dir) / f"{spec.subnet_id}.blocks")
        unknown = sorted(set(hooks) - set(secrets))
        if unknown:
            raise ValueError(f"hooks for unknown nodes {unknown}")
        self._started = False
        self._http_api = http_api
        self._http_apis: list[SubnetHttpApis] = []
        #: ``{subnet: {node id: "127.0.0.1:port"}}`` of the ingress HTTP APIs (``http_api=True``).
        self.http_endpoints: dict[str, dict[str, str]] = {}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> "LocalTestnet":
        """Bind every endpoint, publish the addresses, start fetching."""
        self._started = True
        try:
            addresses: dict[str, str] = {}
            for subnet in self.subnets.values():
                addresses.update(subnet.start_servers())
            self.registry.set(self.registry.get().with_node_addresses(addresses))
            for subnet_id, subnet in self.subnets.items():
                subnet.start_fetching()
                if self._http_api:
                    root = self.subnets[root_subnet_id(self.registry.get().latest())]
                    apis = SubnetHttpApis(subnet, delegation=in_process_delegation(root, subnet))
                    self._http_apis.append(apis)
                    self.http_endpoints[subnet_id] = apis.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        apis, self._http_apis = self._http_apis, []
        for api in apis:
            api.stop()
        for subnet in self.subnets.values():
            subnet.stop_fetching()
        for subnet in self.subnets.values():
            subnet.stop()

    def __enter__(self) -> "LocalTestnet":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def current_registry(self) -> Registry:
        return self.registry.get()

    def run_log(self, *, checkpoint_interval: int = 10):
        """Every subnet's recording so far as the audit's ``RunLog`` (``replica audit``)."""
        from replica.testnet.recording import run_log_from_recordings

        registry = self.registry.get()
        classes = [self.environment.registry.class_of(name) for name in self.environment.registry.names()]
        return run_log_from_recordings(
            [subnet.recording for subnet in self.subnets.values()], classes, self.limits,
            [record.topology() for record in registry.records], checkpoint_interval=checkpoint_interval)

    # -- driving --------------------------------------------------------------------------

    def step(self) -> None:
        """One height on every subnet, in subnet order."""
        for subnet in self.subnets.values():
            subnet.step()

    def run_until(
        self,
        predicate: Callable[[], bool],
        *,
        timeout_s: float,
        pause_s: float = 0.02,
        min_heights: int = 0,
        status: Progress | None = None,
    ) -> int:
        """Step every subnet (pausing ``pause_s`` between rounds so slices can travel) until
        ``predicate()`` holds after at least ``min_heights`` rounds; return the rounds made.
        ``TimeoutError`` when ``timeout_s`` passes first."""
        deadline = time.monotonic() + timeout_s
        rounds = 0
        while True:
            self.step()
            rounds += 1
            if status is not None:
                status.update(f"heights {', '.join(f'{s}={n.height}' for s, n in self.subnets.items())}", done=rounds)
            if rounds >= min_heights and predicate():
                return rounds
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not reached after {rounds} rounds ({timeout_s} s)")
            time.sleep(pause_s)
