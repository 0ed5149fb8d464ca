"""``hailq bench``: throughput and latency of hailq beside the raw driver on the same machine.

Each figure is the median of several runs and is printed beside the same
cycle done with the raw driver and minimal SQL at the same durability, so a
noisy machine shows up in both columns and the ratio stays meaningful.
"""
