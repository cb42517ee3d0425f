"""A local testnet as a directory: what it is made of, whoever runs it.

* ``launcher``        the directory's layout (``TestnetLayout``), ``create_testnet`` (registry,
                      secrets, genesis states with the example apps), the registry file's
                      updates, the manifest's process model, quiescence and supply checks
* ``naming``          the subnet naming scheme (``subnet-<i>``)
* ``recording``       what a testnet or a simulation recorded → the audit's run log
* ``fork``            a new testnet starting from a stopped one's recorded state at a height
* ``http_endpoints``  the nodes' ingress addresses, and ``agent_for_testnet``
* ``demo_traffic``    the demo user's traffic and app numbers (``DemoNode``: a node process's part)
* ``registry_status`` which registry version each node runs, from its status file
* ``migration``       a canister migration on a running testnet: new registry versions, then
                      the IC's sequence of management calls

Running it is ``replica.processes``; watching it ``replica.observe``; the node itself is
``replica.node``.
"""
