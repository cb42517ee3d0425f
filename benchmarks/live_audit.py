"""A live determinism audit beside the testnet it follows (issue 26, part 1): ``replica audit --follow``.

1. A testnet of 2 subnets x 4 node processes at the default round time (``--round-ms``, 500),
   under ``replica load`` (``--rate`` calls/s for the whole measurement).
2. ``replica audit --follow`` on ``local[2]``, started with the testnet, with
   ``--replicas-per-subnet`` (64) replicas per subnet and one injected fault: replica 4
   (subnet-0) flips a byte of the first message of the batch of height ``H`` = the height when
   the audit starts + ``--fault-ahead`` (200: 100 s at the default round time, time for the
   audit to start Spark and catch up before ``H`` is executed).
3. ``status.json`` is read every 0.5 s for ``--seconds`` (240): ``lag_rounds_p50`` and
   ``lag_rounds_max`` are the audit's lag behind the testnet (the nodes' last executed height
   minus the audited one, the larger of the two subnets) over the samples after the audit
   first caught up (lag at most ``--caught-up``; ``caught_up`` false: it never did, and the
   samples are all those after its first micro-batch); ``detect_rounds`` is the testnet's
   height when the audit flagged the divergence minus ``H``. A first divergence flagged anywhere
   else than subnet-0 at ``H`` is a false (or misplaced) detection: the measurement stops there,
   ``detect_rounds`` is not given, ``error`` says what was flagged, and the benchmark exits 1.
4. The load stops, the testnet is brought down; the audit reports the whole run and exits
   (its verdict must be ``divergent``, first at ``H``; any other final verdict exits 1 as well). ``fork_s`` is ``benchmarks/fork.py``'s
   figure (a fork at height 5,000 of a recorded run), run as a subprocess after the testnet
   is down, when that benchmark exists (else ``null``); ``--skip-fork`` leaves it ``null``.

Run: ``python benchmarks/live_audit.py [--seconds 90] [--rate 20]``. Progress goes to stderr;
the last line is one JSON object with the keys above and ``floor_us``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from floor import measure_floor_us
from replica.processes import lifecycle

ROOT = Path(__file__).resolve().parents[1]
FAULTY_REPLICA = 4      # subnet-0 (4 mod 2), a shuffle replica
FAULTY_SUBNET = "subnet-0"


def _status(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _heights(directory: Path) -> dict[str, int]:
    return {r.subnet: r.height or 0 for r in lifecycle.status(directory)}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fork_s(skip: bool) -> tuple[float | None, str]:
    script = ROOT / "benchmarks" / "fork.py"
    if skip:
        return None, "skipped (--skip-fork)"
    if not script.exists():
        return None, "benchmarks/fork.py does not exist yet"
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return None, f"benchmarks/fork.py failed ({done.returncode}): {done.stderr[-300:]}"
    return json.loads(lines[-1]).get("fork_s"), "benchmarks/fork.py"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=240.0, help="seconds of load while the audit follows")
    parser.add_argument("--rate", type=float, default=20.0, help="calls/s of replica load")
    parser.add_argument("--round-ms", type=int, default=500)
    parser.add_argument("--replicas-per-subnet", type=int, default=64)
    parser.add_argument("--fault-ahead", type=int, default=200, help="heights after the audit's start of the fault")
    parser.add_argument("--caught-up", type=int, default=10, help="lag (rounds) that counts as caught up")
    parser.add_argument("--skip-fork", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="replica-live-audit-bench-"))
    directory = work / "testnet"
    env = {k: v for k, v in os.environ.items() if k not in ("REPLICA_TESTNET",)}
    result: dict = {"replicas_per_subnet": args.replicas_per_subnet, "subnets": 2, "nodes": 4,
                    "round_ms": args.round_ms, "rate": args.rate}
    audit = load = None
    try:
        _say(f"testnet 2 x 4 in {directory}")
        lifecycle.up(directory, subnets=2, nodes=4, round_ms=args.round_ms, process_model="node", out=io.StringIO())
        fault_height = _heights(directory)["subnet-0"] + args.fault_ahead
        result["fault_height"] = fault_height
        _say(f"audit --follow, fault {FAULTY_REPLICA}:flip@{fault_height}; load at {args.rate} calls/s")
        out = open(work / "audit.out", "w")
        audit = subprocess.Popen(
            [sys.executable, "-m", "replica.cli", "audit", "--follow", "--dir", str(directory), "--master", "local[2]",
             "--replicas-per-subnet", str(args.replicas_per_subnet), "--fault", f"{FAULTY_REPLICA}:flip@{fault_height}",
             "--quiet"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        load = subprocess.Popen([sys.executable, "-m", "replica.cli", "load", "--dir", str(directory), "--rate",
                                 str(args.rate), "--duration", str(args.seconds + 1800), "--json"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        status_path = directory / "live-audit" / "status.json"
        samples: list[int] = []
        all_samples: list[int] = []
        caught_up_at = None
        started = time.monotonic()
        while True:
            if audit.poll() is not None:
                tail = (work / "audit.out").read_text()[-3000:]
                raise RuntimeError(f"the audit exited with {audit.returncode}: {tail}")
            status = _status(status_path) or {}
            lag = status.get("lag_rounds_max")
            if status.get("micro_batches") and lag is not None:
                all_samples.append(lag)
                if caught_up_at is None and lag <= args.caught_up:
                    caught_up_at = time.monotonic()
                    result["catch_up_s"] = round(caught_up_at - started, 1)
                    _say(f"caught up after {result['catch_up_s']} s")
                if caught_up_at is not None:
                    samples.append(lag)
            first = status.get("first_divergence")
            if first and "detected_height" not in result:
                result["detected_height"] = first["height"]
                result["detected_subnet"] = first["subnet"]
                _say(f"divergence flagged at {first}")
                if (first["subnet"], first["height"]) != (FAULTY_SUBNET, fault_height):
                    # detect_rounds of a detection that is not the fault would be a made-up figure
                    result["error"] = (f"the audit flagged {first['subnet']} at height {first['height']} "
                                       f"(replicas {first.get('replicas')}), not the injected fault "
                                       f"({FAULTY_SUBNET} at height {fault_height})")
                    break
                result["detect_rounds"] = first["detected_at"][first["subnet"]] - first["height"]
            elapsed = time.monotonic() - started
            if elapsed > args.seconds and ("detected_height" in result or elapsed > args.seconds + 600):
                break
            time.sleep(0.5)
        result["caught_up"] = caught_up_at is not None
        if not samples:   # never within --caught-up rounds: every sample after the first micro-batch
            samples = all_samples
        result["lag_samples"] = len(samples)
        result["lag_rounds_p50"] = statistics.median(samples) if samples else None
        result["lag_rounds_max"] = max(samples) if samples else None
        os.killpg(load.pid, signal.SIGINT)
        load.wait(300)
        load = None
        lifecycle.down(directory, out=io.StringIO())
        audit.wait(1200)
        report = json.loads((directory / "live-audit" / "report.json").read_text())
        result["final_verdict"] = report["verdict"]
        result["final_first_divergence"] = report["first_divergence"]
        result["final_heights"] = {s["subnet"]: s["batches"] for s in report["run"]["subnets"]}
        result["drilled_paths"] = len(((report["clusters"] or [{}])[0].get("drilldown") or {}).get("paths", []))
        result["micro_batches"] = report["environment"]["live"]["micro_batches"]
        audit = None
    finally:
        if load is not None and load.poll() is None:
            os.killpg(load.pid, signal.SIGKILL)
        if audit is not None and audit.poll() is None:
            os.killpg(audit.pid, signal.SIGTERM)
            audit.wait(120)
        lifecycle.down(directory, out=io.StringIO())
        if args.keep:
            _say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    fork_s, source = _fork_s(args.skip_fork)
    result["fork_s"] = fork_s
    result["fork_source"] = source
    result["floor_us"] = measure_floor_us()
    final = result.get("final_first_divergence") or {}
    if "error" not in result and (result.get("final_verdict") != "divergent"
                                  or (final.get("subnet"), final.get("height")) != (FAULTY_SUBNET, fault_height)):
        result["error"] = (f"the final report says {result.get('final_verdict')}, first divergence {final or None}, "
                           f"not the injected fault ({FAULTY_SUBNET} at height {fault_height})")
    print(json.dumps(result, sort_keys=True))
    if "error" in result:
        _say(f"FAILED: {result['error']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
