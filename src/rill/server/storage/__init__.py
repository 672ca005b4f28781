"""rill's storage engine: files on local disk, and nothing about transports, auth or semantics.

Owns: the data directory layout (``paths``), the durability policy and every ``fsync``
(``durability``), the stored record format and its hot stamping loop (``records``), segments
(``segment``), the append-only log of one partition (``partition_log``) and what happens to its
files at start (``recovery``); record formats (``formats``) and the conversion of one into
another for a reader of the other protocol (``formats.conversion``). Invariant: a record is
stored exactly as a reader of its format gets it, offsets in a partition are dense, and nothing
acknowledged under ``fsync=always`` is lost.
"""
