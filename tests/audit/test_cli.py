"""``replica audit`` usage errors and ``replica replay-one`` (no Spark needed for either)."""

from __future__ import annotations

import pytest

from replica.audit.run_log import write_run_log
from replica.cli import main

from .runs import recorded_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("run")
    write_run_log(recorded_run(ticks=5, checkpoint_interval=2), directory)
    return str(directory)


def test_audit_needs_exactly_one_input(capsys, tmp_path):
    assert main(["audit"]) == 2
    assert main(["audit", str(tmp_path), "--generate"]) == 2
    assert main(["audit", str(tmp_path / "missing")]) == 2
    assert "not a recorded run" in capsys.readouterr().err


def test_bad_fault_spec_is_a_usage_error():
    with pytest.raises(SystemExit) as exc:
        main(["audit", "x", "--fault", "7:melt@3"])
    assert exc.value.code == 2


def test_replay_one_agrees_with_the_live_run(run_dir, capsys):
    assert main(["replay-one", run_dir, "--subnet", "subnet-a", "--perturbation", "checkpoint@2+shuffle:4"]) == 0
    out = capsys.readouterr().out
    assert "live: DIFFERS" not in out and out.count("live: same") == 4


def test_replay_one_shows_the_differing_paths(run_dir, capsys):
    code = main(["replay-one", run_dir, "--subnet", "subnet-a", "--perturbation", "fault:flip@3:0",
                 "--against", "hashseed:3", "--until", "4"])
    out = capsys.readouterr().out
    assert code == 1
    assert "first differ at height 3" in out and "/canister_state/1/stable/value" in out
