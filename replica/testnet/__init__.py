"""Running subnets: in one process for tests, as processes for a local testnet, simulated.

* ``subnet``                a subnet's nodes in one process, the consensus stub between them
* ``local``                 several subnets in one process over real gRPC (``LocalTestnet``)
* ``launcher``              the testnet directory, one process per subnet, supervision
* ``lifecycle``             ``replica testnet up | status | logs | down``: the testnet in the background
* ``subnet_process``        the entry point of one subnet process
* ``http_endpoints``        a subnet's nodes' ingress HTTP APIs, and ``agent_for_testnet``
* ``simulation``            in-process subnets over a deliberately hostile network, no crypto
* ``workload``              seeded multi-subnet runs generated with the simulation
* ``recording``             what a testnet or a simulation recorded → the audit's run log
* ``naming``                the subnet naming scheme (``subnet-<i>``)
* ``live_demo``             ``replica demo``: a client of ``up`` (traffic, certified answers, supply, audit)
* ``demo``                  ``replica simulate``: the same apps in the simulation
"""
