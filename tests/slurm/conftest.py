"""Fixtures of the Slurm suite: a private cluster (cluster.py) per test module.

The suite fails, not skips, when Slurm is missing: deploy/install-deps.sh installs
it, and a green `make test-slurm` must mean the cluster ran."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))

from cluster import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """munged + slurmctld + two slurmd (n1, n2), each node in its own network
    namespace; torn down after the module, whatever happened."""
    c = Cluster()
    c.start()
    try:
        yield c
    finally:
        c.close()
