"""The protocol-neutral broker: the use cases of the server, one service per resource, which
every wire protocol calls through one door, ``broker`` (Iggy over TCP, QUIC and HTTP, Kafka, TANK).

Each service method takes the caller's Session and neutral values (``types``: ids or names,
specs, offsets), and runs authorize (an action on a resource, ``auth.permissioner``) ->
validate -> journal (metadata store) -> mutate (memory, files), returning model objects or
neutral results. Nothing here decodes a frame or builds a protocol's answer: an import
contract (pyproject.toml) keeps ``rill.protocol.iggy.commands``, ``responses``, ``framing`` and
``http_json`` out of the core, auth and storage.
"""
