"""Subnets whose nodes share one process.

* ``subnet``      a subnet's ``replica.node.node.Node``s agreeing on the in-process network
                  (``consensus_stub.agreement.network``): what ``replica.testing`` runs
* ``http_apis``   the ingress HTTP APIs of such a subnet's nodes
* ``local``       several such subnets in one process, XNet over real gRPC (``LocalTestnet``)
* ``simulation``  subnets over a deliberately hostile network, batches without blocks or crypto
* ``workload``    seeded multi-subnet runs generated with the simulation, for audits
"""
