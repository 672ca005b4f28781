"""``RillDataSource``: the ``rill`` format of Spark's Python Data Source API (PySpark >= 4.3).

Reads (batch and micro-batch) give one row per message with the schema of
``pyspark_rill.schema``; writes (batch and streaming, append only) take the columns described
in ``pyspark_rill.arrow_write``. Options are validated when the source is created (``load()``,
``save()``, ``start()``), so a typo fails the query at once, naming the option.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from pyspark_rill.arrow_write import check_schema
from pyspark_rill.options import RillOptionError, check_known
from pyspark_rill.options import ReadOptions, WriteOptions
from pyspark_rill.readers import RillBatchReader, RillStreamReader
from pyspark_rill.schema import read_ddl
from pyspark_rill.writers import (
    RillBatchWriter,
    RillStreamWriter,
    check_not_a_cluster,
    check_target,
)


class RillDataSource(DataSource):
    """``spark.read.format("rill")``, ``readStream``, ``write`` and ``writeStream``."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        check_known(self.options)

    @classmethod
    def name(cls) -> str:
        return "rill"

    def schema(self) -> str:
        typed = str(self.options.get("headersformat", "binary")).strip().lower() == "typed"
        return read_ddl(typed)

    def reader(self, schema: StructType) -> RillBatchReader:
        return RillBatchReader(ReadOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> RillStreamReader:
        return RillStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RillBatchWriter:
        options = self._write_options(overwrite)
        return RillBatchWriter(options, check_schema(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> RillStreamWriter:
        options = self._write_options(overwrite)
        return RillStreamWriter(options, check_schema(schema, options))

    def _write_options(self, overwrite: bool) -> WriteOptions:
        if overwrite:
            raise RillOptionError("rill topics are append-only: write with mode('append')")
        options = WriteOptions.parse(self.options)
        check_not_a_cluster(options)
        if options.stream is not None and options.topic is not None:
            check_target(options)  # fails now, before any task runs (as the JVM writer)
        return options
