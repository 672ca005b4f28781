"""Cost of record conversion (storage.formats.conversion), in process, one core: µs per record.

Kafka -> Iggy: stored RecordBatch v2 batches of ``--records`` records (key, value of
``--size`` bytes, two headers) under each codec, converted into Iggy records (what an Iggy
POLL, the HTTP API, the CLI or a Spark columnar read of a Kafka-written topic costs the server
beyond the read). Iggy -> Kafka: stored Iggy records (``rill.key`` and two headers) converted
into one RecordBatch v2 (what a Kafka Fetch of an Iggy-format topic costs). SEND -> Kafka:
an Iggy SEND region of the same messages made into one RecordBatch v2 (``convert_batch``: what
an Iggy client writing into a Kafka topic costs before the native append), beside the native
stamping of that region into an Iggy-format log for comparison. Produce -> Iggy: a Kafka
producer's batch (uncompressed, zstd) made stored Iggy records with offsets, timestamps and
index entries (``kafka_batches_as_records`` + ``stamp_converted``: what a Kafka or TANK
produce into an Iggy-format topic costs before the write), beside the native stamping of the
same batch into a Kafka-format log. Best of ``--repeat`` timings.

Each conversion is timed twice in the same run: the Python reference (``*_python``) and its C
twin in ``_convert.c`` / ``_iggy_to_kafka.c`` (``*_accelerated``, what rill runs when the extension is built), with the
ratio; the C column is missing when the twin is not built.

    python benchmarks/record_conversion.py --records 1000 --size 100
"""

from __future__ import annotations

import argparse
import gzip
import struct
import time

import cramjam
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.protocol.iggy.headers import HeaderValue
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage.formats.kafka_v2 import stamp_batches
from rill.server.storage.formats import conversion as record_conversion
from rill.server.storage.formats.conversion import convert_batch
from rill.server.storage.formats.iggy_v1 import stamp_batch

COMPRESS = {
    0: lambda block: block,
    1: gzip.compress,
    2: lambda block: bytes(cramjam.snappy.compress_raw(block)),
    3: lambda block: bytes(cramjam.lz4.compress(block)),
    4: lambda block: bytes(cramjam.zstd.compress(block)),
}
NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def kafka_stored(records: int, size: int, codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 26)
    for offset in range(records):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=b"key-%d" % offset,
                       value=bytes(size), headers=[("a", b"1"), ("trace", b"abcdef")])
    raw = bytearray(builder.build())
    out = bytearray(raw[:61]) + COMPRESS[codec](bytes(raw[61:]))
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(stamp_batches(bytes(out), 0, 0, 0, 0).records)


def send_region(records: int, size: int) -> bytes:
    messages = [Message(bytes(size), headers={"rill.key": HeaderValue.raw(b"key-%d" % n),
                                              "a": HeaderValue.raw(b"1"),
                                              "trace": HeaderValue.string("abcdef")})
                for n in range(records)]
    return encode_messages(messages)


def iggy_stored(records: int, size: int) -> bytes:
    return bytes(stamp_batch(send_region(records, size), 0, 1_700_000_000_000_000, 0, 0).records)


def best(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def side_by_side(label: str, python, accelerated, records: int, repeat: int) -> None:
    """One line: the reference's and the twin's µs per record, and the ratio."""
    reference = best(python, repeat) / records * 1e6
    if not record_conversion.ACCELERATED:
        print(f"{label}: python {reference:6.2f} µs/record   (C twin not built)")
        return
    twin = best(accelerated, repeat) / records * 1e6
    print(f"{label}: python {reference:6.2f}   C {twin:6.3f} µs/record   "
          f"x{reference / twin:5.1f}")


def send_to_kafka(region: bytes, iggy_to_kafka):  # type: ignore[no-untyped-def]
    """``convert_batch`` of ``region`` with the Iggy -> Kafka step given."""
    def run() -> None:
        chosen = record_conversion.iggy_to_kafka
        record_conversion.iggy_to_kafka = iggy_to_kafka
        try:
            convert_batch(region, "iggy-v1", "kafka-v2", 1_700_000_000_000_000)
        finally:
            record_conversion.iggy_to_kafka = chosen
    return run


def produce_to_iggy(produced: bytes, python: bool):  # type: ignore[no-untyped-def]
    """A Kafka Produce's batches made stored Iggy records with their offsets, timestamps and
    index entries (``kafka_batches_as_records`` + ``stamp_converted``, what
    ``PartitionLog.append_as`` does before its write), by the references or the twins."""
    convert = (record_conversion.kafka_to_iggy_python if python
               else record_conversion.kafka_to_iggy_accelerated)
    stamp = (record_conversion.stamp_converted_python if python
             else record_conversion.stamp_converted_accelerated)

    def run() -> None:
        chosen = record_conversion.kafka_to_iggy
        record_conversion.kafka_to_iggy = convert
        try:
            converted = record_conversion.kafka_batches_as_records(produced)
        finally:
            record_conversion.kafka_to_iggy = chosen
        stamp(bytearray(converted.records), converted.positions, converted.timestamps, 0,
              1_700_000_000_000_000, 0, 0, 0)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    n = args.records
    print(f"{n} records of {args.size} bytes, best of {args.repeat}")
    for codec in NAMES:
        data = kafka_stored(n, args.size, codec)
        side_by_side(f"kafka-v2 ({NAMES[codec]:6}) -> iggy-v1   ",
                     lambda: record_conversion.kafka_to_iggy_python(data, 0, n),
                     lambda: record_conversion.kafka_to_iggy_accelerated(data, 0, n),
                     n, args.repeat)
    data = iggy_stored(n, args.size)
    side_by_side("iggy-v1 -> kafka-v2 (one batch)",
                 lambda: record_conversion.iggy_to_kafka_python(data, 0, n),
                 lambda: record_conversion.iggy_to_kafka_accelerated(data, 0, n),
                 n, args.repeat)
    region = send_region(n, args.size)
    side_by_side("SEND -> kafka-v2 (one batch)   ",
                 send_to_kafka(region, record_conversion.iggy_to_kafka_python),
                 send_to_kafka(region, record_conversion.iggy_to_kafka_accelerated),
                 n, args.repeat)
    seconds = best(lambda: stamp_batch(region, 0, 1_700_000_000_000_000, 0, 0), args.repeat)
    print(f"SEND -> iggy-v1 (native stamp) : {seconds / n * 1e6:6.3f} µs/record")
    for codec in (0, 4):
        produced = kafka_stored(n, args.size, codec)
        side_by_side(f"Produce ({NAMES[codec]:4}) -> iggy-v1     ",
                     produce_to_iggy(produced, python=True),
                     produce_to_iggy(produced, python=False), n, args.repeat)
        seconds = best(lambda: stamp_batches(produced, 0, 0, 0, 0), args.repeat)
        print(f"Produce ({NAMES[codec]:4}) -> kafka-v2 (native): "
              f"{seconds / n * 1e6:6.3f} µs/record")


if __name__ == "__main__":
    main()
