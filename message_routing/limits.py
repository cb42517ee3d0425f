"""Resource limits the state machine enforces, as one frozen value with two presets."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Limits", "DEFAULT", "MINIMAL"]

KiB = 1024
MiB = 1024 * KiB
SECOND_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Limits:
    #: Slots per canister queue, shared by messages and reserved response slots.
    queue_capacity: int
    #: Messages and bytes one outgoing stream may hold before routing holds messages back.
    max_stream_messages: int
    max_stream_bytes: int
    #: Largest inter-canister request payload (larger ones get a CANISTER_ERROR reject).
    max_inter_canister_payload_bytes: int
    #: Largest ingress message and the block payload budget (ingress + XNet).
    max_ingress_bytes: int
    max_block_payload_bytes: int
    #: Ingress messages may expire at most this far in the future.
    max_ingress_ttl_ns: int
    #: How long ``done`` ingress statuses are kept after their expiry.
    ingress_history_retention_ns: int
    #: Execution budget per round: messages over the whole subnet and per canister.
    max_messages_per_round: int
    max_messages_per_canister_per_round: int
    #: Largest XNet slice a payload may carry from one subnet (messages and bytes).
    max_slice_messages: int
    max_slice_bytes: int
    #: Subnet-wide byte budget of the bounded-wait messages in canister queues; beyond it
    #: the largest are shed (``message_routing.shedding``).
    bounded_wait_message_memory_capacity: int
    #: Instructions (``replica.execution.sandbox.meter`` defines the unit) one execution of
    #: a sandboxed canister may use: an update call, request or callback; a query; an
    #: install or upgrade (the module body plus ``init``/``post_upgrade``). Modelled on the
    #: IC's 40 B / 5 B / 300 B instructions, scaled by 1/400 (see the README).
    max_instructions_per_message: int = 100_000_000
    max_instructions_per_query: int = 12_500_000
    max_instructions_per_install: int = 750_000_000
    #: The round stops starting messages once its messages used this many instructions
    #: (the IC's 7 B per round and thread, scaled alike); a message started runs to its end.
    max_instructions_per_round: int = 17_500_000
    #: Bytes one execution may allocate, summed over its steps whose size an argument sets
    #: (``bytearray(n)``, ``x * n``, ``a + b``, ...), counted before each allocation.
    max_message_memory_bytes: int = 1024 * MiB
    #: A canister's stable state, in encoded bytes (key + value, ``sandbox.stable_view``).
    max_stable_state_bytes: int = 64 * MiB
    #: A canister's log (``state_manager.canister_log``): its records' sizes (text bytes plus
    #: 16 for index and time) sum to at most this; the oldest are dropped. The IC's 4 KiB.
    max_canister_log_bytes: int = 4 * KiB

    def with_(self, **changes) -> "Limits":
        return replace(self, **changes)


DEFAULT = Limits(
    queue_capacity=500,
    max_stream_messages=10_000,
    max_stream_bytes=10 * MiB,
    max_inter_canister_payload_bytes=2 * MiB,
    max_ingress_bytes=2 * MiB,
    max_block_payload_bytes=4 * MiB,
    max_ingress_ttl_ns=5 * 60 * SECOND_NS,
    ingress_history_retention_ns=5 * 60 * SECOND_NS,
    max_messages_per_round=20_000,
    max_messages_per_canister_per_round=1_000,
    max_slice_messages=10_000,
    max_slice_bytes=4 * MiB,
    bounded_wait_message_memory_capacity=256 * MiB,
    max_instructions_per_message=100_000_000,
    max_instructions_per_query=12_500_000,
    max_instructions_per_install=750_000_000,
    max_instructions_per_round=17_500_000,
    max_message_memory_bytes=1024 * MiB,
    max_stable_state_bytes=64 * MiB,
    max_canister_log_bytes=4 * KiB,
)

#: Tiny limits so tests hit every back-pressure path quickly.
MINIMAL = Limits(
    queue_capacity=4,
    max_stream_messages=3,
    max_stream_bytes=1 * KiB,
    max_inter_canister_payload_bytes=256,
    max_ingress_bytes=512,
    max_block_payload_bytes=4 * KiB,
    max_ingress_ttl_ns=60 * SECOND_NS,
    ingress_history_retention_ns=10 * SECOND_NS,
    max_messages_per_round=16,
    max_messages_per_canister_per_round=2,
    max_slice_messages=3,
    max_slice_bytes=2 * KiB,
    bounded_wait_message_memory_capacity=1 * KiB,
    max_instructions_per_message=2_000_000,
    max_instructions_per_query=500_000,
    max_instructions_per_install=10_000_000,
    max_instructions_per_round=1_000_000,
    max_message_memory_bytes=4 * MiB,
    max_stable_state_bytes=1 * MiB,
    max_canister_log_bytes=256,
)
