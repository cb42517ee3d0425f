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
``drain_s`` passes after the load window closed.

The window is kept: a call that no submitter takes up within ``MAX_LATENESS_S`` of the time
it was due, or before the window closes, is counted as not submitted (``client limit``: the
report says the client was the limit), never queued past the window; at most ``rate x
MAX_LATENESS_S`` calls wait for a submitter (one due beyond that could not start in time).
A call no node confirmed (``SubmissionUncertain``) is polled like the others: answered, it
counts as submitted; never seen, as not submitted. The agent fails over between a subnet's
nodes and re-reads where they are, so a node restarting costs no call. The drain waits for
unconfirmed calls ``UNCONFIRMED_GRACE_S`` at most.

The report (``replica.load.load_report.LoadReport``): offered, submitted, not submitted
and refused by cause, answered (replies, rejects by code as users saw them) and achieved
calls/s; latency from submission to the certified answer in ms and in rounds; the drain in
seconds and rounds; from the canisters' own counters, rejects of the inner calls by code
(back-pressure: reject signals and synthetic rejects); ``lost`` (calls a node took but never
answered, plus relays whose callback never ran) and ``duplicated`` (echoes a canister saw
twice or out of order, plus callbacks that ran more often than calls were relayed), both
of which must be 0. An error ends the run with ``LoadFailed``, whose report holds the numbers
so far; an interrupt (Ctrl-C) or ``stop`` ends the offered load early, then drains and reports.
"""

from __future__ import annotations

import collections
import inspect
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable

from replica.client.agent import Agent, reject_code_name
from replica.client.agent_errors import AgentError, RequestRefused, SubmissionUncertain
from replica.client.agent import MAX_PATHS
from replica.client.management import install_many
from replica.client.refusals import IngressRefused
from replica.errors import ReplicaError
from replica.progress import Progress
from state_manager.messages import MANAGEMENT_CANISTER_ID

from . import load_canister
from .load_report import CLIENT_LIMIT, NOT_CONFIRMED, LoadFailed, LoadReport

__all__ = ["LoadOptions", "LoadReport", "LoadFailed", "install_load_canisters", "run_load"]

_log = logging.getLogger("replica.load.load")

_POLL_INTERVAL_S = 0.1
#: Seconds after its due time within which a call must be taken up by a submitter.
MAX_LATENESS_S = 1.0
#: Seconds the drain waits for calls no node confirmed: pooled, they are answered within it.
UNCONFIRMED_GRACE_S = 5.0


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
    #: A node took it (202); False: no node confirmed it (``SubmissionUncertain``).
    confirmed: bool = True
    answered_at: float | None = None
    rounds: int | None = None
    outcome: str = "pending"       # replied | rejected:<code> | expired


def install_load_canisters(agent: Agent, subnets: Iterable[str], per_subnet: int) -> dict[str, list[int]]:
    """``per_subnet`` load canisters on every subnet (``install_many``): their ids by subnet."""
    subnets = list(subnets)
    source = inspect.getsource(load_canister)
    ids = install_many(agent, [(subnet, source, "LoadCanister", None) for subnet in subnets for _ in range(per_subnet)])
    return {subnet: ids[k * per_subnet:(k + 1) * per_subnet] for k, subnet in enumerate(subnets)}


class _Heights:
    """Each subnet's finalized height as the first of its nodes that answers reports it,
    refreshed by the poller."""

    def __init__(self, agent: Agent, subnets: Iterable[str]) -> None:
        self._agent = agent
        self.current = {subnet: self._read(subnet) for subnet in subnets}

    def _read(self, subnet: str) -> int:
        return int(self._agent.status(subnet=subnet)["finalized_height"])

    def refresh(self) -> None:
        for subnet in self.current:
            try:
                self.current[subnet] = self._read(subnet)
            except (AgentError, ValueError, KeyError):
                pass   # the next refresh tries again; heights only make the rounds estimate


def _stats_of(agent: Agent, canister: int, deadline: float) -> dict:
    """The load canister's counters; asked again while it cannot answer (e.g. it is moving
    between subnets) until ``deadline`` (``time.monotonic``)."""
    while True:
        try:
            return agent.query_call(canister, "stats")
        except (AgentError, IngressRefused):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _inner_outcomes(agent: Agent, canisters: dict[str, list[int]],
                    patience_s: float = 60.0) -> tuple[dict[str, int], dict[str, int]]:
    """(totals of the canisters' counters, their inner rejects by code name), all read within
    ``patience_s`` seconds."""
    deadline = time.monotonic() + patience_s
    totals: collections.Counter[str] = collections.Counter()
    inner: collections.Counter[str] = collections.Counter()
    for ids in canisters.values():
        for canister in ids:
            stats = _stats_of(agent, canister, deadline)
            for key in ("relayed", "echoed", "replied", "rejected", "violations"):
                totals[key] += stats[key]
            for code, count in stats["rejected_by_code"].items():
                inner[reject_code_name(code)] += count
    return dict(totals), dict(inner)


class _LoadRun:
    """One run's counters and its three phases: offering, polling (a thread) and draining."""

    def __init__(self, agent: Agent, subnets: list[str], options: LoadOptions, progress: Progress | None) -> None:
        self.agent, self.subnets, self.options, self.progress = agent, subnets, options, progress
        self.canisters: dict[str, list[int]] = {}
        self.heights: _Heights | None = None
        self.lock = threading.Lock()
        self.pending: dict[str, dict[bytes, _Call]] = {subnet: {} for subnet in subnets}
        self.answered: list[_Call] = []
        self.refused: collections.Counter[str] = collections.Counter()
        self.not_submitted: collections.Counter[str] = collections.Counter()
        self.offered = 0
        #: Calls handed to the submitters and not done yet.
        self.waiting = 0
        self.window_closed = threading.Event()
        self.started = time.monotonic()
        self.window_end: float | None = None
        self.last_submission = 0.0
        self.drain_heights: dict[str, int] = {}
        self.drain_s = 0.0
        self.ended_early: str | None = None
        #: An unexpected error of a submitter or the poller: it ends the run.
        self.failure: BaseException | None = None
        self._stop_polling = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="load-poller", daemon=True)

    # -- submitting ---------------------------------------------------------------------------

    def _submit(self, canister: int, target: int, due_at: float) -> None:
        try:
            if self.window_closed.is_set() or time.monotonic() - due_at > MAX_LATENESS_S:
                with self.lock:   # waited for a submitter too long, or past the window
                    self.not_submitted[CLIENT_LIMIT] += 1
                return
            self._submit_now(canister, target)
        except BaseException as exc:  # noqa: BLE001 - a bug: kept, and it ends the run
            _log.exception("a load submission failed")
            self.failure = self.failure or exc
        finally:
            with self.lock:
                self.waiting -= 1

    def _submit_now(self, canister: int, target: int) -> None:
        arg = {"target": target, "pad": self.options.pad_bytes}
        if self.options.timeout_s is not None:
            arg["timeout_s"] = self.options.timeout_s
        submitted_at = time.monotonic()
        confirmed = True
        try:
            # the subnet hosting the canister now (canisters may migrate during a run): the
            # call's status lives in that subnet's ingress history
            subnet = self.agent.subnet_of(canister)
            height = self.heights.current.get(subnet, 0) if self.heights else 0
            message_id = self.agent.submit_call(canister, "relay", arg, subnet=subnet)
        except IngressRefused as refusal:   # a node refused it, for its reason
            with self.lock:
                self.refused[refusal.reason] += 1
            return
        except SubmissionUncertain as uncertain:   # maybe pooled: its status will tell
            message_id, confirmed = uncertain.message_id, False
        except RequestRefused as refusal:
            with self.lock:
                self.not_submitted[refusal.reason] += 1
            return
        except AgentError as exc:
            with self.lock:
                self.not_submitted[type(exc).__name__] += 1
            return
        with self.lock:
            self.pending[subnet][message_id] = _Call(message_id, canister, subnet, submitted_at, height, confirmed)
            self.last_submission = time.monotonic()

    def offer(self, stop: threading.Event | None) -> None:
        """Offer calls at ``rate`` until ``duration_s`` passed (or ``stop`` is set); a call that
        cannot start in time is not submitted (``CLIENT_LIMIT``, module docstring)."""
        options = self.options
        rng = random.Random(options.seed)
        everyone = [(subnet, canister) for subnet in self.subnets for canister in self.canisters[subnet]]
        limit = options.submitters + max(1, int(options.rate * MAX_LATENESS_S))
        pool = ThreadPoolExecutor(max_workers=options.submitters, thread_name_prefix="load-submit")

        def offer_due(due: int) -> None:
            while self.offered < due:
                self.offered += 1
                subnet, canister = rng.choice(everyone)
                others = [c for s, c in everyone if s != subnet] if rng.random() < options.cross_subnet else []
                target = rng.choice(others or self.canisters[subnet])
                with self.lock:
                    if self.waiting >= limit:
                        self.not_submitted[CLIENT_LIMIT] += 1
                        continue
                    self.waiting += 1
                pool.submit(self._submit, canister, target, self.started + self.offered / options.rate)

        self.started = time.monotonic()
        try:
            while (elapsed := time.monotonic() - self.started) < options.duration_s:
                if stop is not None and stop.is_set():
                    self.ended_early = self.ended_early or "stopped"
                    break
                if self.failure is not None:
                    break
                offer_due(int(elapsed * options.rate))
                self._show(f"{self.offered} offered")
                time.sleep(0.01)
            else:
                # The calls due between the last pass and the window's end: an open loop offers
                # rate x duration calls however late this thread was woken (a starved thread
                # used to drop the window's last slice unoffered and uncounted)
                offer_due(int(options.duration_s * options.rate))
        except KeyboardInterrupt:
            self.ended_early = "interrupted"
        finally:
            self.window_closed.set()
            self.window_end = time.monotonic()
            pool.shutdown(wait=True)   # the calls on their way; the waiting ones are counted at once

    # -- polling and draining -----------------------------------------------------------------

    def start_polling(self) -> None:
        self._poller.start()

    def stop_polling(self) -> None:
        self._stop_polling.set()
        if self._poller.is_alive():
            self._poller.join(timeout=30)

    def _poll(self) -> None:
        try:
            while not self._stop_polling.wait(_POLL_INTERVAL_S):
                if self.heights is not None:
                    self.heights.refresh()
                for subnet, calls in self.pending.items():
                    with self.lock:
                        waiting = list(calls.values())
                    for start in range(0, len(waiting), MAX_PATHS - 1):
                        if self._stop_polling.is_set():
                            return
                        self._poll_chunk(subnet, calls, waiting[start:start + MAX_PATHS - 1])
        except BaseException as exc:  # noqa: BLE001 - a bug: kept, and it ends the run
            _log.exception("the load poller failed")
            self.failure = self.failure or exc

    def _poll_chunk(self, subnet: str, calls: dict[bytes, _Call], chunk: list[_Call]) -> None:
        try:
            statuses = self.agent.request_statuses([c.message_id for c in chunk], MANAGEMENT_CANISTER_ID,
                                                   subnet=subnet)
        except (AgentError, IngressRefused):
            return   # not certified yet, or no node answering: the next poll asks again
        now = time.monotonic()
        for call in chunk:
            status = statuses[call.message_id]
            if status.status not in ("replied", "rejected", "done"):
                continue
            call.answered_at = now
            call.rounds = status.certificate.height - call.submitted_height
            call.outcome = ("replied" if status.status == "replied" else
                            f"rejected:{status.reject_code}" if status.status == "rejected" else "expired")
            with self.lock:
                calls.pop(call.message_id, None)
                self.answered.append(call)

    def _waiting(self, unconfirmed: bool) -> int:
        """Calls not answered yet: those a node took, and with ``unconfirmed`` those no node
        confirmed as well."""
        with self.lock:
            return sum(1 for calls in self.pending.values() for call in calls.values()
                       if call.confirmed or unconfirmed)

    def drain(self) -> None:
        """Wait until every call a node took is answered, for at most ``drain_s``; calls no
        node confirmed are waited for only ``UNCONFIRMED_GRACE_S`` (they may never have been
        pooled)."""
        started = time.monotonic()
        self.drain_heights = dict(self.heights.current) if self.heights else {}
        deadline = started + self.options.drain_s
        try:
            while time.monotonic() < deadline and self.failure is None:
                waiting = self._waiting(unconfirmed=time.monotonic() - started < UNCONFIRMED_GRACE_S)
                if not waiting:
                    break
                self._show(f"draining: {waiting} calls pending", done=False)
                time.sleep(0.1)
        except KeyboardInterrupt:
            self.ended_early = "interrupted (while draining)"
        self.drain_s = time.monotonic() - started

    def _show(self, what: str, done: bool = True) -> None:
        if self.progress is None:
            return
        with self.lock:
            waiting = sum(len(c) for c in self.pending.values())
            answered = len(self.answered)
            refused, skipped = sum(self.refused.values()), sum(self.not_submitted.values())
        detail = f"{what}, {answered} answered, {waiting} pending, {refused} refused, {skipped} not submitted"
        elapsed = int((time.monotonic() - self.started) * 10)
        self.progress.update(detail, done=elapsed if done else None)

    # -- the report -----------------------------------------------------------------------------

    def report(self, error: str | None) -> LoadReport:
        """The report of what happened so far (``error``: what ended the run, if anything)."""
        totals: dict[str, int] = {}
        inner: dict[str, int] = {}
        if self.canisters:
            try:
                totals, inner = _inner_outcomes(self.agent, self.canisters)
            except (ReplicaError, KeyboardInterrupt) as exc:
                error = error or f"the load canisters' counters could not be read: {type(exc).__name__}: {exc}"
        with self.lock:
            answered = list(self.answered)
            waiting = [c for calls in self.pending.values() for c in calls.values()]
            not_submitted = collections.Counter(self.not_submitted)
            refused = dict(self.refused)
        unseen = sum(1 for c in waiting if not c.confirmed)
        if unseen:
            not_submitted[NOT_CONFIRMED] += unseen
        lost_pending = sum(1 for c in waiting if c.confirmed)
        callbacks = totals.get("replied", 0) + totals.get("rejected", 0)
        rejected = collections.Counter(c.outcome.split(":", 1)[1] if c.outcome.startswith("rejected:")
                                       else "answer expired unread" for c in answered if c.outcome != "replied")
        replied = [c for c in answered if c.outcome == "replied"]
        last_answer = max((c.answered_at for c in answered if c.answered_at is not None), default=time.monotonic())
        heights = self.heights.current if self.heights else {}
        return LoadReport(
            options=self.options, wall_s=last_answer - self.started,
            submitting_s=max(self.last_submission - self.started, 1e-9),
            offered=self.offered, submitted=len(answered) + lost_pending,
            refused=refused, not_submitted=dict(not_submitted), replied=len(replied), rejected=dict(rejected),
            inner_rejects=inner,
            lost=lost_pending + max(0, totals.get("relayed", 0) - callbacks),
            duplicated=totals.get("violations", 0) + max(0, callbacks - totals.get("relayed", 0)),
            latency_ms=[(c.answered_at - c.submitted_at) * 1e3 for c in replied if c.answered_at is not None],
            latency_rounds=[c.rounds for c in replied if c.rounds is not None],
            canister_totals=totals, drain_s=self.drain_s,
            drain_rounds=max((heights.get(s, h) - h for s, h in self.drain_heights.items()), default=0),
            ended_early=self.ended_early, error=error)


