"""Example canister apps written with ``replica.sdk``: counter, ping-pong, ledger, treasury
(payouts through the ledger, across subnets; tested with ``replica.testing``), and a
deliberately nondeterministic canister for determinism audits."""
