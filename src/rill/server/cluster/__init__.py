"""The cluster: what N rill nodes agree on through etcd (issue 30, ``shared/spec/cluster-design.md``).

Owns, so far: the ``Coordinator`` port (``coordinator``: key-value transactions with compares,
leases, watches from a revision; neutral types only) and its two implementations, the etcd v3
JSON gateway client (``etcd_gateway``) and the deterministic memory twin
(``memory_coordinator``); what is built on the port alone: leases kept alive with a local
deadline (``leases``), elections (``election``), watches that resume and resync
(``watch``), the key layout (``keys``) and the start-up check (``startup``).

Seams: nothing outside this package knows etcd; this package imports no protocol codec
(``rill.protocol``) and no protocol handler (``rill.server.protocols``); storage never imports it.
"""
