"""Canister ids on the ``replica`` command line: typed as textual principals or decimal ids,
refused with what was wrong (a typo: the checksum), and printed as principals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from replica.cli import build_parser, main
from replica.cli.call import _print_dry_run
from replica.execution.dry_run import DryRunResult, OutgoingCall
from replica.ic.textual_ids import canister_text
from state_manager.messages import MANAGEMENT_CANISTER_ID

COUNTER = 1000
TEXT = canister_text(COUNTER)                      # kqtw5-...-cai
TYPO = TEXT[:7] + ("a" if TEXT[7] != "a" else "b") + TEXT[8:]   # one character changed, mid-text

#: Every argument that names a canister, as ``(argv with X for the canister, attribute)``.
COMMANDS = [
    (["call", "X", "get"], "canister"),
    (["request-status", "00", "X"], "canister"),
    (["canister", "install", "m.py:C", "--canister", "X"], "canister"),
    (["canister", "logs", "X"], "canister_id"),
    (["testnet", "migrate", "X", "--to", "subnet-1"], "canister"),
    (["testnet", "registry", "route", "X", "X", "--to", "subnet-1"], "start"),
]


def _parse(argv: list[str], name: str):
    return getattr(build_parser().parse_args(argv), name)


@pytest.mark.parametrize("argv, attribute", COMMANDS)
def test_a_canister_is_named_by_its_principal_or_its_decimal_id(argv, attribute):
    def named(value: str) -> int:
        return _parse([value if a == "X" else a for a in argv], attribute)

    assert named(TEXT) == named(TEXT.upper()) == named(str(COUNTER)) == COUNTER
    assert named("aaaaa-aa") == named(str(MANAGEMENT_CANISTER_ID)) == MANAGEMENT_CANISTER_ID


@pytest.mark.parametrize("argv, attribute", COMMANDS)
def test_a_mistyped_principal_is_refused_with_the_checksum_message(argv, attribute, capsys):
    assert TYPO != TEXT and len(TYPO) == len(TEXT)
    with pytest.raises(SystemExit) as exited:
        main([TYPO if a == "X" else a for a in argv])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "PrincipalChecksumMismatch" in error and "the checksum does not match" in error and TYPO in error


@pytest.mark.parametrize("bad, words", [
    ("2vxsx-fae", "is not a canister id"),                    # the anonymous principal: not a canister
    ("counter", "or a decimal number"),
    ("-1", "is not a u64"),
    (str(1 << 64), "is not a u64"),
])
def test_other_refusals_say_what_was_wrong(bad, words, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["call", bad, "get"])
    assert exited.value.code == 2 and words in capsys.readouterr().err


def test_the_command_exits_non_zero_on_a_typo_before_reaching_any_testnet(tmp_path):
    done = subprocess.run([sys.executable, "-m", "replica.cli", "call", TYPO, "get", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "the checksum does not match (a typo?)" in done.stderr


def test_a_dry_runs_calls_name_their_receivers_by_principal(capsys):
    result = DryRunResult(height=3, status="waiting", reply=None, reject_code=None, reject_message=None,
                          instructions=10, limit_exceeded=False,
                          calls=(OutgoingCall(COUNTER, "get", b"\x90", 0),), changed_paths=(), more_paths=0)
    _print_dry_run(result, as_json=True)
    assert json.loads(capsys.readouterr().out)["calls"][0]["receiver"] == TEXT
    _print_dry_run(result, as_json=False)
    assert f"would call {TEXT}.get(" in capsys.readouterr().out
