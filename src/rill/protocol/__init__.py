"""The sans-I/O codec of the Iggy 0.4.x binary protocol, shared by the rill server and SDK.

Owns: bytes <-> values for frames, commands and responses. Invariant: nothing here does I/O,
reads a clock or imports from ``rill.server`` / ``rill.client``; every decode failure raises
``DecodeError`` (wire status 3, ``invalid_command``).
"""