def run_load(agent: Agent, subnets: list[str], options: LoadOptions, *,
             canisters: dict[str, list[int]] | None = None, progress: Progress | None = None,
             stop: threading.Event | None = None) -> LoadReport:
    """Install the load canisters (unless given), drive the load, drain, report (module
    docstring). ``stop`` set ends the offered load before ``duration_s`` (then it drains).
    ``LoadFailed`` (with the report so far) if an error ended the run."""
    if options.rate <= 0 or options.duration_s <= 0 or options.canisters < 1 or not 0 <= options.cross_subnet <= 1 \
            or options.submitters < 1:
        raise ReplicaError("load needs a positive rate and duration, at least one canister per subnet and one "
                           "submitter, and a cross-subnet fraction in [0, 1]")
    run = _LoadRun(agent, subnets, options, progress)
    error: str | None = None
    try:
        run.canisters = canisters or install_load_canisters(agent, subnets, options.canisters)
        run.heights = _Heights(agent, subnets)
        run.start_polling()
        run.offer(stop)
        if run.failure is None:
            run.drain()
    except ReplicaError as exc:
        error = f"{type(exc).__name__}: {exc}"
    except KeyboardInterrupt:
        run.ended_early = "interrupted"
    except Exception as exc:  # noqa: BLE001 - logged, and reported with the numbers so far
        _log.exception("the load run failed")
        error = f"{type(exc).__name__}: {exc}"
    finally:
        run.window_closed.set()
        run.stop_polling()
    if run.failure is not None:
        error = error or f"{type(run.failure).__name__}: {run.failure}"
    report = run.report(error)
    if report.error is not None:
        raise LoadFailed(report.error, report)
    return report
