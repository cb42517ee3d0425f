"""The IC's own clients, pinned, as the project's tests and developers drive them.

* ``js/``: a small npm project pinning ``@dfinity/agent`` and its companions (exact versions,
  a committed lock file; ``make setup`` and ``make test`` run ``npm ci`` there), and the Node
  scripts the tests run: JSON on stdin, JSON on stdout.
* ``node``: running those scripts from Python, with time-outs, failing with the install command
  when Node or the packages are missing.
* ``values``: the IC's typed values (blobs, nats) written as JSON both sides read alike.
* ``blst_standin``: the ``blst`` module ``icp-py-core``'s certificate code imports.
* ``py_live``: ``icp-py-core`` against a running testnet (run by hand; see README.md).
"""
