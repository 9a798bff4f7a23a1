"""benchmarks/scale.py's sizes and its table: a column per size, the ratio of the largest to
the smallest, every row (the throughput ratio included) even when a size lacks a figure."""

from __future__ import annotations

import argparse

import pytest
from scale import ROWS, format_table, parse_size  # benchmarks/


@pytest.mark.parametrize("text, size", [("4", (2, 2)), ("16", (4, 4)), ("64", (16, 4)), ("8x4", (8, 4))])
def test_sizes_are_racks_of_four_or_given(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["6", "1x4", "2x0"])
def test_a_size_that_is_no_fabric_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)


def test_the_table_has_every_row_and_the_ratio_of_the_largest_size_to_the_smallest():
    runs = [{"hosts": 4, "deploy_s": 10.0, "tcp_ratio": 0.95}, {"hosts": 64, "deploy_s": 40.0, "tcp_ratio": 0.95}]
    lines = format_table(runs).splitlines()
    assert lines[0].split() == ["4", "hosts", "64", "hosts", "ratio", "64", "hosts", "/", "4", "hosts"]
    assert len(lines) == 1 + len(ROWS)
    deploy = next(line for line in lines if line.startswith("site.yml, first (s)"))
    assert deploy.split()[-3:] == ["10.0", "40.0", "4.00"]
    ratio = next(line for line in lines if line.startswith("throughput ratio, attached / before"))
    assert ratio.split()[-3:] == ["0.950", "0.950", "1.00"]
    missing = next(line for line in lines if line.startswith("ToR drain (s)"))
    assert missing.split()[-3:] == ["None", "None", "-"]
