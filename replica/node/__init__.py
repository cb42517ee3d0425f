"""One replica node: its state manager, pools, block execution and XNet endpoint and client.

* ``replica_node``  ``ReplicaNode`` (and its ``NodeConfig``, ``RegistryHolder``)
* ``batch_processor``  the one block → batch → ``execute_round`` → commit step (the audit's replay API)
* ``http_api``      the node's ingress HTTP API server (``read_state``: its path rules and
  certificates; its refusals are ``replica.client.refusals``, shared with the agent)
"""
