"""``replica load``: offered load through the ingress API, and what became of every call.

``run_load(agent, subnets, options)`` installs ``canisters`` load canisters on every subnet
(``load_canister``, from its source, like any user canister), then for ``duration_s`` seconds
submits ``relay`` calls at ``rate`` calls/s (open loop: a call is due at ``k / rate`` seconds
whether or not earlier ones were answered). Each call goes to a random load canister, which
calls ``echo`` on a canister of another subnet (with probability ``cross_subnet``) or of its
own, and answers once the echo is back — a request and a response through the streams; with
``timeout_s`` the inner calls are bounded-wait calls (a late echo becomes ``SYS_UNKNOWN``).

Pollers read the certified statuses of pending calls, many per ``read_state``
(``Agent.request_statuses``, every certificate verified), until every call is answered or
``drain_s`` passes after the last submission. The report (``LoadReport``):

* offered calls/s, submitted and achieved (replied calls per second of the run);
* latency from submission to the certified answer, in ms and in rounds (the certified
  height of the answer minus the subnet's finalized height when the call was submitted);
* replies, rejects by code as users saw them, and — from the canisters' own counters —
  rejects of the inner calls by code (back-pressure: reject signals and synthetic rejects);
* submissions the nodes refused, by reason (an explicit refusal, not a loss);
* ``lost``: calls accepted by a node but never answered, plus relays whose callback never
  ran; ``duplicated``: echoes a canister saw twice or out of order, plus callbacks that ran
  more often than calls were relayed. Both must be 0.
"""

from __future__ import annotations

import collections
import inspect
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable

from replica.client.agent import Agent
from replica.client.agent_errors import AgentError
from replica.client.http_wire import MAX_PATHS
from replica.client.management import install_many
from replica.client.refusals import IngressRefused
from replica.errors import ReplicaError
from replica.progress import Progress
from state_manager.messages import MANAGEMENT_CANISTER_ID

from . import load_canister

__all__ = ["LoadOptions", "LoadReport", "install_load_canisters", "run_load"]

_POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class LoadOptions:
    rate: float = 100.0
    duration_s: float = 10.0
    canisters: int = 2
    cross_subnet: float = 1.0
    pad_bytes: int = 0
    #: The inner calls' timeout (bounded-wait calls); None: guaranteed-response calls.
    timeout_s: int | None = None
    drain_s: float = 60.0
    submitters: int = 4
    seed: int = 0


@dataclass
class _Call:
    message_id: bytes
    canister: int
    subnet: str
    submitted_at: float
    submitted_height: int
    answered_at: float | None = None
    rounds: int | None = None
    outcome: str = "pending"       # replied | rejected:<code> | expired


@dataclass
class LoadReport:
    options: LoadOptions
    wall_s: float
    submitting_s: float
    submitted: int
    refused: dict[str, int]
    replied: int
    rejected: dict[str, int]
    inner_rejects: dict[str, int]
    lost: int
    duplicated: int
    latency_ms: list[float] = field(repr=False)
    latency_rounds: list[int] = field(repr=False)
    canister_totals: dict[str, int] = field(default_factory=dict)

    @property
    def achieved_per_s(self) -> float:
        return self.replied / self.wall_s if self.wall_s > 0 else 0.0

    def percentile(self, samples: list, q: float) -> float:
        if not samples:
            return 0.0
        ordered = sorted(samples)
        return float(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))])

    def as_json(self) -> dict:
        return {
            "offered_per_s": self.options.rate, "duration_s": self.options.duration_s,
            "submitted": self.submitted, "submitted_per_s": round(self.submitted / self.submitting_s, 1),
            "achieved_per_s": round(self.achieved_per_s, 1), "wall_s": round(self.wall_s, 2),
            "replied": self.replied, "rejected": self.rejected, "inner_rejects": self.inner_rejects,
            "refused": self.refused, "lost": self.lost, "duplicated": self.duplicated,
            "p50_ms": round(self.percentile(self.latency_ms, 0.5), 1),
            "p90_ms": round(self.percentile(self.latency_ms, 0.9), 1),
            "p99_ms": round(self.percentile(self.latency_ms, 0.99), 1),
            "p50_rounds": self.percentile(self.latency_rounds, 0.5),
            "p99_rounds": self.percentile(self.latency_rounds, 0.99),
            "canisters": self.canister_totals,
        }

    def table(self) -> list[str]:
        j = self.as_json()
        rows = [
            ("offered", f"{j['offered_per_s']:.0f} calls/s for {j['duration_s']:.0f} s"),
            ("submitted", f"{j['submitted']} ({j['submitted_per_s']} calls/s)"),
            ("achieved", f"{j['achieved_per_s']} replied calls/s over {j['wall_s']} s"),
            ("latency", f"p50 {j['p50_ms']} ms / {j['p50_rounds']:.0f} rounds, p90 {j['p90_ms']} ms, "
                        f"p99 {j['p99_ms']} ms / {j['p99_rounds']:.0f} rounds"),
            ("replied", str(j["replied"])),
            ("rejected", _counts(j["rejected"])),
            ("inner calls rejected", _counts(j["inner_rejects"])),
            ("refused at submission", _counts(j["refused"])),
            ("lost", str(j["lost"])),
            ("duplicated", str(j["duplicated"])),
        ]
        width = max(len(name) for name, _ in rows)
        return [f"  {name:<{width}}  {value}" for name, value in rows]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) or "none"


