"""Several nodes: the sim's node flags, and the one restart path restarting every node from the head."""

from __future__ import annotations

import argparse

import pytest

from eagle3_tui.sim.nodes import check_flags, parse_addr


def ns(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"nnodes": 1, "node_rank": 0, "dist_init_addr": None, **kw})


def test_sim_node_flags_are_checked_in_one_sentence() -> None:
    assert parse_addr("10.0.0.1:5000") == ("10.0.0.1", 5000) and parse_addr("[::1]:5000") == ("::1", 5000)
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_addr("10.0.0.1")
    assert check_flags(ns()) is None and check_flags(ns(nnodes=2, node_rank=1, dist_init_addr="h:1")) is None
    assert check_flags(ns(nnodes=2, node_rank=2, dist_init_addr="h:1")) == "--node-rank 2 is not within --nnodes 2"
    assert check_flags(ns(nnodes=2)) == "--dist-init-addr HOST:PORT is required with --nnodes > 1"
    assert check_flags(ns(nnodes=2, dist_init_addr="h:99999")) == "--dist-init-addr 'h:99999' is not HOST:PORT"
