"""A testnet directory run as processes on this machine.

* ``supervisor``      ``launch``: start every process, restart one that dies, publish addresses,
                      settle, stop, write the run log
* ``process_models``  one class per process model: a process per node (the default) or per subnet
* ``lifecycle``       ``replica testnet up | status | logs | down | kill-node | restart-node``
* ``chaos``           seeded kills of node processes, never more than f of a subnet down
* ``subnet_process``  the entry point of one subnet process (its nodes in one process)
"""
