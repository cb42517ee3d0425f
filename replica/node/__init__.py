"""One replica node: its state manager, pools, block execution and XNet endpoint and client.

* ``replica_node``  ``ReplicaNode`` (and its ``NodeConfig``, ``RegistryHolder``)
* ``http_api``      the node's ingress HTTP API server (``read_state``: its path rules and
  certificates; ``api_errors``: its refusals)
"""
