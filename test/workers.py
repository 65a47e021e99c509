"""ROS domains of the test run's pytest-xdist workers (importable as ``workers``).

``make test`` runs the suite on several workers. Each worker's in-process nodes use a domain
of their own, ROS_DOMAIN_ID_BASE (the Makefile's ROS_DOMAIN_ID, default 77) plus the worker's
index, and each worker draws private domains from its own share of 30..101, so that one
worker's graph never sees another's.
"""

from __future__ import annotations

import os
import random

#: The private domains (ROS allows 0..232; above 101 their ports may clash with ephemeral ones).
PRIVATE_DOMAINS = range(30, 102)


def worker_index() -> int:
    """0, 1, ... for workers gw0, gw1, ...; 0 without xdist."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])


def worker_count() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def base_domain() -> int:
    return int(os.environ.get("ROS_DOMAIN_ID_BASE", os.environ.get("ROS_DOMAIN_ID", "77")))


def worker_domain() -> int:
    """This worker's domain for the in-process nodes."""
    return base_domain() + worker_index()


def private_domain() -> int:
    """A random domain of this worker's share, none of the workers' own domains."""
    count, index = worker_count(), worker_index()
    own = range(base_domain(), base_domain() + count)
    return random.choice([d for d in PRIVATE_DOMAINS if d % count == index % count and d not in own])


def set_worker_domain() -> None:
    """Set ROS_DOMAIN_ID to this worker's domain (before anything reads it)."""
    os.environ.setdefault("ROS_DOMAIN_ID_BASE", os.environ.get("ROS_DOMAIN_ID", "77"))
    os.environ["ROS_DOMAIN_ID"] = str(worker_domain())


def first_blocks(count: int, workers: int) -> list:
    """Sizes of the contiguous blocks of ``count`` tests that pytest-xdist's worksteal
    scheduler hands its ``workers`` idle workers first (each takes the pending tests divided
    by the workers still to serve)."""
    sizes, left = [], count
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes
