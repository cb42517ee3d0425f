"""A run whose canister methods declare Candid types replays to the live hashes: decoding
the Candid arguments (good, ill-typed and malformed ones) and encoding the replies are
deterministic under shuffles, restarts and another hash seed (docs/architecture.md, *Candid
methods*)."""

from __future__ import annotations

import textwrap

import pytest

from replica.audit.inputs import prepare_run
from replica.audit.perturbation import parse_perturbation
from replica.audit.run_log import load_run_log, write_run_log
from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment
from replica.ic import candid
from replica.inprocess.simulation import GENESIS_TIME_NS, Simulation
from replica.sdk import decode_payload, encode_value
from replica.testnet.recording import run_log_from_simulation
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress

A = "subnet-a"
USER = b"\x05" * 29 + b"\x02"

SOURCE = textwrap.dedent('''
    from replica.sdk import Canister, update, query

    class Tally(Canister):
        CANDID_TYPES = "type Vote = record { who : text; weight : opt nat; tags : vec text };"

        @update(candid="(Vote) -> (record { total : nat; voters : nat })")
        def vote(self, vote):
            total = self.stable.get("total", 0) + (1 if vote["weight"] is None else vote["weight"])
            voters = self.stable.get("voters", 0) + 1
            self.stable["total"] = total
            self.stable["voters"] = voters
            return {"total": total, "voters": voters}

        @query(candid="() -> (nat)")
        def total(self):
            return self.stable.get("total", 0)
''')

VOTE = candid.types("(record { who : text; weight : opt nat; tags : vec text })")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    sim = Simulation({A: (0, 99)}, ExecutionEnvironment([]), seed=6)
    sent = []

    def submit(receiver: int, method: str, payload: bytes) -> bytes:
        mid = (len(sent) + 1).to_bytes(32, "big")
        sim.submit(Ingress(USER, receiver, method, payload, mid, GENESIS_TIME_NS + (sim.tick_count + 60) * 10**9), A)
        sent.append(mid)
        return mid

    def answer(mid: bytes):
        for _ in range(30):
            status = sim.state_of(A).ingress_history.get(mid)
            if status is not None and status.state in (IngressState.REPLIED, IngressState.REJECTED):
                return status
            sim.tick()
        raise AssertionError("no answer")

    created = decode_payload(answer(submit(MANAGEMENT_CANISTER_ID, "create_canister", encode_value(None))).reply)
    cid = created["canister_id"]
    install = {"canister_id": cid, "mode": "install", "source": SOURCE, "class_name": "Tally", "arg": None}
    assert answer(submit(MANAGEMENT_CANISTER_ID, "install_code", encode_value(install))).state is IngressState.REPLIED
    payloads = [VOTE.encode([{"who": f"v{i}", "weight": i if i % 2 else None, "tags": ["a"] * i}]) for i in range(6)]
    payloads += [b"DIDL\x00\x01\x7d\x05", b"DIDL\x01\x6d\x7f\x01\x00\x80\x94\xeb\xdc\x03", encode_value("msgpack")]
    mids = []
    for payload in payloads:
        mids.append(submit(cid, "vote", payload))
        sim.tick()
    states = [answer(mid).state for mid in mids]
    assert states == [IngressState.REPLIED] * 6 + [IngressState.REJECTED] * 3
    sim.run_until_quiescent(max_ticks=50)
    directory = tmp_path_factory.mktemp("candid-run")
    write_run_log(run_log_from_simulation(sim, checkpoint_interval=3), directory)
    return directory


@pytest.mark.parametrize("perturbation", ["none", "shuffle:3", "checkpoint@6+restart@7+shuffle:5", "hashseed:9"])
def test_candid_methods_replay_to_the_live_hashes(run_dir, perturbation):
    run = prepare_run(load_run_log(run_dir))
    replayed = {s.height: (s.full_hash, s.certified_root) for s in run.replay(A, parse_perturbation(perturbation))}
    live = {h: (f, c) for h, f, c in run.subnet(A).hashes}
    assert len(live) >= 10
    assert {h: replayed.get(h) for h in live if h >= min(replayed)} == {h: live[h] for h in live if h >= min(replayed)}
    assert max(replayed) == max(live)
