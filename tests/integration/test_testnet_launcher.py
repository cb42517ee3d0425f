"""``replica testnet``: one process per subnet on 127.0.0.1, demo traffic across them,
then settle and check the ledgers' supply."""

from __future__ import annotations

import io
import json

import pytest

from consensus_stub.registry import decode_registry
from replica import testnet as tn
from replica.audit.run_log import load_run_log

pytestmark = pytest.mark.timeout(180)


def test_two_subnet_processes_exchange_traffic_and_settle(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 2, 2, seed=b"launcher-test-seed-of-32-bytes!!", tick_s=0.1)
    out = io.StringIO()
    assert tn.launch(layout.root, duration_s=2.0, settle_timeout_s=60, stream=out) == 0, out.getvalue()
    assert "invariant holds" in out.getvalue()
    statuses = {s: json.loads(layout.status(s).read_text()) for s in ("subnet-0", "subnet-1")}
    for status in statuses.values():
        assert status["height"] > 0 and status["certified_height"] == status["height"]
        assert status["xnet_inducted"] > 0 and status["critical_errors"] == 0
    registry = decode_registry(layout.registry.read_bytes())
    assert all(n.xnet_address.startswith("127.0.0.1:") for n in registry.latest().nodes)
    assert layout.blocks("subnet-0").stat().st_size > 0
    # the run is recorded for a determinism audit (and it replays to the live hashes)
    assert f"replica audit {layout.run}" in out.getvalue()
    run = load_run_log(layout.run)
    assert run.subnet_ids() == ("subnet-0", "subnet-1")
    assert run.subnet("subnet-0").height >= statuses["subnet-0"]["height"]
    with pytest.raises(tn.TestnetError):
        tn.create_testnet(layout.root, 2, 2, seed=b"launcher-test-seed-of-32-bytes!!")


def test_a_directory_without_a_testnet_is_refused(tmp_path):
    with pytest.raises(tn.TestnetError):
        tn.launch(tmp_path, duration_s=0)
    assert not tn.TestnetLayout(tmp_path).manifest.exists()
