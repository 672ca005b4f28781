"""The sans-I/O codecs of rill's wire protocols, shared by the server and the SDK: Iggy 0.4.x's
(the modules at this level, to move into ``iggy/``), Kafka's (``kafka/``) and TANK's (``tank/``);
``framing`` and ``buffer`` are shared by all three.

Owns: bytes <-> values for frames, commands and responses. Invariant: nothing here does I/O,
reads a clock or imports from ``rill.server`` / ``rill.client``; every decode failure raises
``DecodeError`` (wire status 3, ``invalid_command``).
"""
