"""``replica trace MESSAGE_ID``: every hop of a call, and of the calls it made (pure).

From the subnets' ``Timeline``s (``replica.observe.call_events``: replayed from their
recorded blocks) ``trace_message`` follows one ingress message:

1. the block that carried it (subnet, height, maker node, block time) and its status changes;
2. the call context it opened on its canister; for each call that context made (a callback),
   the request: held in an output queue, or routed into the stream ``S → D`` at index ``i``;
   its induction on ``D`` (the block whose slice from ``S`` covered ``i``), or the reject
   signal ``D`` sent for it (with the reason); the callee's call context and, recursively,
   its own calls; the response routed back, inducted on ``S``, and the callback run;
3. the ingress message's answer (replied / rejected) at its height.

A hop that has not happened yet is where the call is **stuck**; ``Trace.stuck`` says where
and why, e.g. ``in stream subnet-0 → subnet-1 at index 812, 37 rounds unacknowledged;
subnet-1 last made a block 40 rounds ago``. Rounds are heights of the sending subnet; "ago"
is measured from ``now_ns`` with the testnet's round time.
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass, field
from typing import Mapping

from replica.ic.textual_ids import canister_text as _id
from state_manager.canister_state import CanisterOrigin, IngressOrigin
from state_manager.messages import Reject, RejectCode, Request, Response

from .call_events import Executed, Routed, Timeline

__all__ = ["Hop", "Trace", "trace_message", "format_trace"]


@dataclass(frozen=True)
class Hop:
    subnet: str
    height: int | None
    kind: str
    text: str
    depth: int = 0
    instructions: int | None = None   # of an executed message: what it used


@dataclass
class Trace:
    message_id: str
    found: bool = False
    status: str | None = None
    subnet: str | None = None
    canister: int | None = None
    hops: list[Hop] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"message_id": self.message_id, "found": self.found, "status": self.status, "subnet": self.subnet,
                "canister": _id(self.canister) if self.canister is not None else None,
                "hops": [asdict(h) for h in self.hops], "stuck": self.stuck}


def _utc(time_ns: int) -> str:
    return datetime.datetime.fromtimestamp(time_ns / 1e9, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _code_name(code: object) -> str:
    try:
        return RejectCode(code).name  # type: ignore[arg-type]
    except ValueError:
        return f"UNKNOWN_{code}"


class _Tracer:
    def __init__(self, timelines: Mapping[str, Timeline], now_ns: int, round_s: float) -> None:
        self.timelines = timelines
        self.now_ns = now_ns
        self.round_s = round_s
        self.trace = Trace("")

    # -- helpers ------------------------------------------------------------------------------

    def hop(self, subnet: str, height: int | None, kind: str, text: str, depth: int,
            execution: Executed | None = None) -> None:
        instructions = None
        if execution is not None:
            instructions = execution.instructions
            text = f"{text}; {instructions} instructions"
            if execution.limit_exceeded:
                text = f"{text} (the instruction limit: trapped)"
        self.trace.hops.append(Hop(subnet, height, kind, text, depth, instructions))

    def stuck(self, text: str, subnet: str, depth: int) -> None:
        self.trace.stuck.append(text)
        self.hop(subnet, None, "stuck", text, depth)

    def _silence(self, subnet: str) -> str:
        """``subnet-1 last made a block at height 40, 37 rounds ago`` (from ``now_ns``)."""
        timeline = self.timelines.get(subnet)
        if timeline is None or timeline.last_block_time_ns is None:
            return f"{subnet} has made no block"
        seconds = max(0.0, (self.now_ns - timeline.last_block_time_ns) / 1e9)
        rounds = int(seconds / self.round_s) if self.round_s > 0 else 0
        return f"{subnet} last made a block at height {timeline.height}, {seconds:.1f} s (~{rounds} rounds) ago"

    def _routed(self, subnet: str, match) -> Routed | None:
        for event in self.timelines[subnet].routed:
            if match(event.message):
                return event
        return None

    # -- one message through a stream ----------------------------------------------------------

    def _deliver(self, source: str, routed: Routed, what: str, depth: int) -> tuple[int, str | None] | None:
        """Follow ``routed`` (on ``source``) to its induction on the destination: ``(height,
        reject reason or None)``, or ``None`` after noting where it is stuck."""
        destination, index = routed.destination, routed.index
        if destination == source:
            self.hop(source, routed.height + 1, "inducted", f"{what}: loopback, inducted directly on {source}", depth)
            return routed.height + 1, None
        target = self.timelines.get(destination)
        if target is None:
            self.stuck(f"{what} in stream {source} → {destination} at index {index}: no record of {destination}",
                       source, depth)
            return None
        for block in target.blocks:
            carried = block.slices.get(source)
            if carried is not None and carried[0] <= index < carried[1]:
                reason = next((s.reason for s in target.signals
                               if s.remote == source and s.index == index and s.height == block.height), None)
                if reason is not None:
                    self.hop(destination, block.height, "rejected",
                             f"{what} rejected by {destination} at height {block.height}: {reason} "
                             f"(reject signal for index {index})", depth)
                else:
                    self.hop(destination, block.height, "inducted",
                             f"{what} inducted on {destination} at height {block.height} (in the certified slice "
                             f"of {source}'s stream, indices [{carried[0]}, {carried[1]}), in the block of {block.maker})",
                             depth)
                return block.height, reason
        sender = self.timelines[source]
        waited = sender.height - routed.height
        begin = sender.stream_begin(destination)
        acked = "unacknowledged" if begin <= index else "acknowledged"
        self.stuck(f"{what} in stream {source} → {destination} at index {index}, {waited} rounds {acked} "
                   f"({destination} acknowledged the indices below {begin}); {self._silence(destination)}",
                   source, depth)
        return None

    # -- calls --------------------------------------------------------------------------------

    def follow_context(self, subnet: str, canister: int, context_id: int, depth: int) -> None:
        timeline = self.timelines[subnet]
        for callback in timeline.callbacks_opened:
            if callback.canister == canister and callback.context_id == context_id:
                self.follow_call(subnet, canister, callback.callback_id, callback.respondent, callback.height, depth)

    def follow_call(self, subnet: str, caller: int, callback_id: int, callee: int, height: int, depth: int) -> None:
        call = f"call {_id(caller)} → {_id(callee)} (callback {callback_id})"
        self.hop(subnet, height, "call", f"{call} made on {subnet} at height {height}", depth)
        request = self._routed(subnet, lambda m: type(m) is Request and m.sender == caller
                               and m.sender_reply_callback == callback_id)
        closed = next((c for c in self.timelines[subnet].callbacks_closed
                       if c.canister == caller and c.callback_id == callback_id), None)
        if request is None:
            held = next((q for q in self.timelines[subnet].queued if q.kind == "output" and q.canister == caller
                         and type(q.message) is Request and q.message.sender_reply_callback == callback_id), None)
            if held is not None:
                limit_messages, limit_bytes = self.timelines[subnet].stream_limits
                self.stuck(f"request {_id(caller)} → {_id(callee)} held in the output queue of canister {_id(caller)} "
                           f"on {subnet} since height {height}: its stream is full (at most {limit_messages} messages, "
                           f"{limit_bytes} bytes, until the receiver acknowledges)", subnet, depth + 1)
            elif closed is not None:
                self.hop(subnet, closed.height, "answered",
                         f"{call} answered on {subnet} without leaving it (synthetic reject) at height "
                         f"{closed.height}", depth + 1)
            else:
                self.stuck(f"request {_id(caller)} → {_id(callee)} not routed on {subnet} and not queued", subnet,
                           depth + 1)
            return
        self.hop(subnet, request.height, "routed",
                 f"request routed into stream {subnet} → {request.destination} at index {request.index} at height "
                 f"{request.height} (certified with that height)", depth + 1)
        delivered = self._deliver(subnet, request, "request", depth + 1)
        if delivered is None:
            return
        destination = request.destination
        inducted_at, reason = delivered
        if reason is None:
            context = next((c for c in self.timelines[destination].contexts if c.canister == callee
                            and c.origin == CanisterOrigin(caller, callback_id)), None)
            execution = self.timelines[destination].execution(callee, ("request", caller, callback_id))
            if context is not None:
                self.hop(destination, context.height, "executed",
                         f"executed: canister {_id(callee)} {context.method} on {destination} "
                         f"at height {context.height}",
                         depth + 1, execution)
                self.follow_context(destination, callee, context.context_id, depth + 2)
            response = self._routed(destination, lambda m: type(m) is Response and m.originator == caller
                                    and m.originator_reply_callback == callback_id)
            if response is None:
                if context is None and not any(q.canister == callee for q in self.timelines[destination].queued
                                               if q.kind == "input"):
                    self.hop(destination, inducted_at, "executed",
                             f"executed: canister {_id(callee)} on {destination} (answered within the round)",
                             depth + 1, execution)
                self.stuck(f"no response from canister {_id(callee)} on {destination} yet (its call context is open, "
                           f"or the request waits in its input queue); {self._silence(destination)}",
                           destination, depth + 1)
                return
            if context is None:   # opened and closed within one round: the response shows when it ran
                self.hop(destination, response.height, "executed",
                         f"executed: canister {_id(callee)} on {destination} at height {response.height} "
                         f"(answered within that round)", depth + 1, execution)
            payload = response.message.response_payload
            answer = "reply" if not isinstance(payload, Reject) else f"reject {_code_name(payload.code)}"
            self.hop(destination, response.height, "response",
                     f"response ({answer}) routed into stream {destination} → {response.destination} at index "
                     f"{response.index} at height {response.height}", depth + 1)
            if self._deliver(destination, response, "response", depth + 1) is None:
                return
        else:
            self.hop(subnet, None, "synthetic_reject",
                     f"{subnet} turns the reject signal into a synthetic reject response ({reason})", depth + 1)
        if closed is not None:
            self.hop(subnet, closed.height, "callback",
                     f"callback {callback_id} of canister {_id(caller)} ran on {subnet} at height {closed.height}",
                     depth + 1,
                     self.timelines[subnet].execution(caller, ("response", callback_id)))
        else:
            self.stuck(f"callback {callback_id} of canister {_id(caller)} on {subnet} has not run yet; "
                       f"{self._silence(subnet)}", subnet, depth + 1)

    # -- the ingress message ------------------------------------------------------------------

    def run(self, message_id: bytes) -> Trace:
        self.trace = trace = Trace(message_id.hex())
        for subnet, timeline in self.timelines.items():
            for block in timeline.blocks:
                for mid, receiver, method in block.ingress:
                    if mid == message_id:
                        trace.found, trace.subnet, trace.canister = True, subnet, receiver
                        self.hop(subnet, block.height, "ingress",
                                 f"ingress {method} to canister {_id(receiver)} in block {block.height} of {subnet} "
                                 f"(made by {block.maker}, block time {_utc(block.time_ns)})", 0)
                        self._follow_ingress(subnet, receiver, message_id)
                        return trace
        return trace

    def _follow_ingress(self, subnet: str, receiver: int, message_id: bytes) -> None:
        timeline = self.timelines[subnet]
        changes = [c for c in timeline.ingress if c.message_id == message_id]
        for change in changes:
            if change.status in ("received", "processing"):
                self.hop(subnet, change.height, change.status, f"status {change.status} at height {change.height}", 0)
        context = next((c for c in timeline.contexts if c.canister == receiver
                        and isinstance(c.origin, IngressOrigin) and c.origin.message_id == message_id), None)
        execution = timeline.execution(receiver, ("ingress", message_id))
        if context is not None:
            self.hop(subnet, context.height, "executed",
                     f"executed: canister {_id(receiver)} {context.method} on {subnet} at height {context.height}", 0,
                     execution)
            self.follow_context(subnet, receiver, context.context_id, 1)
        elif execution is not None:   # opened and closed within one round
            self.hop(subnet, execution.height, "executed",
                     f"executed: canister {_id(receiver)} on {subnet} at height {execution.height} "
                     f"(answered within that round)", 0, execution)
        final = changes[-1] if changes else None
        self.trace.status = final.status if final else None
        if final is not None and final.status in ("replied", "rejected", "done"):
            detail = ""
            if final.status == "rejected":
                detail = f": {_code_name(final.reject_code)} {final.reject_message}"
            self.hop(subnet, final.height, final.status,
                     f"{final.status} at height {final.height}{detail} (in the state certified at that height)", 0)
        elif not self.trace.stuck:
            queued = any(q.kind == "ingress" and getattr(q.message, "message_id", None) == message_id
                         for q in timeline.queued)
            where = "in the ingress queue of" if queued else "at"
            self.stuck(f"ingress {where} canister {_id(receiver)} on {subnet}, not answered yet; "
                       f"{self._silence(subnet)}", subnet, 0)


def trace_message(message_id: bytes, timelines: Mapping[str, Timeline], *, now_ns: int, round_s: float) -> Trace:
    """The ``Trace`` of ``message_id`` (module docstring)."""
    return _Tracer(timelines, now_ns, round_s).run(message_id)


def format_trace(trace: Trace) -> list[str]:
    """Lines for a terminal: one per hop, indented by call depth, then where it is stuck."""
    if not trace.found:
        return [f"message {trace.message_id} is in no finalized block of any subnet "
                f"(still in an ingress pool, refused, or expired)"]
    lines = [f"message {trace.message_id}: {trace.status or 'unknown'}"]
    for hop in trace.hops:
        where = f"{hop.subnet}@{hop.height}" if hop.height is not None else hop.subnet
        lines.append(f"{'  ' * (hop.depth + 1)}{where:<14} {hop.text}")
    if trace.stuck:
        lines.append("stuck:")
        lines.extend(f"  {text}" for text in trace.stuck)
    return lines
