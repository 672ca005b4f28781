"""Where the cluster's facts live in etcd: every key is built here.

Layout (``shared/spec/cluster-design.md`` §2.3), under ``/rill/<cluster name>/``:
``members/<node id>`` (a node's advertised listeners, under its member lease; its
create_revision is the member epoch), ``controller/`` (the controller's election: one key per
candidate, under its lease; the oldest leads; its create_revision is the controller epoch),
``secret`` (the peer links' shared secret, made by the first node), ``streams/<id>`` and
``stream-names/<name>`` (a stream's row and its name's claim), ``topics/<stream>/<id>`` and
``topic-names/<stream>/<name>`` (a topic's row), ``partitions/<stream>/<topic>/<id>`` (a
partition's replicas and state: leader, leader epoch, ISR; its mod_revision is the partition
epoch), ``ids/<name>`` (cluster-wide id blocks: Kafka producer ids),
``offsets/<stream>/<topic>/<partition>/<consumer, percent-encoded>`` (stored consumer
positions), ``users/<id>`` and ``user-names/<name, percent-encoded>`` (users: name, status,
permissions, password hash and SCRAM credentials), ``groups/<stream>/<topic>/<id>`` and
``group-names/<stream>/<topic>/<name, percent-encoded>`` (Iggy consumer groups' rows),
``group-members/<stream>/<topic>/<group>/<node id>/<client id>`` (a group's members, each
put by the node its client is connected to under that node's member lease: gone with the
node; the key's create_revision is the member's place in the join order),
``group-claims/<stream>/<topic>/<group>/<partition>`` (which member reads a group's partition
now: put by its node under its member lease once the partition is dealt to it and the claim
is free, deleted when the deal moves it elsewhere),
``tokens/<user id>/<name, percent-encoded>`` (personal access tokens: user, name, BLAKE3
hash, expiry; never the raw token), ``revoked/<token id>`` (HTTP access tokens revoked, kept
under a lease that ends with the token's expiry) and ``jwt-secret`` (the HTTP access tokens' signing secret, made by the first
node).
"""

from __future__ import annotations

from urllib.parse import quote, unquote


class ClusterKeys:
    def __init__(self, cluster_name: str) -> None:
        self.root = f"/rill/{cluster_name}/".encode()
        self.members = self.root + b"members/"
        self.controller = self.root + b"controller/"
        self.secret = self.root + b"secret"
        self.streams = self.root + b"streams/"
        self.stream_names = self.root + b"stream-names/"
        self.topics = self.root + b"topics/"
        self.topic_names = self.root + b"topic-names/"
        self.partitions = self.root + b"partitions/"
        self.ids = self.root + b"ids/"
        self.offsets = self.root + b"offsets/"
        self.users = self.root + b"users/"
        self.user_names = self.root + b"user-names/"
        self.groups = self.root + b"groups/"
        self.group_names = self.root + b"group-names/"
        self.group_members = self.root + b"group-members/"
        self.group_claims = self.root + b"group-claims/"
        self.tokens = self.root + b"tokens/"
        self.jwt_secret = self.root + b"jwt-secret"
        self.revoked = self.root + b"revoked/"

    def member(self, node_id: int) -> bytes:
        return self.members + str(node_id).encode()

    def stream(self, stream_id: int) -> bytes:
        return self.streams + str(stream_id).encode()

    def stream_name(self, name: str) -> bytes:
        return self.stream_names + name.encode()

    def topic(self, stream_id: int, topic_id: int) -> bytes:
        return self.topics + f"{stream_id}/{topic_id}".encode()

    def topic_name(self, stream_id: int, name: str) -> bytes:
        return self.topic_names + f"{stream_id}/".encode() + name.encode()

    def partition(self, stream_id: int, topic_id: int, partition_id: int) -> bytes:
        return self.partitions + f"{stream_id}/{topic_id}/{partition_id}".encode()

    def topic_partitions(self, stream_id: int, topic_id: int) -> bytes:
        return self.partitions + f"{stream_id}/{topic_id}/".encode()

    def offset(self, stream_id: int, topic_id: int, partition_id: int, consumer: str) -> bytes:
        return self.offsets + f"{stream_id}/{topic_id}/{partition_id}/".encode() + quote(
            consumer, safe="").encode()

    def parse_offset(self, key: bytes) -> tuple[int, int, int, str]:
        stream, topic, partition, consumer = key[len(self.offsets):].split(b"/", 3)
        return int(stream), int(topic), int(partition), unquote(consumer.decode())

    def user(self, user_id: int) -> bytes:
        return self.users + str(user_id).encode()

    def user_name(self, username: str) -> bytes:
        return self.user_names + quote(username, safe="").encode()

    def group(self, stream_id: int, topic_id: int, group_id: int) -> bytes:
        return self.groups + f"{stream_id}/{topic_id}/{group_id}".encode()

    def group_name(self, stream_id: int, topic_id: int, name: str) -> bytes:
        return self.group_names + f"{stream_id}/{topic_id}/".encode() + quote(
            name, safe="").encode()

    def topic_groups(self, stream_id: int, topic_id: int) -> tuple[bytes, ...]:
        """The prefixes of a topic's groups, their names, members and claims."""
        tail = f"{stream_id}/{topic_id}/".encode()
        return (self.groups + tail, self.group_names + tail, self.group_members + tail,
                self.group_claims + tail)

    def stream_groups(self, stream_id: int) -> tuple[bytes, ...]:
        tail = f"{stream_id}/".encode()
        return (self.groups + tail, self.group_names + tail, self.group_members + tail,
                self.group_claims + tail)

    def group_member(self, stream_id: int, topic_id: int, group_id: int, node_id: int,
                     client_id: int) -> bytes:
        return self.group_members + f"{stream_id}/{topic_id}/{group_id}/{node_id}/{client_id}".encode()

    def group_members_of(self, stream_id: int, topic_id: int, group_id: int) -> bytes:
        return self.group_members + f"{stream_id}/{topic_id}/{group_id}/".encode()

    def group_claim(self, stream_id: int, topic_id: int, group_id: int, partition_id: int
                    ) -> bytes:
        return self.group_claims + f"{stream_id}/{topic_id}/{group_id}/{partition_id}".encode()

    def group_claims_of(self, stream_id: int, topic_id: int, group_id: int) -> bytes:
        return self.group_claims + f"{stream_id}/{topic_id}/{group_id}/".encode()

    def token(self, user_id: int, name: str) -> bytes:
        return self.tokens + f"{user_id}/".encode() + quote(name, safe="").encode()

    def user_tokens(self, user_id: int) -> bytes:
        return self.tokens + f"{user_id}/".encode()

    def revocation(self, token_id: str) -> bytes:
        return self.revoked + quote(token_id, safe="").encode()

    def id_block(self, name: str) -> bytes:
        return self.ids + name.encode()

    @staticmethod
    def numbers(key: bytes, prefix: bytes) -> tuple[int, ...]:
        """The ids after ``prefix`` in ``key`` (``partitions/1/2/3`` -> (1, 2, 3))."""
        return tuple(int(part) for part in key[len(prefix):].split(b"/"))
