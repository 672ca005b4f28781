"""rill's storage engine: files on local disk (and their memory twin), and nothing about
transports, auth or semantics.

Owns: the data directory layout (``paths``), the durability policy and every ``fsync``
(``durability``), the record formats (``formats/``: one module per format, ``iggy_v1`` and
``kafka_v2``, their C units beside them, and ``conversion`` of one into another for a reader of
the other protocol), the index entry (``index_entry``), segments (``segment``, its reads in
``segment_reads``, its checks in ``segment_checks``, and ``batch_segment`` for a batch-index
format), the log of one partition (``partition_log``, its reads in ``log_reads``, its replica
side in ``replica``: leader epochs, follower appends, ``truncation``, the ``checkpoints``),
what happens to its files at start (``recovery``) and what opens the logs of a data directory
(``log_opener.FileLogs``). These are the file side of the core's partition-log port
(``core.log``); ``memory_log`` is its memory twin, which keeps logs in memory with the same
formats and reads.

Invariants: a record is stored exactly as a reader of its format gets it; offsets in a
partition increase along the log but may skip (a batch of TANK's explicit sequence numbers
holds fewer records than offsets: readers count records, not offset spans); nothing
acknowledged under ``fsync=always`` is lost, and only a truncation (a replication layer's cut
of a follower's tail) removes records from the end.
"""
