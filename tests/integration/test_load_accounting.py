"""``replica load``'s accounting against a scripted agent (no testnet): every offered call ends
in exactly one of submitted, refused (by a node, for its reason) or not submitted (by cause);
a call no node confirmed counts as submitted once its status shows up and as not submitted
if it never does, without holding the drain; an error ends the run with the report so far
(``LoadFailed``), which ``replica load`` prints with the error and exit status 2."""

from __future__ import annotations

import json
import threading
import types

import pytest

from replica.cli import main
from replica.client.agent_errors import SubmissionUncertain, TransportError
from replica.client.refusals import IngressPoolFull
from replica.errors import ReplicaError
from replica.testnet import http_endpoints
from replica.load import load
from replica.load.load import LoadFailed, LoadOptions, run_load
from replica.load.load_report import CLIENT_LIMIT, NOT_CONFIRMED
from tests.golden import fixtures as fx

pytestmark = pytest.mark.timeout(60)

CANISTERS = {fx.A: [5], fx.B: [150]}


class ScriptedAgent:
    """Subnets A and B with one load canister each. Call k (from 1) is, by ``k % 4``: 1 taken,
    2 unconfirmed but pooled (answered later), 3 unconfirmed and never pooled, 0 refused as
    ``pool_full``. A pooled call is replied on the poll after it was submitted; the canisters'
    counters agree with what was pooled."""

    def __init__(self, fail_stats: bool = False, bug_at: int | None = None) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.pooled: dict[bytes, bool] = {}   # message id -> answered yet
        self.fail_stats, self.bug_at = fail_stats, bug_at

    def subnet_of(self, canister: int, subnet: str | None = None) -> str:
        return fx.A if canister < 100 else fx.B

    def status(self, endpoint=None, *, subnet=None) -> dict:
        return {"finalized_height": 10}

    def submit_call(self, canister, method, arg=None, *, subnet=None) -> bytes:
        with self.lock:
            self.calls += 1
            k = self.calls
        if k == self.bug_at:
            raise RuntimeError("a bug in a submitter")
        message_id = k.to_bytes(32, "big")
        if k % 4 == 0:
            raise IngressPoolFull("the pool is full")
        if k % 4 in (1, 2):
            with self.lock:
                self.pooled[message_id] = False
        if k % 4 in (2, 3):
            raise SubmissionUncertain("no node confirmed it", message_id)
        return message_id

    def request_statuses(self, message_ids, canister_id, *, subnet=None) -> dict:
        certificate = types.SimpleNamespace(height=12)
        statuses = {}
        with self.lock:
            for message_id in message_ids:
                answered = self.pooled.get(message_id)
                statuses[message_id] = types.SimpleNamespace(status="replied" if answered else "unknown",
                                                             certificate=certificate, reject_code=None)
                if answered is False:
                    self.pooled[message_id] = True   # replied at the next poll
        return statuses

    def query_call(self, canister, method, arg=None) -> dict:
        if self.fail_stats:
            raise ReplicaError("the testnet is gone")
        return {"relayed": 0, "echoed": 0, "replied": 0, "rejected": 0, "violations": 0, "rejected_by_code": {}}


OPTIONS = LoadOptions(rate=100, duration_s=0.4, drain_s=5, submitters=2)


@pytest.fixture(autouse=True)
def short_grace(monkeypatch):
    """Calls no node confirmed are waited for a second, not five."""
    monkeypatch.setattr(load, "UNCONFIRMED_GRACE_S", 1.0)


def test_every_offered_call_is_counted_once_and_unconfirmed_ones_hold_the_drain_briefly():
    report = run_load(ScriptedAgent(), [fx.A, fx.B], OPTIONS, canisters=CANISTERS)
    assert report.offered >= 30
    assert report.offered == report.submitted + sum(report.refused.values()) + sum(report.not_submitted.values())
    taken = report.offered - report.not_submitted.get(CLIENT_LIMIT, 0)   # calls that reached the agent
    assert report.refused == {"pool_full": taken // 4}
    assert report.not_submitted.get(NOT_CONFIRMED, 0) == (taken + 1) // 4   # k % 4 == 3: never seen
    assert report.submitted == report.answered == report.replied == (taken + 3) // 4 + (taken + 2) // 4
    assert report.lost == 0 and 1.0 <= report.drain_s < 3.0   # the never-seen calls held it for the grace
    assert report.error is None and report.ended_early is None


def test_an_error_reading_the_counters_ends_the_run_with_the_report_so_far():
    with pytest.raises(LoadFailed, match="counters could not be read") as failed:
        run_load(ScriptedAgent(fail_stats=True), [fx.A, fx.B], OPTIONS, canisters=CANISTERS)
    report = failed.value.report
    assert report is not None and report.offered >= 30 and report.replied > 0
    assert "the testnet is gone" in report.error


def test_a_bug_in_a_submitter_stops_the_offered_load_and_is_reported():
    with pytest.raises(LoadFailed, match="RuntimeError: a bug in a submitter") as failed:
        run_load(ScriptedAgent(bug_at=5), [fx.A, fx.B], LoadOptions(rate=100, duration_s=5, drain_s=5),
                 canisters=CANISTERS)
    report = failed.value.report
    assert report.offered < 100, "the offered load went on after the failure"


def test_the_cli_prints_the_report_and_the_error_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPLICA_HOME", str(tmp_path / "home"))

    class Agent(ScriptedAgent):
        registry = fx.registry()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(http_endpoints, "agent_for_testnet", lambda directory, key: Agent(fail_stats=True))
    monkeypatch.setattr(load, "install_load_canisters", lambda agent, subnets, per_subnet: CANISTERS)
    code = main(["load", "--dir", str(tmp_path / "net"), "--rate", "50", "--duration", "0.3", "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    report = json.loads(out.strip().splitlines()[-1])
    assert report["offered"] >= 10 and "the testnet is gone" in report["error"]
    assert "replica load: LoadFailed" in err
