"""Benchmark: the canister sandbox — metering overhead, trap latency, hazards.

1. ``metering_overhead_apps``: CPU time of ``execute_round`` for the example apps' traffic
   (counter increments, ledger transfers, ping-pong rounds, treasury payouts), with the apps
   installed from source (sandboxed and metered) ÷ the same classes installed as builtin
   classes (plain Python, no meter). Target ≤ 1.3.
2. ``metering_overhead_cpu``: the same ratio for a CPU-heavy canister (loops, dict and string
   work: counting keys built with f-strings, upper-casing, joining, splitting, indexing,
   sorting, a checksum) called directly. Target ≤ 2.0. ``instructions_per_s``: the metered
   rate of that canister (instructions it was charged ÷ CPU seconds).
   ``metering_overhead_arith``: the worst case, a tight integer loop (a checksum over a
   string: one multiply, add and modulo per character), where the charge per iteration and
   the int checks are most of the work.
3. ``settrace_overhead_cpu``: the second design, for comparison — the same CPU-heavy method,
   unsandboxed, counted by a ``sys.settrace`` hook with ``f_trace_opcodes`` (one call per
   executed bytecode) instead of by instrumented code.
4. ``spin_trap_s``: from submitting a call whose method loops forever to its reject, at the
   default update limit, in a deterministic ``Testnet``. Target ≤ 5.
5. ``hazards_survived``: of the hazards of issue 24 (and others), how many are answered with
   a reject or refused at install while a counter canister keeps answering afterwards.
6. The cost of a sandbox process per node (as the IC's canister sandbox): ``sandbox_ipc_round_trip_us``
   is one round trip of a message-sized payload over a pipe to a child process — the least
   such a design adds to every message (the IC's sandbox also crosses for every system call)
   — beside ``message_execution_us``, the metered CPU time of one message of the apps'
   traffic; ``sandbox_process_overhead_apps`` is their ratio ((execution + IPC) ÷ execution).

    python benchmarks/execution.py [--messages 300] [--cpu-calls 20]

Last line: one JSON object (with ``floor_us``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from typing import Any, Callable

from floor import in_floor_units, measure_floor_us

from examples.counter import Counter
from examples.ledger import Ledger
from examples.ping_pong import PingPong
from message_routing.limits import DEFAULT
from replica.execution import ExecutionEnvironment, install_canister
from replica.execution.environment import execute_canister_messages
from replica.execution.management import install_code
from replica.execution.source_modules import source_module_hash
from replica.progress import Progress
from replica.sdk import encode_value
from replica.testing import Testnet
from replica.testing.canister_source import canister_module
from state_manager.canister_state import CanisterState
from state_manager.messages import Ingress
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import CanisterIdRange, CanisterMigrations, NetworkTopology, RoutingTable

TARGETS = {"metering_overhead_apps": 1.3, "metering_overhead_cpu": 2.0, "spin_trap_s": 5}
USER = b"\x07" * 29 + b"\x02"

CPU_CANISTER = '''
from replica.sdk import Canister, update

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def checksum(text):
    total = 0
    for ch in text:
        total = (total * 31 + ord(ch)) % 1000003
    return total


class Cpu(Canister):
    @update
    def work(self, n):
        counts = {}
        lines = []
        for i in range(n):
            word = WORDS[i % len(WORDS)]
            key = f"{word}-{i % 97}"
            counts[key] = counts.get(key, 0) + 1
            if i % 5 == 0:
                lines.append(word.upper() + ":" + str(i))
        text = " ".join(lines)
        index = {}
        for position, token in enumerate(text.split()):
            index.setdefault(token[:3], []).append(position)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        return (len(counts), len(index), tuple(k for k, _ in top), checksum(text[:200]))

    @update
    def arith(self, n):
        return checksum("abcdefghij" * (n // 10))

    @update
    def spin(self):
        x = 0
        while True:
            x += 1
'''


def _state() -> ReplicatedState:
    table = RoutingTable(((CanisterIdRange(0, 999), "subnet-a"),))
    state = ReplicatedState("subnet-a", NetworkTopology(1, table, CanisterMigrations(())))
    state.metadata.batch_time = 10**9
    return state


def _ingress(n: int, receiver: int, method: str, arg: Any) -> Ingress:
    return Ingress(USER, receiver, method, encode_value(arg), n.to_bytes(32, "big"), 50 * 10**9)


def _plain_class(source: str, name: str, module_name: str) -> type:
    """``source`` run as a plain Python module (no sandbox): the unmetered baseline."""
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module
    exec(compile(source, module_name, "exec"), module.__dict__)
    return getattr(module, name)


# -- 1. the example apps' traffic --------------------------------------------------------------

def _apps_setup(sandboxed: bool) -> tuple[ExecutionEnvironment, ReplicatedState, dict[str, int]]:
    classes = [Counter, Ledger, PingPong]
    env = ExecutionEnvironment([] if sandboxed else classes)
    state = _state()
    ids: dict[str, int] = {}
    args = {"Counter": 0, "Ledger": {"balances": tuple((f"acct{i}", 10**9) for i in range(50))
                                      + ((USER.hex(), 10**9),)}, "PingPong": None}
    for position, cls in enumerate(classes * 2):
        cid = position
        arg = args[cls.__name__] if position < 3 else args[cls.__name__]
        if sandboxed:
            source, class_name = canister_module(cls)
            state.add_canister(CanisterState(cid, "", b"", controller=USER))
            install_code(state, env.modules, USER, cid, "install", source, class_name, arg)
        else:
            install_canister(state, cid, cls, arg, controller=USER)
        ids.setdefault(cls.__name__, cid)
    return env, state, ids


def _apps_traffic(env: ExecutionEnvironment, state: ReplicatedState, ids: dict[str, int], messages: int) -> float:
    """CPU seconds of executing ``messages`` ingress messages (counter, ledger, ping-pong)."""
    from message_routing.valid_set_rule import induct_ingress

    limits = DEFAULT.with_(queue_capacity=10_000)
    for n in range(messages):
        kind = n % 3
        if kind == 0:
            ingress = _ingress(n, ids["Counter"], "increment", 1)
        elif kind == 1:
            ingress = _ingress(n, ids["Ledger"], "transfer_local", {"from": f"acct{n % 50}", "to": f"acct{(n + 1) % 50}",
                                                                    "amount": 1})
        else:
            ingress = _ingress(n, ids["PingPong"], "pong", n)
        induct_ingress(state, ingress, limits)
    started = time.process_time()
    for cid in sorted(state.canisters):
        while state.canisters[cid].queues.has_input():
            execute_canister_messages(state, env, cid, 10_000, limits)
    return time.process_time() - started


def metering_overhead_apps(messages: int, progress: Progress) -> tuple[float, float]:
    """(metered ÷ plain CPU time, metered CPU microseconds per message): medians of 5."""
    ratios, per_message = [], []
    for attempt in range(5):
        plain = _apps_traffic(*_apps_setup(False), messages)
        metered = _apps_traffic(*_apps_setup(True), messages)
        ratios.append(metered / plain)
        per_message.append(metered / messages * 1e6)
        progress.update(f"apps: attempt {attempt + 1}/5, ratio {ratios[-1]:.2f}")
    return sorted(ratios)[len(ratios) // 2], sorted(per_message)[len(per_message) // 2]


# -- 2. and 3. the CPU-heavy canister ------------------------------------------------------------

def _cpu_call(env: ExecutionEnvironment, state: ReplicatedState, cid: int, n: int, counter: list[int],
              method: str = "work") -> float:
    from replica.execution.message_execution import execute_ingress

    counter[0] += 1
    ingress = _ingress(10**6 + counter[0], cid, method, n)
    started = time.process_time()
    used = execute_ingress(state, state.canisters[cid], env.resolve(state.canisters[cid]), ingress, DEFAULT)
    elapsed = time.process_time() - started
    counter.append(used)
    return elapsed


def _cpu_setups() -> tuple[tuple, tuple]:
    metered_env, metered_state = ExecutionEnvironment(), _state()
    metered_state.add_canister(CanisterState(0, "", b"", controller=USER))
    install_code(metered_state, metered_env.modules, USER, 0, "install", CPU_CANISTER, "Cpu")
    plain_cls = _plain_class(CPU_CANISTER, "Cpu", "bench_cpu_canister")
    plain_env, plain_state = ExecutionEnvironment([plain_cls]), _state()
    install_canister(plain_state, 0, plain_cls, controller=USER)
    return (metered_env, metered_state), (plain_env, plain_state)


def _settrace_run(cls: type, n: int, limit: int) -> float:
    """The second design: count bytecodes with a trace hook; CPU seconds of one call."""
    left = [limit]

    def tracer(frame: Any, event: str, arg: Any) -> Callable | None:
        frame.f_trace_opcodes = True
        if event == "opcode":
            left[0] -= 1
            if left[0] < 0:
                raise RuntimeError("instruction limit")
        return tracer

    instance = cls.__new__(cls)
    started = time.process_time()
    sys.settrace(tracer)
    try:
        cls.work(instance, n)
    finally:
        sys.settrace(None)
    return time.process_time() - started


def cpu_measurements(calls: int, n: int, progress: Progress) -> dict[str, float]:
    (metered_env, metered_state), (plain_env, plain_state) = _cpu_setups()
    metered_counter: list[int] = [0]
    plain_counter: list[int] = [0]
    metered = plain = metered_arith = plain_arith = 0.0
    for call in range(calls):
        plain += _cpu_call(plain_env, plain_state, 0, n, plain_counter)
        metered += _cpu_call(metered_env, metered_state, 0, n, metered_counter)
        plain_arith += _cpu_call(plain_env, plain_state, 0, n, [0], "arith")
        metered_arith += _cpu_call(metered_env, metered_state, 0, n, [0], "arith")
        progress.update(f"cpu canister: call {call + 1}/{calls}")
    instructions = sum(metered_counter[1:])
    cls = plain_env.resolve(plain_state.canisters[0])
    traced = sum(_settrace_run(cls, n, 10**12) for _ in range(max(1, calls // 4)))
    traced_plain = sum(_plain_direct(cls, n) for _ in range(max(1, calls // 4)))
    return {
        "metering_overhead_cpu": round(metered / plain, 3),
        "metering_overhead_arith": round(metered_arith / plain_arith, 3),
        "instructions_per_s": round(instructions / metered),
        "instructions_per_cpu_call": instructions // calls,
        "settrace_overhead_cpu": round(traced / traced_plain, 3),
    }


def _plain_direct(cls: type, n: int) -> float:
    instance = cls.__new__(cls)
    started = time.process_time()
    cls.work(instance, n)
    return time.process_time() - started


# -- 4. and 5. on a testnet ------------------------------------------------------------------------

HAZARDS = {
    "endless loop": "    @update\n    def m(self):\n        x = 0\n        while True:\n            x += 1\n",
    "raise SystemExit": "    @update\n    def m(self):\n        raise SystemExit(3)\n",
    "os._exit": "    @update\n    def m(self):\n        import os\n        os._exit(9)\n",
    "set iteration": "    @update\n    def m(self):\n        self.stable['o'] = tuple(set(['alpha', 'bravo', 'charlie']))\n        return self.stable['o']\n",
    "random": "    @update\n    def m(self):\n        import random\n        self.stable['r'] = str(random.random())\n",
    "time": "    @update\n    def m(self):\n        import time\n        self.stable['t'] = str(time.time())\n",
    "bytearray 2 GiB": "    @update\n    def m(self):\n        return len(bytearray(2**31))\n",
    "read host files": "    @update\n    def m(self):\n        return [open(p).read() for p in ('/etc/hostname',)]\n",
    "unbounded recursion": "    @update\n    def m(self):\n        return self.m()\n",
    "huge power": "    @update\n    def m(self):\n        return (10 ** 10 ** 9) % 7\n",
    "string doubling": "    @update\n    def m(self):\n        s = 'ab'\n        for i in range(64):\n            s = s + s\n",
    "loop in finally": "    @update\n    def m(self):\n        try:\n            while True:\n                pass\n        finally:\n            while True:\n                pass\n",
    "class mutation": "    @update\n    def m(self):\n        H.shared = 1\n",
    "escape via type()": "    @update\n    def m(self):\n        return type(type(self))('X', (), {})\n",
    "dunder escape": "    @update\n    def m(self):\n        return self.__class__.__subclasses__()\n",
}


def _echo(connection: Any) -> None:
    while True:
        message = connection.recv_bytes()
        if not message:
            return
        connection.send_bytes(message)


def ipc_round_trip_us(rounds: int = 2000) -> float:
    """The cost a sandbox process per node would add to every message at least: one round
    trip over a pipe to a child process with a message-sized payload (an ingress message
    and its reply), median of batches."""
    import multiprocessing
    import statistics

    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=_echo, args=(child,), daemon=True)
    process.start()
    payload = encode_value({"from": "acct1", "to": "acct2", "amount": 1}) * 4
    try:
        for _ in range(200):
            parent.send_bytes(payload)
            parent.recv_bytes()
        samples = []
        for _ in range(rounds // 100):
            started = time.perf_counter()
            for _ in range(100):
                parent.send_bytes(payload)
                parent.recv_bytes()
            samples.append((time.perf_counter() - started) / 100 * 1e6)
        return statistics.median(samples)
    finally:
        parent.send_bytes(b"")
        process.join(5)


def spin_trap_s() -> float:
    with Testnet(subnets=1) as net:
        cid = net.install(CPU_CANISTER, class_name="Cpu")
        started = time.perf_counter()
        try:
            net.update_call(cid, "spin")
        except Exception as exc:  # noqa: BLE001 - the reject is what is timed
            if "instruction limit" not in str(exc):
                raise
        return time.perf_counter() - started


def hazards_survived(progress: Progress) -> tuple[int, int]:
    survived = 0
    with Testnet(subnets=1) as net:
        counter = net.install(Counter)
        for position, (name, body) in enumerate(HAZARDS.items()):
            source = "from replica.sdk import Canister, update\n\nclass H(Canister):\n" + body
            answered = False
            try:
                cid = net.install(source, class_name="H")
                net.update_call(cid, "m")
                answered = name == "set iteration"   # the one hazard that now simply works, in order
            except Exception as exc:  # noqa: BLE001 - a reject or refusal is the expected answer
                answered = "CANISTER_ERROR" in str(exc) or "exceeded" in str(exc)
            if answered and net.update_call(counter, "increment", 1) == position + 1:
                survived += 1
            progress.update(f"hazards: {name}")
    return survived, len(HAZARDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--cpu-calls", type=int, default=20)
    parser.add_argument("--cpu-n", type=int, default=3000)
    args = parser.parse_args()
    progress = Progress("execution benchmark", 5)
    floor_us = measure_floor_us()
    progress.update("floor measured", 1)
    apps, message_us = metering_overhead_apps(args.messages, progress)
    ipc_us = ipc_round_trip_us()
    progress.update("apps measured", 2)
    cpu = cpu_measurements(args.cpu_calls, args.cpu_n, progress)
    progress.update("cpu canister measured", 3)
    spin = spin_trap_s()
    progress.update("spin trap measured", 4)
    survived, hazards = hazards_survived(progress)
    progress.finish(f"{survived}/{hazards} hazards survived")
    result = {
        "metering_overhead_apps": round(apps, 3),
        "message_execution_us": round(message_us, 2),
        "sandbox_ipc_round_trip_us": round(ipc_us, 2),
        "sandbox_process_overhead_apps": round((message_us + ipc_us) / message_us, 2),
        **cpu,
        "spin_trap_s": round(spin, 2),
        "hazards_survived": survived,
        "hazards": hazards,
        "update_limit_instructions": DEFAULT.max_instructions_per_message,
        "spin_trap_floor_units": in_floor_units(spin * 1e6, floor_us),
        "targets": TARGETS,
        "floor_us": floor_us,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
