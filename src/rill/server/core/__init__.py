"""The use cases of the server, one service per resource; the only thing transports call.

Each service method takes the caller's Session and a decoded command, and runs
authorize -> validate -> journal (metadata store) -> mutate (memory, files), returning a
response record, raw bytes, or None for an empty OK.
"""
