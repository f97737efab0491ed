"""Privatize: the mechanisms, the partitioning of the graph and the partitions' privatization, in memory or through partitioned files.

The modules are imported by their full path; this package imports nothing."""
