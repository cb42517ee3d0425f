"""Agreement among a subnet's nodes, as a protocol core without I/O.

    messages.py     the artifacts nodes exchange (proposals, notarization and finalization
                    shares, status, catch-up, ingress, certification shares): canonical
                    msgpack, strict decoders with typed errors
    signing.py      what a node signs with its node key, and checking peers' signatures
    interface.py    the protocol's surface: configuration, injected callables, outputs
    protocol.py     AgreementNode: one node's state machine, driven by on_message/on_timer
    catch_up.py     its part that answers a Status and takes a CatchUp
    restore.py      its part that keeps and re-sends its own artifacts, and restarts it
                    (from a finalized tail, or from a state-synced tip)
    certification.py  its part that aggregates certification shares into certifications
    divergence.py   who signed which state root per height: a diverged node, a stalled height
    candidate.py    a block the node holds above its finalized tip, and its verdict on it
    simulation.py   the nodes of a subnet on a simulated network with a seeded adversarial
                    schedule (delays, reordering, duplicates, losses, partitions, crashes)

Nothing here reads a clock, a socket, a file or the operating system's randomness; the
shell (a node process, or the simulation) drives ``AgreementNode`` and carries out its outputs.
"""
