"""``replica load``: open-loop cross-subnet load through the agent (``load``), its report
(``load_report``) and the canister it installs (``load_canister``)."""
