"""One replica node: its state manager, pools, block execution and XNet endpoint and client.

* ``replica_node``  ``ReplicaNode`` (and its ``NodeConfig``, ``RegistryHolder``)
"""
