"""Driving the execution environment directly on hand-built states (no state machine)."""

from __future__ import annotations

from message_routing.batch import Batch
from message_routing.limits import DEFAULT, Limits
from message_routing.state_machine import execute_round
from message_routing.valid_set_rule import induct_ingress
from replica.execution import ExecutionEnvironment
from replica.sdk import encode_value as encode
from state_manager.encoding import decode
from state_manager.ingress_history import IngressStatus
from state_manager.messages import Ingress, Reject, RejectCode, Reply, Request, Response
from state_manager.replicated_state import ReplicatedState
from tests.builders import A, topology

USER = b"\x07" * 29 + b"\x02"
EXPIRY = 50 * 10**9
REMOTE = 100  # a canister on subnet B (the routing table of tests.builders)


def new_state(subnet: str = A) -> ReplicatedState:
    s = ReplicatedState(subnet, topology())
    s.metadata.batch_time = 10**9
    return s


def run(env: ExecutionEnvironment, state: ReplicatedState, limits: Limits = DEFAULT) -> ReplicatedState:
    return env.execute_round(state, bytes(32), limits)


def message_id(n: int) -> bytes:
    return n.to_bytes(32, "big")


def submit(state: ReplicatedState, receiver: int, method: str, arg=None, *, n: int = 0,
           source: bytes = USER, limits: Limits = DEFAULT) -> bytes:
    """Induct an ingress message through the real valid set rule; return its message id."""
    ingress = Ingress(source, receiver, method, encode(arg), message_id(n), EXPIRY)
    failure = induct_ingress(state, ingress, limits)
    if failure is not None:
        raise RuntimeError(f"ingress not inducted: {failure}")
    return ingress.message_id


def status(state: ReplicatedState, mid: bytes) -> IngressStatus:
    return state.ingress_history.get(mid)


def reply_value(state: ReplicatedState, mid: bytes):
    return decode(status(state, mid).reply)


def deliver_request(state: ReplicatedState, sender: int, receiver: int, method: str, arg=None, *,
                    callback: int = 0, limits: Limits = DEFAULT) -> Request:
    request = Request(sender, receiver, method, encode(arg), callback)
    state.canisters[receiver].queues.push_input_request(request, limits.queue_capacity)
    return request


def take_output(state: ReplicatedState, canister_id: int, remote: int) -> list:
    """Pop every message of the canister's output queue to ``remote`` (as routing would)."""
    queues = state.canisters[canister_id].queues
    out = []
    while remote in queues.output_queues and queues.output_queues[remote].elements:
        out.append(queues.pop_output(remote))
    return out


def answer(state: ReplicatedState, request: Request, value=None, *, reject: str | None = None,
           code: RejectCode = RejectCode.CANISTER_REJECT) -> Response:
    """Deliver the response to ``request`` into its sender's input queue."""
    payload = Reject(code, reject) if reject is not None else Reply(encode(value))
    response = Response(request.sender, request.receiver, request.sender_reply_callback, payload)
    state.canisters[request.sender].queues.push_input_response(response)
    return response


class SingleSubnet:
    """One subnet driven through ``message_routing.state_machine.execute_round`` (loopback)."""

    def __init__(self, classes, limits: Limits = DEFAULT) -> None:
        self.topology = topology()
        self.state = new_state()
        self.env = ExecutionEnvironment(classes)
        self.limits = limits
        self.pending: list[Ingress] = []
        self.next_message = 0

    def submit(self, receiver: int, method: str, arg=None, *, source: bytes = USER) -> bytes:
        self.next_message += 1
        ingress = Ingress(source, receiver, method, encode(arg), message_id(self.next_message),
                          self.state.metadata.batch_time + self.limits.max_ingress_ttl_ns)
        self.pending.append(ingress)
        return ingress.message_id

    def round(self) -> None:
        metadata = self.state.metadata
        batch = Batch(metadata.batch_number + 1, metadata.batch_time + 10**9, self.topology.registry_version,
                            ingress=tuple(self.pending))
        self.pending = []
        self.state = execute_round(self.state, batch, self.topology, self.env, self.limits)

    def is_quiet(self) -> bool:
        return not self.pending and not self.state.streams and all(
            not c.queues.message_count() and not c.call_contexts for c in self.state.canisters.values())

    def run_until_quiet(self, max_rounds: int = 200, each_round=None) -> int:
        for n in range(1, max_rounds + 1):
            self.round()
            if each_round is not None:
                each_round(self)
            if self.is_quiet():
                return n
        raise RuntimeError(f"not quiet after {max_rounds} rounds")

    def query(self, canister_id: int, method: str, arg=None):
        result = self.env.run_query(self.state, canister_id, method, arg)
        if type(result) is not Reply:
            raise RuntimeError(f"query {method} failed: {result}")
        return decode(result.data)
