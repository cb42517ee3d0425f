"""The plugin's fixtures for this directory when the package's ``pytest11`` entry point is not
installed yet (an editable install made before the entry point existed lacks it); once it
is, pytest loads the plugin itself and this file adds nothing."""

from importlib.metadata import entry_points

if not any(ep.value == "replica.testing.pytest_plugin" for ep in entry_points(group="pytest11")):
    from replica.testing.pytest_plugin import (  # noqa: F401 - fixtures and hooks for this directory
        live_testnet, pytest_configure, pytest_runtest_makereport, replica_seed, testnet,
    )
