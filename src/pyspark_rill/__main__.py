"""``python -m pyspark_rill jar``: prints the path of the JVM implementation's jar, for
``spark-submit --jars`` (README, "Running on a Spark cluster"). When the jar was not built it
says so in one line (and how to build it) and exits with status 1."""

from __future__ import annotations

import sys

from pyspark_rill import session

USAGE = "usage: python -m pyspark_rill jar   (prints the path of the connector's jar)"


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) != ["jar"]:
        print(USAGE, file=sys.stderr)
        return 2
    jar = session.JAR
    if not jar.is_file():
        print(f"the JVM connector is not built ({jar}): install a JDK 17+ (javac) and run "
              f"src/pyspark_rill/java/build.sh {sys.executable}", file=sys.stderr)
        return 1
    print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
