"""Watching a running testnet from outside, through its ingress APIs and files.

* ``stream_status``  each subnet's certified streams and the nodes' metrics (``replica testnet status``)
* ``status_page``    the same as a live web page
* ``trace`` + ``call_events`` + ``trace_source``  one call's path across subnets (``replica trace``)
"""
