"""Example canister apps written with ``replica.sdk``: counter, ping-pong, ledger, and a
deliberately nondeterministic canister for determinism audits."""
