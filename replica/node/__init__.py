"""One replica node: the ``Node`` both drivers run, its parts, and the node process.

* ``node``             ``Node``: restore, the agreement's callbacks, execution, certification
                       shares, state-sync install, the ingress API's backend
* ``consensus_rules``  the block rules on a node's executed tip (empty successors above it)
* ``replica_node``     ``ReplicaNode``, the ``Node``'s base: state manager, pools, XNet endpoint
                       and client (and its ``NodeConfig``, ``RegistryHolder``)
* ``batch_processor``  the one block → batch → ``execute_round`` → commit step (the audit's replay API)
* ``storage``          what a node keeps, in files or in memory (``node_store``: record files;
                       ``checkpoints``); ``state_sync``: deciding, fetching, verifying, serving
* ``certification_health``  a node's divergence and certification stalls, said loudly (log,
                       ``/metrics``, status); ``faults``: the test knob that makes a node diverge
* ``process``          ``replica node run``: the node process, a thin shell (``testnet_dir``,
                       ``agreement_runner``, ``agreement_transport``, ``registry_file``, ``ports``,
                       ``process_config``)
* ``http_api``         the node's ingress HTTP API server (``read_state``: its path rules and
                       certificates; its refusals are ``replica.client.refusals``, shared with the agent)
"""
