"""Build of rill's C extensions; everything else about the package is in pyproject.toml.

``rill.server.storage.formats._stamp`` holds the C twins of the per-record loops of the record
formats (its units sit beside them in ``storage/formats/``): ``iggy_v1.stamp_batch_python`` (the
send hot loop), the record checks of ``iggy_v1_checks``, the Kafka batch walk of ``kafka_v2`` and
the record conversion between formats of ``conversion``;
``rill.protocol.tank._bundles`` the C twin of the TANK bundle loops
(``bundles.decode_set_python`` / ``encode_set_python``), ``rill.protocol.tank._requests``
that of the broker's Produce and Consume decode (``messages.decode_request_python``). All are
optional: when one cannot be compiled (no C compiler, an unusual platform) the install still
succeeds and rill runs the pure-Python reference (``iggy_v1.ACCELERATED``,
``bundles.ACCELERATED`` and ``messages.REQUESTS_ACCELERATOR`` tell).
"""

import sys

from setuptools import Extension, setup

compile_args = [] if sys.platform == "win32" else ["-O3", "-std=c11"]

setup(
    ext_modules=[
        Extension(
            "rill.server.storage.formats._stamp",
            sources=[f"src/rill/server/storage/formats/_{unit}.c"
                     for unit in ("stamp", "record_checks", "header_map", "crc32", "convert",
                                  "iggy_to_kafka", "kafka_batches", "staged", "index")],
            depends=["src/rill/server/storage/formats/_stamp.h",
                     "src/rill/server/storage/formats/_convert.h"],
            extra_compile_args=compile_args,
            optional=True,
        ),
        *(Extension(
            f"rill.protocol.tank._{unit}",
            sources=[f"src/rill/protocol/tank/_{unit}.c"],
            depends=["src/rill/protocol/tank/_varint.h"],
            extra_compile_args=compile_args,
            optional=True,
        ) for unit in ("bundles", "requests")),
    ]
)
