"""The sans-I/O codecs of rill's wire protocols, shared by the server and the SDK: Iggy 0.4.x's
(``iggy/``), Kafka's (``kafka/``) and TANK's (``tank/``). Shared by all three: ``buffer`` (the
readers and writers), ``framing`` (the frame splitter each protocol gives its header shape),
``primitives`` and ``permissions`` (the values the core and the SDK share).

Owns: bytes <-> values for frames, commands and responses. Invariant: nothing here does I/O,
reads a clock or imports from ``rill.server`` / ``rill.client``; every decode failure raises
``DecodeError`` (wire status 3, ``invalid_command``).
"""
