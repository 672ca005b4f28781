"""pyspark_rill: the Spark connector of rill, as a Python data source named ``rill`` (and a
JVM implementation of the same format, built from ``java/`` at set-up; see ``session``).

Installed with rill (``pip install "rill[spark]"``), it is found by Spark on its own: Spark
imports every top-level ``pyspark_*`` module and registers its ``DefaultSource``, so
``spark.read.format("rill")`` works, also from ``spark-sql``. Build the session with
``pyspark_rill.configure(SparkSession.builder...)`` so that Spark's Python workers run this
interpreter (and the JVM implementation is used where it was built; see ``session``).
Where the package is shipped with ``--py-files`` or used from a notebook, call
``register(spark)`` once::

    import pyspark_rill
    pyspark_rill.register(spark)
    df = (spark.read.format("rill").option("servers", "127.0.0.1:8090")
          .option("username", "iggy").option("password", "iggy")
          .option("stream", "clicks").option("topic", "raw").load())

See README.md ("Spark connector") for every option, and docs/extensions.md for the server
commands it uses (bulk columnar reads, staged exactly-once appends).
"""

from __future__ import annotations

from pyspark_rill.session import RillSetupError, configure
from pyspark_rill.source import RillDataSource

DefaultSource = RillDataSource

__all__ = ["DefaultSource", "RillDataSource", "RillSetupError", "configure", "register"]


def register(spark) -> None:
    """Register the ``rill`` format with a SparkSession."""
    spark.dataSource.register(RillDataSource)
