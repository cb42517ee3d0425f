"""Following ``registry.bin`` and waiting for every node to run a new registry version.

* ``RegistryFile``: a changed file is taken; an unreadable, malformed or older one is refused
  with its reason logged (once, not every tick) and kept for the status file, and read again
  once it is good; ``knows`` reads at once a version the holder lacks.
* ``migrate_canister``'s registry steps: a node that does not run the new version within
  ``ADOPTION_ROUNDS`` heights of its subnet fails the step with an error naming it and what it
  reported; a wait that times out names the nodes still behind.
* ``node_registry_statuses`` reads the nodes' status files, a missing one included.
* A node process given a finalized block of a registry version it cannot read yet neither
  stores nor executes it (nor the block after it); once the file holds the version it
  executes both, at that version.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any, Callable

import pytest

from consensus_stub.agreement.interface import Finalized
from consensus_stub.block import Block, block_hash
from consensus_stub.genesis import SubnetSpec, genesis_registry
from consensus_stub.registry import Registry, encode_registry
from replica.node.process_config import NodeProcessConfig
from replica.testnet import launcher as tn
from replica.node.process import NodeProcess
from replica.testnet.migration import ADOPTION_ROUNDS, MigrationError, migrate_canister
from replica.node.registry_file import RegistryFile
from replica.testnet.registry_status import NodeRegistryStatus, node_registry_statuses
from state_manager.routing_table import CanisterIdRange
from state_manager.streams import StreamHeader

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return genesis_registry([SubnetSpec("a", 1, ((0, 99),)), SubnetSpec("b", 1, ((100, 199),))], b"\x07" * 32,
                            not_before=NOW)[0]


def _next(registry: Registry) -> Registry:
    moving = CanisterIdRange(registry.latest_version, registry.latest_version)   # a new one each time
    return registry.with_next_version(
        canister_migrations=registry.latest().canister_migrations.with_trace(moving, ("a", "b")))


def test_a_changed_registry_file_is_taken_and_a_bad_one_is_refused_with_its_reason_logged(tmp_path, registry, caplog):
    path = tmp_path / "registry.bin"
    path.write_bytes(encode_registry(registry))
    follower = RegistryFile(path, "a-node-1")
    assert follower.poll() is False and follower.registry.latest_version == 1
    newer = _next(registry)
    tn.write_atomically(path, encode_registry(newer))
    assert follower.poll() is True and follower.registry.latest_version == 2 and follower.error is None

    caplog.set_level(logging.WARNING, logger="replica.node.registry_file")
    tn.write_atomically(path, b"not a registry")
    assert follower.poll() is False and follower.poll() is False   # tried again, logged once
    assert follower.registry.latest_version == 2 and "is not a registry" in follower.error
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "a-node-1: registry re-read failed" in warnings[0] and "retrying" in warnings[0]

    tn.write_atomically(path, encode_registry(registry))           # older than what it read: kept
    assert follower.poll() is False and follower.registry.latest_version == 2
    assert "older than version 2" in follower.error
    path.unlink()
    assert follower.poll() is False and "cannot read" in follower.error
    tn.write_atomically(path, encode_registry(_next(newer)))
    assert follower.poll() is True and follower.registry.latest_version == 3 and follower.error is None
    assert len(caplog.records) == 3


def test_knows_reads_the_file_at_once_for_a_version_it_lacks(tmp_path, registry):
    path = tmp_path / "registry.bin"
    path.write_bytes(encode_registry(registry))
    follower = RegistryFile(path, "a-node-1")
    assert follower.knows(1) and not follower.knows(2)
    tn.write_atomically(path, encode_registry(_next(registry)))
    assert follower.knows(2) and follower.registry.latest_version == 2


class _FakeTestnet:
    """A migration driver whose node ``b-2`` never runs a new version; each look at the nodes
    lets the subnets make ``per_look`` heights."""

    def __init__(self, registry: Registry, per_look: int) -> None:
        self.registry, self.per_look, self.looks = registry, per_look, 0

    def manage(self, subnet: str, method: str, arg: Any) -> Any:
        return {"status": "stopped"} if method == "canister_status" else None

    def publish(self, change: Callable[[Registry], Registry]) -> Registry:
        self.registry = change(self.registry)
        return self.registry

    def node_registry_statuses(self, subnets: tuple[str, ...]) -> list[NodeRegistryStatus]:
        self.looks += 1
        height = 10 + self.looks * self.per_look
        latest = self.registry.latest_version
        return [NodeRegistryStatus("a-1", "a", height, latest), NodeRegistryStatus("b-1", "b", height, latest),
                NodeRegistryStatus("b-2", "b", 10, 1, finalized_height=height, registry_read=1,
                                   awaiting=(11, latest), age_s=0.2)]

    def height(self, subnet: str) -> int:
        return 10

    def stream_header(self, here: str, there: str) -> StreamHeader:
        return StreamHeader(0, 0, 0)

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        for _ in range(50):
            if condition():
                return
        raise MigrationError(f"{what}: not done after {timeout_s:.0f} s")


def test_a_node_that_does_not_run_a_new_version_within_the_bound_fails_the_step_by_name(registry):
    driver = _FakeTestnet(registry, per_look=3)
    with pytest.raises(MigrationError) as failed:
        migrate_canister(driver, 5, "b", timeout_s=30)
    message = str(failed.value)
    assert message.startswith(f"migration trace (registry version 2): not run within {ADOPTION_ROUNDS} rounds by b-2 ")
    assert "runs registry version 1 at height 10" in message
    assert "its finalized height 11 waits for registry version 2, which it has not read" in message
    assert "a-1" not in message and "b-1 " not in message
    assert driver.looks == ADOPTION_ROUNDS // 3 + 2   # failed at the first look past the bound


def test_a_wait_that_times_out_names_the_nodes_still_behind(registry):
    driver = _FakeTestnet(registry, per_look=0)   # the subnets stall: only the timeout ends the wait
    with pytest.raises(MigrationError) as failed:
        migrate_canister(driver, 5, "b", timeout_s=30)
    assert str(failed.value).startswith("migration trace (registry version 2): not done after 30 s; not run by b-2 (")


def test_status_files_say_which_version_each_node_runs(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 1, 2, seed=b"\x01" * 32, genesis_apps=False, process_model="node")
    running = layout.node_files("subnet-0-node-1")
    running.root.mkdir(parents=True)
    running.status.write_text(json.dumps({"height": 7, "registry_version": 3, "finalized_height": 9,
                                          "registry_read": 3, "registry_error": None, "awaiting_registry": [8, 4]}))
    first, second = node_registry_statuses(layout, ["subnet-0"])
    assert (first.node, first.height, first.registry_version, first.awaiting) == ("subnet-0-node-1", 7, 3, (8, 4))
    assert "finalized height 9 but executed 7" in first.lag(4)
    assert second.node == "subnet-0-node-2" and "no status file" in second.lag(4)


def test_a_node_executes_a_finalized_block_of_an_unread_registry_version_only_once_it_has_read_it(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 1, 1, seed=b"\x02" * 32, genesis_apps=False, process_model="node")
    config = NodeProcessConfig(str(layout.root), "subnet-0-node-1", "subnet-0", tick_s=0.1)
    process = NodeProcess(config)   # not started: its node's callbacks are driven by hand
    node = process.node
    try:
        published = tn.update_registry_file(layout, lambda r: r.with_next_version())   # version 2 ...
        good = layout.registry.read_bytes()
        tn.write_atomically(layout.registry, b"torn")             # ... then unreadable for a while
        start = node.state.metadata.batch_time
        first = Block(1, node.block_store.tip_hash, start + 1, 2, (), (), "subnet-0-node-1")
        second = Block(2, block_hash(first), start + 2, 2, (), (), "subnet-0-node-1")
        node.on_finalized(Finalized(first, block_hash(first)))
        node.on_finalized(Finalized(second, block_hash(second)))
        assert (node.block_store.height, node.height, node.awaiting_registry) == (0, 0, (1, 2))
        assert "is not a registry" in process.registry_file.error

        tn.write_atomically(layout.registry, good)
        for block in (first, second):   # what the agreement's finalized chain hands back
            assert node.apply(block, block_hash(block)) is True
        assert (node.block_store.height, node.height, node.awaiting_registry) == (2, 2, None)
        assert node.state.metadata.network_topology.registry_version == published.latest_version == 2
        assert process.registry_file.error is None
    finally:
        process.stop()
