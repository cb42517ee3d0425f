"""One naming scheme for the subnets of every testnet, simulation and generated run."""

from __future__ import annotations

__all__ = ["subnet_name", "subnet_names"]


def subnet_name(position: int) -> str:
    """``subnet-<position>``, counting from 0."""
    return f"subnet-{position}"


def subnet_names(count: int) -> list[str]:
    return [subnet_name(i) for i in range(count)]
