"""``configure(builder)``: a SparkSession builder set up for the ``rill`` format.

What it does, before the session's JVM starts (so call it before the first ``getOrCreate()``
of the process):

- Spark's Python workers run **this** interpreter (``sys.executable``, where rill is
  installed) unless ``PYSPARK_PYTHON`` says otherwise. Spark's own default is ``python3`` on
  ``PATH``, often another interpreter (a virtualenv's script run by its full path), where the
  ``rill`` format is not found (``DATA_SOURCE_NOT_FOUND ... rill.DefaultSource``). When
  ``PYSPARK_PYTHON`` names an interpreter that cannot import ``pyspark_rill``, this fails at
  once with one line saying so.
- ``loopback=True``: the local Spark listens on 127.0.0.1 only: the driver's services
  (``spark.driver.host``/``bindAddress``) and the web UI (Spark binds it to ``SPARK_LOCAL_IP``,
  else to every address).
- The JVM implementation (``pyspark_rill/jars/rill-spark.jar``, built from the Java sources at
  set-up when a JDK compiler is there) is added to ``spark.jars``; without it, the Python data
  source serves every query and one notice line says so.

Owns: the environment and configuration a session needs; nothing here talks to rill.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

JAR = Path(__file__).parent / "jars" / "rill-spark.jar"
LOOPBACK = "127.0.0.1"
_noticed = False


class RillSetupError(RuntimeError):
    """The session cannot use the rill format as configured; the message says what to change."""


def configure(builder, *, loopback: bool = False):
    """``builder`` (a ``SparkSession.Builder``) set up for ``format("rill")``; returns it."""
    _worker_python()
    if loopback:
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # read by the JVM when it starts: the UI binds here
        builder = (builder.config("spark.driver.host", LOOPBACK)
                   .config("spark.driver.bindAddress", LOOPBACK))
    jar = jvm_jar()
    if jar is not None:
        builder = builder.config("spark.jars", _with_jar(_builder_option(builder, "spark.jars"),
                                                         str(jar)))
    return builder


def jvm_jar() -> Path | None:
    """The JVM implementation's jar, or None (then one notice line, once per process)."""
    global _noticed
    if JAR.is_file():
        return JAR
    if not _noticed:
        _noticed = True
        log.warning("rill: the JVM connector (%s) is not built: the Python data source serves "
                    "format('rill'); install a JDK (javac 17+) and run ./run again for the "
                    "fast path", JAR)
    return None


def _worker_python() -> None:
    """``PYSPARK_PYTHON`` defaults to this interpreter; one that cannot import pyspark_rill is
    refused with one line."""
    chosen = os.environ.get("PYSPARK_PYTHON")
    if not chosen:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        return
    if os.path.realpath(_which(chosen)) == os.path.realpath(sys.executable):
        return
    try:
        check = subprocess.run([chosen, "-c", "import pyspark_rill"], capture_output=True,
                               text=True, timeout=60)
        failure = check.stderr.strip().splitlines()[-1:] if check.returncode else None
    except OSError as error:
        failure = [str(error)]
    if failure is not None:
        raise RillSetupError(
            f"Spark's Python workers run PYSPARK_PYTHON={chosen}, which cannot import "
            f"pyspark_rill ({''.join(failure) or 'it failed'}), so format('rill') would not be "
            f"found: install rill[spark] there, or unset PYSPARK_PYTHON so that the workers run "
            f"this interpreter ({sys.executable})")


def _which(program: str) -> str:
    return shutil.which(program) or program


def _builder_option(builder, key: str) -> str:
    options = getattr(builder, "_options", {})  # what .config() set so far
    return str(options.get(key, ""))


def _with_jar(jars: str, jar: str) -> str:
    listed = [item for item in jars.split(",") if item.strip()]
    return ",".join(listed if jar in listed else listed + [jar])
