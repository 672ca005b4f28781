#!/usr/bin/env bash
# Builds the JVM implementation of the Spark connector: the Java sources beside this script,
# compiled with the JDK's javac against pyspark's own jars, packaged with `jar` into
# ../jars/rill-spark.jar (git-ignored; pyspark_rill.configure puts it on a session).
# Rebuilt only when the sources changed (their hash is kept beside the jar).
#   build.sh PYTHON   PYTHON: the interpreter where pyspark is installed
# Never fails: without javac (or when the build fails) it prints one notice line and the
# Python data source serves format("rill").
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-python3}"
jar="$here/../jars/rill-spark.jar"
stamp="$here/../jars/.source-hash"
hash=$(cd "$here" && find . -type f \( -name '*.java' -o -path './META-INF/*' \) | LC_ALL=C sort \
    | xargs cat | sha256sum | cut -c1-16)
if [ -f "$jar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ]; then
    exit 0
fi
notice() { echo "note: $1: the Spark connector uses its Python data source (install a JDK 17+ with javac, then run ./run again, for the JVM one)" >&2; }
if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
    notice "no JDK compiler (javac) found"
    exit 0
fi
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null)
if [ -z "$spark_jars" ] || [ ! -d "$spark_jars" ]; then
    notice "pyspark is not installed in $python"
    exit 0
fi
echo "==> building the JVM Spark connector ($(basename "$jar")) with $(javac -version 2>&1)" >&2
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
mkdir -p "$(dirname "$jar")"
if javac --release 17 -nowarn -encoding UTF-8 -d "$classes" -cp "$spark_jars/*" \
        $(find "$here" -name '*.java') >"$classes.log" 2>&1 \
    && cp -r "$here/META-INF" "$classes/" \
    && jar cf "$jar.tmp" -C "$classes" . && mv "$jar.tmp" "$jar"; then
    echo "$hash" >"$stamp"
    rm -f "$classes.log"
else
    sed 's/^/    /' "$classes.log" >&2
    rm -f "$classes.log" "$jar.tmp"
    notice "the JVM connector did not build (above)"
fi
exit 0
