"""A local Spark standalone cluster for trying and testing audits on a cluster.

``replica cluster up`` starts a standalone master and workers on 127.0.0.1 from the Spark
that ships inside the installed ``pyspark`` (its jars and launch scripts), ``status`` reports
them, ``down`` stops every process by the pid it recorded.

Modules, one job each:

* ``spark_home``  where pyspark's Spark is, and the environment its daemons run in
* ``launcher``    start, inspect and stop the master and the workers (pid files, logs)
* ``errors``      ``ClusterError``

It sits below ``audit`` (which only needs a ``spark://`` URL) and imports nothing of the
replica: a cluster is infrastructure, not part of the product's logic.
"""

from .errors import ClusterError
from .launcher import ClusterConfig, ClusterState, cluster_down, cluster_status, cluster_up

__all__ = ["ClusterError", "ClusterConfig", "ClusterState", "cluster_up", "cluster_status", "cluster_down"]
