"""The demos: ``replica demo`` (``live_demo``: a testnet, the example apps installed through the
ingress API, signed traffic, certified answers, an audit) and ``replica simulate``
(``simulate``: the same apps in the hostile-network simulation); ``example_apps`` installs
the apps as a user would."""
