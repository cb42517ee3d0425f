"""``raw_rand`` (issue 24): canisters call the management canister and get 32 bytes of the
round's random tape, different for every call, the same on every replica."""

from __future__ import annotations

import hashlib
import textwrap

from message_routing.batch import Batch
from message_routing.limits import DEFAULT
from message_routing.state_machine import execute_round
from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment, install_canister
from replica.execution.management_requests import raw_rand_bytes
from replica.sdk import Canister, callback, update
from state_manager.encoding import decode
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress, RejectCode
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import build_state_trees
from tests.builders import topology

from .harness import USER, message_id, new_state
from .harness import encode as encode_value

MGMT = MANAGEMENT_CANISTER_ID


class Drawer(Canister):
    """``draw(n)`` asks ``raw_rand`` n times (bounded-wait with ``timeout``); ``ask(method,
    arg)`` calls any management method; the answers land in ``self.stable``."""

    @update
    def draw(self, arg):
        n, timeout = arg
        for k in range(n):
            self.call(MGMT, "raw_rand", None, on_reply=self.got, on_reject=self.refused, context=k, timeout_s=timeout)
        return n

    @update
    def ask(self, arg):
        method, value = arg
        self.call(MGMT, method, value, on_reply=self.got, on_reject=self.refused, context=0)

    @callback
    def got(self, value, context):
        self.stable["got"] = self.stable.get("got", ()) + ((context, value),)

    @callback
    def refused(self, reject, context):
        self.stable["refused"] = self.stable.get("refused", ()) + (reject,)


def _tape(height: int, seed: bytes = b"") -> bytes:
    return hashlib.sha256(b"tape" + seed + height.to_bytes(8, "big")).digest()


class Subnet:
    """One subnet's state through the whole state machine, with a chosen random tape per height."""

    def __init__(self, canisters=(1, 2), seed: bytes = b"") -> None:
        self.state = new_state()
        self.topology = topology()
        self.env = ExecutionEnvironment([Drawer])
        self.seed = seed
        self.pending: list[Ingress] = []
        self.n = 0
        for cid in canisters:
            install_canister(self.state, cid, Drawer)

    def submit(self, receiver: int, method: str, arg=None) -> bytes:
        self.n += 1
        expiry = self.state.metadata.batch_time + 60 * 10**9
        ingress = Ingress(USER, receiver, method, encode_value(arg), message_id(self.n), expiry)
        self.pending.append(ingress)
        return ingress.message_id

    def round(self) -> None:
        height = self.state.metadata.batch_number + 1
        batch = Batch(height, self.state.metadata.batch_time + 10**9, 1, _tape(height, self.seed),
                      tuple(self.pending))
        self.pending = []
        self.state = execute_round(self.state, batch, self.topology, self.env, DEFAULT)

    def stable(self, cid: int, key: str):
        return self.state.canisters[cid].stable.get(key, ())


def test_raw_rand_gives_32_bytes_per_call_from_the_tape_of_the_round_the_call_was_made_in():
    net = Subnet()
    net.submit(1, "draw", (3, None))
    net.submit(2, "draw", (2, None))
    net.round()                        # both draw; their requests are answered as the round ends
    assert not net.state.streams       # they never entered a stream
    net.round()                        # the callbacks run
    got = {cid: dict(net.stable(cid, "got")) for cid in (1, 2)}
    values = [got[1][k] for k in range(3)] + [got[2][k] for k in range(2)]
    assert all(type(v) is bytes and len(v) == 32 for v in values)
    assert len(set(values)) == 5       # every call its own bytes
    # canisters in id order, each one's calls in order: a counter over the round's tape
    assert values == [raw_rand_bytes(_tape(1), n) for n in range(5)]
    net.submit(1, "draw", (1, None))
    net.round()
    net.round()
    assert dict(net.stable(1, "got"))[0] == raw_rand_bytes(_tape(3), 0)   # a later round: its own tape
    assert all(not c.queues.message_count() and not c.callbacks for c in net.state.canisters.values())


def test_every_replica_draws_the_same_bytes_and_another_tape_draws_others():
    def run(seed: bytes) -> tuple:
        net = Subnet(seed=seed)
        for cid in (1, 2):
            net.submit(cid, "draw", (2, None))
        net.round()
        net.round()
        return net.stable(1, "got") + net.stable(2, "got"), build_state_trees(net.state).full_hash

    first = run(b"")
    assert run(b"") == first
    other = run(b"other")
    assert not set(other[0]) & set(first[0]) and other[1] != first[1]


def test_a_bounded_wait_raw_rand_is_answered_too():
    net = Subnet()
    net.submit(1, "draw", (1, 30))
    net.round()
    response = net.state.canisters[1].queues.input_queues[MGMT].elements[0]
    assert response.deadline and decode(response.response_payload.data) == raw_rand_bytes(_tape(1), 0)
    restored = decode_state(encode_state(net.state))      # a checkpoint between answer and callback
    assert build_state_trees(restored).full_hash == build_state_trees(net.state).full_hash
    net.round()
    assert net.stable(1, "got") == ((0, raw_rand_bytes(_tape(1), 0)),)


def test_other_management_calls_from_canisters_and_raw_rand_from_users_are_rejected():
    net = Subnet()
    net.submit(1, "ask", ("raw_rand", {"n": 1}))
    net.submit(2, "ask", ("create_canister", None))
    user = net.submit(MGMT, "raw_rand")
    net.round()
    net.round()
    assert net.stable(1, "refused") == ((int(RejectCode.CANISTER_ERROR), "raw_rand takes no argument"),)
    (code, text), = net.stable(2, "refused")
    assert code == RejectCode.CANISTER_ERROR and "only raw_rand" in text and "create_canister" in text
    answer = net.state.ingress_history.get(user)
    assert answer.state is IngressState.REJECTED and "only by canisters" in answer.reject_message
    # the rejected calls used no randomness: the next draw is the round's first
    net.submit(1, "draw", (1, None))
    net.round()
    net.round()
    assert dict(net.stable(1, "got"))[0] == raw_rand_bytes(_tape(3), 0)