def install_load_canisters(agent: Agent, subnets: Iterable[str], per_subnet: int) -> dict[str, list[int]]:
    """``per_subnet`` load canisters on every subnet (``install_many``): their ids by subnet."""
    subnets = list(subnets)
    source = inspect.getsource(load_canister)
    ids = install_many(agent, [(subnet, source, "LoadCanister", None) for subnet in subnets for _ in range(per_subnet)])
    return {subnet: ids[k * per_subnet:(k + 1) * per_subnet] for k, subnet in enumerate(subnets)}


class _Heights:
    """Each subnet's finalized height as its first node reports it, refreshed by a thread."""

    def __init__(self, agent: Agent, canisters: dict[str, list[int]]) -> None:
        self._agent, self._canisters = agent, canisters
        self.current = {subnet: self._read(subnet) for subnet in canisters}

    def _read(self, subnet: str) -> int:
        return int(self._agent.status(self._agent.endpoint_for(self._canisters[subnet][0]))["finalized_height"])

    def refresh(self) -> None:
        for subnet in self.current:
            try:
                self.current[subnet] = self._read(subnet)
            except (AgentError, ValueError, KeyError):
                pass   # the next refresh tries again; heights only make the rounds estimate


def _stats_of(agent: Agent, canister: int, patience_s: float = 60.0) -> dict:
    """The load canister's counters; asked again while it cannot answer (e.g. it is moving
    between subnets) for up to ``patience_s`` seconds."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return agent.query_call(canister, "stats")
        except (AgentError, IngressRefused):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _inner_outcomes(agent: Agent, canisters: dict[str, list[int]]) -> tuple[dict[str, int], dict[str, int]]:
    """(totals of the canisters' counters, their inner rejects by code name)."""
    from replica.client.agent import reject_code_name

    totals: collections.Counter[str] = collections.Counter()
    inner: collections.Counter[str] = collections.Counter()
    for ids in canisters.values():
        for canister in ids:
            stats = _stats_of(agent, canister)
            for key in ("relayed", "echoed", "replied", "rejected", "violations"):
                totals[key] += stats[key]
            for code, count in stats["rejected_by_code"].items():
                inner[reject_code_name(code)] += count
    return dict(totals), dict(inner)


def run_load(agent: Agent, subnets: list[str], options: LoadOptions, *,
             canisters: dict[str, list[int]] | None = None, progress: Progress | None = None,
             stop: threading.Event | None = None) -> LoadReport:
    """Install the load canisters (unless given), drive the load, drain, report (module
    docstring). ``stop`` set ends the offered load before ``duration_s`` (then it drains)."""
    if options.rate <= 0 or options.duration_s <= 0 or options.canisters < 1 or not 0 <= options.cross_subnet <= 1:
        raise ReplicaError("load needs a positive rate and duration, at least one canister per subnet and a "
                           "cross-subnet fraction in [0, 1]")
    canisters = canisters or install_load_canisters(agent, subnets, options.canisters)
    rng = random.Random(options.seed)
    heights = _Heights(agent, canisters)
    lock = threading.Lock()
    pending: dict[str, dict[bytes, _Call]] = {subnet: {} for subnet in subnets}
    answered: list[_Call] = []
    refused: collections.Counter[str] = collections.Counter()
    stop_polling = threading.Event()
    last_submission = [0.0]

    def submit(canister: int, target: int) -> None:
        arg = {"target": target, "pad": options.pad_bytes}
        if options.timeout_s is not None:
            arg["timeout_s"] = options.timeout_s
        submitted_at = time.monotonic()
        try:
            # the subnet hosting the canister now (canisters may migrate during a run): the
            # call's status lives in that subnet's ingress history
            subnet = agent.subnet_of(canister)
            height = heights.current[subnet]
            message_id = agent.submit_call(canister, "relay", arg, subnet=subnet)
        except IngressRefused as refusal:
            with lock:
                refused[refusal.reason] += 1
            return
        except AgentError as exc:
            with lock:
                refused[type(exc).__name__] += 1
            return
        with lock:
            pending[subnet][message_id] = _Call(message_id, canister, subnet, submitted_at, height)
            last_submission[0] = time.monotonic()

    def poll() -> None:
        while not stop_polling.wait(_POLL_INTERVAL_S):
            heights.refresh()
            for subnet, calls in pending.items():
                with lock:
                    waiting = list(calls.values())
                for start in range(0, len(waiting), MAX_PATHS - 1):
                    chunk = waiting[start:start + MAX_PATHS - 1]
                    try:
                        statuses = agent.request_statuses([c.message_id for c in chunk], MANAGEMENT_CANISTER_ID,
                                                          subnet=subnet)
                    except AgentError:
                        continue   # not certified yet, or a node restarting: the next poll asks again
                    now = time.monotonic()
                    for call in chunk:
                        status = statuses[call.message_id]
                        if status.status not in ("replied", "rejected", "done"):
                            continue
                        call.answered_at = now
                        call.rounds = status.certificate.height - call.submitted_height
                        call.outcome = ("replied" if status.status == "replied" else
                                        f"rejected:{status.reject_code}" if status.status == "rejected" else "expired")
                        with lock:
                            calls.pop(call.message_id, None)
                            answered.append(call)

    poller = threading.Thread(target=poll, name="load-poller", daemon=True)
    poller.start()
    everyone = [(subnet, canister) for subnet in subnets for canister in canisters[subnet]]
    started = time.monotonic()
    due = 0
    try:
        with ThreadPoolExecutor(max_workers=options.submitters, thread_name_prefix="load-submit") as pool:
            while (elapsed := time.monotonic() - started) < options.duration_s and not (stop and stop.is_set()):
                while due < int(elapsed * options.rate):
                    subnet, canister = rng.choice(everyone)
                    others = [c for s, c in everyone if s != subnet] if rng.random() < options.cross_subnet else []
                    target = rng.choice(others or canisters[subnet])
                    pool.submit(submit, canister, target)
                    due += 1
                if progress is not None:
                    with lock:
                        waiting = sum(len(c) for c in pending.values())
                        done = len(answered)
                    progress.update(f"{due} offered, {done} answered, {waiting} pending, "
                                    f"{sum(refused.values())} refused", done=int(elapsed * 10))
                time.sleep(0.01)
        drain_deadline = time.monotonic() + options.drain_s
        while time.monotonic() < drain_deadline:
            with lock:
                waiting = sum(len(c) for c in pending.values())
            if not waiting:
                break
            if progress is not None:
                progress.update(f"draining: {waiting} calls pending")
            time.sleep(0.1)
    finally:
        stop_polling.set()
        poller.join(timeout=30)
    last_answer = max((c.answered_at for c in answered if c.answered_at is not None), default=time.monotonic())
    totals, inner = _inner_outcomes(agent, canisters)
    callbacks = totals.get("replied", 0) + totals.get("rejected", 0)
    rejected = collections.Counter(c.outcome.split(":", 1)[1] if c.outcome.startswith("rejected:")
                                   else "answer expired unread" for c in answered if c.outcome != "replied")
    replied = [c for c in answered if c.outcome == "replied"]
    return LoadReport(
        options=options, wall_s=last_answer - started,
        submitting_s=max(last_submission[0] - started, 1e-9),
        submitted=len(answered) + sum(len(c) for c in pending.values()),
        refused=dict(refused), replied=len(replied), rejected=dict(rejected), inner_rejects=inner,
        lost=sum(len(c) for c in pending.values()) + max(0, totals.get("relayed", 0) - callbacks),
        duplicated=totals.get("violations", 0) + max(0, callbacks - totals.get("relayed", 0)),
        latency_ms=[(c.answered_at - c.submitted_at) * 1e3 for c in replied if c.answered_at is not None],
        latency_rounds=[c.rounds for c in replied if c.rounds is not None],
        canister_totals=totals)
