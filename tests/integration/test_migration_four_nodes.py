"""A canister with stable state moves between subnets of four node processes each, under load.

What ``benchmarks/migration.py`` does, at a size CI affords: ``replica testnet up`` with 2
subnets x 4 nodes (200 ms rounds); a load canister holding 256 KiB of stable state is moved
to the other subnet and back while ``replica load`` relays calls to and from it.

One node of each subnet checks ``registry.bin`` only once an hour (``registry_poll_s``):
with four nodes its three peers notarize and finalize a block of a new registry version
without its vote, so the block reaches it as finalized whatever it has read. It must read
the version then and execute the block (a node that could not execute it stopped executing
for good, and the migration waited for it). Afterwards: every node of both subnets runs
the last registry version and has executed the latest heights, the canister kept its
state, and no call was lost or duplicated.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import os
import threading

import pytest

from replica.client.management import install_many
from replica.node.process_config import NodeProcessConfig
from replica.testnet import launcher as tn
from replica.load import load_canister
from replica.testnet.http_endpoints import agent_for_testnet
from replica.processes.lifecycle import down, running_launcher, up
from replica.load.load import LoadOptions, run_load
from replica.testnet.migration import AgentDriver, migrate_canister
from replica.testnet.registry_status import node_registry_statuses

pytestmark = pytest.mark.timeout(240)

ROUND_S = 0.2
SUBNETS = ["subnet-0", "subnet-1"]
#: The node of each subnet that reads registry.bin once an hour (the first of subnet-1 is
#: also the one the agent asks first there).
RARE_READERS = ["subnet-0-node-3", "subnet-1-node-1"]
CHUNK = 64 * 1024
CHUNKS = 4   # 256 KiB of stable state

BALLAST = inspect.getsource(load_canister) + '''

class BallastLoadCanister(LoadCanister):
    @update
    def ballast(self, arg):
        start = self.stable.get("ballast_chunks", 0)
        for k in range(start, start + arg["count"]):
            self.stable[f"ballast/{k}"] = bytes([k % 256]) * arg["chunk"]
        self.stable["ballast_chunks"] = start + arg["count"]
        return start + arg["count"]

    @query
    def ballast_digest(self, arg):
        chunks = self.stable.get("ballast_chunks", 0)
        return [chunks, sum(len(self.stable[f"ballast/{k}"]) for k in range(chunks))]
'''


def _rare_reader_configs(layout: tn.TestnetLayout) -> None:
    """The launcher keeps a node's config when one exists: these read the registry rarely."""
    for node in RARE_READERS:
        config = NodeProcessConfig(testnet_dir=str(layout.root.resolve()), node_id=node, subnet_id=node[:8],
                                   tick_s=ROUND_S, block_interval_s=ROUND_S, round_timeout_s=1.0,
                                   registry_poll_s=3600.0)
        files = layout.node_files(node)
        files.root.mkdir(parents=True, exist_ok=True)
        tn.write_atomically(files.config, config.to_json().encode())


def test_a_canister_with_stable_state_moves_between_four_node_subnets_under_load(tmp_path):
    directory = tmp_path / "net"
    layout = tn.create_testnet(directory, 2, 4, seed=hashlib.sha256(b"four-node-migration").digest(), tick_s=ROUND_S,
                               genesis_apps=False, process_model="node")
    _rare_reader_configs(layout)
    try:
        up(directory, round_ms=int(ROUND_S * 1000), out=io.StringIO())
        with agent_for_testnet(directory, tn.user_key("subnet-0")) as agent:
            ids = install_many(agent, [(s, BALLAST, "BallastLoadCanister", None) for s in SUBNETS for _ in range(2)])
            canisters = {"subnet-0": ids[:2], "subnet-1": ids[2:]}
            moving = ids[0]
            for _ in range(CHUNKS):
                agent.update_call(moving, "ballast", {"chunk": CHUNK, "count": 1}, 60)
            moved = threading.Event()
            outcome = {}

            def traffic() -> None:
                outcome["load"] = run_load(agent, SUBNETS, LoadOptions(rate=15, duration_s=600, drain_s=60, seed=11),
                                           canisters=canisters, stop=moved)

            loader = threading.Thread(target=traffic, name="load")
            loader.start()
            try:
                driver = AgentDriver.for_testnet(agent, directory)
                reports = [migrate_canister(driver, moving, destination, timeout_s=60)
                           for destination in ("subnet-1", "subnet-0")]
            finally:
                moved.set()
                loader.join()
            load = outcome["load"]
            kept = agent.query_call(moving, "ballast_digest")
            latest = driver.registry.latest_version
            nodes = node_registry_statuses(layout, SUBNETS)
    finally:
        down(directory, out=io.StringIO())
        pid = running_launcher(layout)
        if pid is not None:
            os.kill(pid, 9)

    assert [r.destination for r in reports] == ["subnet-1", "subnet-0"]
    assert all(r.snapshot_bytes > CHUNKS * CHUNK for r in reports), [r.snapshot_bytes for r in reports]
    assert all(r.rounds <= 40 for r in reports), [r.rounds for r in reports]
    assert tuple(kept) == (CHUNKS, CHUNKS * CHUNK)
    assert load.lost == 0 and load.duplicated == 0, load.as_json()
    assert load.canister_totals["violations"] == 0
    assert load.replied > 0 and load.submitted == load.replied + sum(load.rejected.values())
    # every node (the rare readers too) runs the last version and executes what its subnet finalized
    assert latest == reports[-1].registry_versions[-1]
    assert {n.node: n.registry_version for n in nodes} == {n.node: latest for n in nodes}
    assert all(n.awaiting is None and n.registry_error is None for n in nodes), nodes
    for subnet in SUBNETS:
        heights = [n.height for n in nodes if n.subnet == subnet]
        assert max(heights) - min(heights) <= 5, (subnet, nodes)
