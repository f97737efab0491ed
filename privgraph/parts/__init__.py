"""The graph's parts and the map over them, shared by every stage that works per partition: the
partition of the nodes from the public edges (:mod:`privgraph.parts.partition`: METIS, LDG or a
hash) and the executor map that runs one task per part (:mod:`privgraph.parts.executor`: serially,
or on the Dask client that ``tasks/`` passes in).

The modules are imported by their full path; this package imports nothing."""
