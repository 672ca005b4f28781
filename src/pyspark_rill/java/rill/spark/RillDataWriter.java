package rill.spark;

import java.io.IOException;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.zip.CRC32;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * One task attempt of the JVM sink, as pyspark_rill/writers.py's {@code _write}: rows are
 * grouped by target (stream, topic) and partition (the row's 'partition', else the xxHash32 of
 * its key as the server chooses, else balanced), encoded as they come into per-target
 * requests of at most maxRequestBytes, and sent with up to {@value #IN_FLIGHT} requests in
 * flight.
 *
 * <p>atLeastOnce: SEND_MESSAGES (the SEND layout; ids as given or zero: the server assigns).
 * exactlyOnce: STAGE_MESSAGES under the handle (producer, batch, task, attempt) with the
 * owner, records in the stored layout with their ids (UUIDv7s where the row has none) and
 * CRC-32 checksums made here; a reply "already committed" or "run aborted" stops the staging
 * (nothing more would be kept). A failing attempt drops its own handle (best effort: the
 * driver's commit drops unnamed handles anyway).
 *
 * <p>atLeastOnce on a rill cluster ({@link Leaders#of} not null): each request goes to its
 * partition's leader, as the map says (a balanced request is given a partition here,
 * round-robin from a random one), on this task's link to that node: no node proxies a task's
 * rows to another. A request the leader refuses (11200, 11201: a failover; 11202, 11203: too few
 * in-sync replicas to acknowledge it, or not copied in time) or whose link drops is sent again
 * to the leader the map then names, by the reads' rule ({@link Leaders.Attempts}, option
 * failoverTimeout); a request lost with its link may so be stored twice: at least once.
 */
final class RillDataWriter implements DataWriter<InternalRow> {
    static final int IN_FLIGHT = 4;
    static final int NOT_ENOUGH_REPLICAS = 11202;
    static final int REPLICATION_TIMED_OUT = 11203;
    private static final int ROW_OVERHEAD = 64;  // request bytes a message takes besides payload and headers
    private static final XXHash32 XXHASH = XXHashFactory.fastestJavaInstance().hash32();

    private final WriteOptions options;
    private final WriteSchema schema;
    private final RillWrite.Producer producer;  // null: atLeastOnce
    private final long batchId;
    private final int taskId;
    private final long attemptId;
    private final List<Pending> pending = new ArrayList<>();  // every request being built, first-use order
    private final Map<String, Target> targets = new HashMap<>();
    private Target lastTarget;  // the previous row's: most rows go where the one before went
    private final WriteSchema.ValueBytes value = new WriteSchema.ValueBytes();
    private final ArrayDeque<Sent> inFlight = new ArrayDeque<>();  // the requests sent, oldest first
    private Leaders cluster;  // atLeastOnce on a rill cluster, else null (known at the first request)
    private boolean clusterKnown;
    private final Map<String, RillConnection> leaderLinks = new HashMap<>();  // node address -> this task's link
    private final CRC32 crc = new CRC32();
    private final SplittableRandom random;
    private RillConnection connection;
    private long staged;
    private boolean done;  // the batch was committed before, or this run was aborted: nothing more to stage

    /** A request sent and not yet answered: its rows, the link it went on (null: none could be made), and
     *  on a cluster what it takes to send it again. */
    private static final class Sent {
        final int count;
        RillConnection link;
        byte[] request;  // cluster: the payload, to send again after a failover
        String stream;
        String topic;
        int partition;
        IOException failure;  // cluster: why it could not be sent

        Sent(int count, RillConnection link) {
            this.count = count;
            this.link = link;
        }
    }

    /** One target topic: its partitions count (0: not asked yet) and its requests being built, by partition
     *  choice (0: balanced), found without a string or a boxed key per row. */
    private static final class Target {
        static final int DIRECT = 1024;  // partition choices below this are looked up in an array
        final String stream;
        final String topic;
        int partitionsCount;
        int nextBalanced = -1;  // cluster: the partition a balanced request goes to next, less 1 (-1: not chosen)
        final Pending[] direct = new Pending[DIRECT];
        Map<Long, Pending> others;

        Target(String stream, String topic) {
            this.stream = stream;
            this.topic = topic;
        }

        Pending get(long partition) {
            if (partition >= 0 && partition < DIRECT) {
                return direct[(int) partition];
            }
            return others == null ? null : others.get(partition);
        }

        void put(long partition, Pending rows) {
            if (partition >= 0 && partition < DIRECT) {
                direct[(int) partition] = rows;
            } else {
                if (others == null) {
                    others = new HashMap<>();
                }
                others.put(partition, rows);
            }
        }
    }

    /** The rows of one request being built: one target and partition choice. */
    private static final class Pending {
        final String stream;
        final String topic;
        final long partition;  // 0: balanced
        byte[] records = new byte[1 << 16];
        int length;
        int[] positions = new int[256];
        int count;

        Pending(String stream, String topic, long partition) {
            this.stream = stream;
            this.topic = topic;
            this.partition = partition;
        }

        void room(int more) {
            if (length + more > records.length) {
                records = Arrays.copyOf(records, Math.max(records.length * 2, length + more));
            }
            if (count == positions.length) {
                positions = Arrays.copyOf(positions, count * 2);
            }
        }
    }

    RillDataWriter(WriteOptions options, WriteSchema schema, RillWrite.Producer producer, long batchId,
                   int taskId) {
        this.options = options;
        this.schema = schema;
        this.producer = producer;
        this.batchId = batchId;
        this.taskId = taskId;
        SecureRandom seed = new SecureRandom();
        this.attemptId = seed.nextLong() & Long.MAX_VALUE;
        this.random = new SplittableRandom(seed.nextLong());
    }

    @Override
    public void write(InternalRow row) {
        try {
            append(row);
        } catch (IOException error) {
            throw RillError.of(lost(error));
        } catch (RuntimeException error) {
            throw RillError.of(error);  // the task's failure reason: one line
        }
    }

    private void append(InternalRow row) throws IOException {
        if (done) {
            return;
        }
        schema.locateValue(row, value);
        String stream = schema.target(row, schema.stream, options.stream, "stream");
        String topic = schema.target(row, schema.topic, options.topic, "topic");
        Target target = lastTarget;
        if (target == null || !target.stream.equals(stream) || !target.topic.equals(topic)) {
            target = target(stream, topic);
            lastTarget = target;
        }
        byte[] key = schema.key(row);
        long partition = schema.partition(row);
        if (partition == 0 && key != null) {
            int count = partitionsCount(target);
            long chosen = (XXHASH.hash(key, 0, key.length, 0) & 0xffffffffL) % count;
            partition = chosen == 0 ? count : chosen;
        }
        byte[] headers = schema.headers(row, key);
        byte[] id = schema.id(row);
        int headersLength = headers == null ? 0 : headers.length;
        Pending into = target.get(partition);
        if (into == null) {
            into = new Pending(stream, topic, partition);
            target.put(partition, into);
            pending.add(into);
        }
        int valueLength = value.length;
        int size = (producer != null ? 45 : 24) + headersLength + valueLength;
        if (into.count > 0 && into.length + size + ROW_OVERHEAD * (into.count + 1) > options.maxRequestBytes) {
            flush(into);
        }
        into.room(size);
        byte[] to = into.records;
        int at = into.length;
        into.positions[into.count++] = at;
        if (producer != null) {  // offset u64 | state u8 | timestamp u64: placeholders the commit fills in
            Wire.putLong(to, at, 0);
            to[at + 8] = 1;
            Wire.putLong(to, at + 9, 0);
            at += 17;
        }
        if (id != null) {
            System.arraycopy(id, 0, to, at, 16);
        } else if (producer != null) {
            uuid7(to, at);
        } else {
            Arrays.fill(to, at, at + 16, (byte) 0);  // the server assigns one
        }
        at += 16;
        int checksumAt = at;
        if (producer != null) {
            at += 4;
        }
        Wire.putInt(to, at, headersLength);
        at += 4;
        if (headers != null) {
            System.arraycopy(headers, 0, to, at, headersLength);
            at += headersLength;
        }
        Wire.putInt(to, at, valueLength);
        value.copyTo(to, at + 4);
        if (producer != null) {  // over the copied bytes: the checksum always matches what is sent
            crc.reset();
            crc.update(to, at + 4, valueLength);
            Wire.putInt(to, checksumAt, (int) crc.getValue());
        }
        into.length = at + 4 + valueLength;
    }

    private Target target(String stream, String topic) {
        String name = stream + "\u0000" + topic;
        Target target = targets.get(name);
        if (target == null) {
            target = new Target(stream, topic);
            targets.put(name, target);
        }
        return target;
    }

    /** A UUIDv7 at {@code at}: 48 bits of Unix milliseconds, version 7, the RFC variant, random bits. */
    private void uuid7(byte[] to, int at) {
        long millis = System.currentTimeMillis();
        for (int i = 0; i < 6; i++) {
            to[at + i] = (byte) (millis >>> (8 * (5 - i)));
        }
        long high = random.nextLong();
        long low = random.nextLong();
        for (int i = 0; i < 2; i++) {
            to[at + 6 + i] = (byte) (high >>> (8 * i));
        }
        for (int i = 0; i < 8; i++) {
            to[at + 8 + i] = (byte) (low >>> (8 * i));
        }
        to[at + 6] = (byte) ((to[at + 6] & 0x0f) | 0x70);
        to[at + 8] = (byte) ((to[at + 8] & 0x3f) | 0x80);
    }

    private RillConnection connection() {
        if (connection == null) {
            connection = RillConnection.borrow(options);
        }
        return connection;
    }

    private int partitionsCount(Target target) throws IOException {
        if (target.partitionsCount == 0) {
            int[] ids = connection().partitions(target.stream, target.topic);
            if (ids == null) {
                throw missingTopic(target.stream, target.topic);
            }
            target.partitionsCount = Math.max(ids.length, 1);
        }
        return target.partitionsCount;
    }

    static IllegalArgumentException missingTopic(String stream, String topic) {
        return new IllegalArgumentException("topic '" + topic + "' of stream '" + stream + "' does not exist "
                + "(named by option or column 'stream'/'topic')");
    }

    private void flush(Pending rows) throws IOException {
        if (rows.count == 0) {
            return;
        }
        if (!done && producer == null && cluster() != null) {
            sendToLeader(rows);
        } else if (!done) {
            RillConnection link = connection();
            Wire head = new Wire();
            if (producer != null) {
                producer.header(head).u64(batchId).u64(producer.runId).u32(taskId).u64(attemptId);
            }
            head.ident(rows.stream).ident(rows.topic);
            if (rows.partition == 0) {
                head.u8(1).u8(0);
            } else {
                head.u8(2).u8(4).u32((int) rows.partition);
            }
            byte[] positions = new byte[0];
            int positionsLength = 0;
            if (producer != null) {
                head.u32(rows.count);
                positions = new byte[4 * rows.count];
                for (int i = 0; i < rows.count; i++) {
                    Wire.putInt(positions, 4 * i, rows.positions[i]);
                }
                positionsLength = positions.length;
            }
            link.send(producer != null ? RillConnection.STAGE_MESSAGES : RillConnection.SEND_MESSAGES, head,
                    positions, positionsLength, rows.records, rows.length);
            inFlight.add(new Sent(rows.count, link));
        }
        while (inFlight.size() >= IN_FLIGHT) {
            settle();
        }
        rows.length = 0;
        rows.count = 0;
    }

    private Leaders cluster() {
        if (!clusterKnown) {
            cluster = Leaders.of(options);
            clusterKnown = true;
        }
        return cluster;
    }

    /** Sends {@code rows} (atLeastOnce, a cluster) to their partition's leader; a failure is left to {@link #settle}. */
    private void sendToLeader(Pending rows) throws IOException {
        int partition = (int) rows.partition;
        if (partition == 0) {  // balanced: round-robin from a random partition
            Target target = target(rows.stream, rows.topic);
            int count = partitionsCount(target);
            if (target.nextBalanced < 0) {
                target.nextBalanced = random.nextInt(count);
            }
            partition = target.nextBalanced % count + 1;
            target.nextBalanced = partition % count;
        }
        Sent sent = new Sent(rows.count, null);
        sent.stream = rows.stream;
        sent.topic = rows.topic;
        sent.partition = partition;
        Wire head = new Wire().ident(rows.stream).ident(rows.topic).u8(2).u8(4).u32(partition);
        sent.request = Arrays.copyOf(head.bytes(), head.length() + rows.length);
        System.arraycopy(rows.records, 0, sent.request, head.length(), rows.length);
        try {
            String address = cluster.leaderAddress(rows.stream, rows.topic, partition);
            RillConnection link = leaderLinks.get(address);
            if (link == null) {
                link = RillConnection.borrowAt(options, address);
                leaderLinks.put(address, link);
            }
            sent.link = link;
            link.send(RillConnection.SEND_MESSAGES, new Wire(), sent.request, sent.request.length, sent.request, 0);
        } catch (IOException error) {
            if (sent.link != null) {
                forget(sent.link);
            }
            sent.link = null;
            sent.failure = error;
        }
        inFlight.add(sent);
    }

    /** Closes a link that failed (and no longer uses it). */
    private void forget(RillConnection link) {
        leaderLinks.values().remove(link);
        if (link == connection) {
            connection = null;
        }
        link.close();
    }

    private void settle() throws IOException {
        Sent sent = inFlight.poll();
        if (sent.link != null) {
            try {
                sent.link.receive();
                if (producer != null && sent.link.reply[0] != 0) {
                    done = true;  // already committed (a replay) or this run was aborted
                } else {
                    staged += sent.count;
                }
                return;
            } catch (RillConnection.StatusException error) {
                if (sent.request == null || !sendAgainAfter(error)) {
                    if (error.status == RillWrite.OWNER_MISMATCH && producer != null) {
                        throw producer.notTheOwner();
                    }
                    throw RillWrite.refused("write", options, error);
                }
                sent.failure = error;  // not the leader (any more): ask the map again
            } catch (IOException error) {
                if (sent.request == null) {
                    throw error;
                }
                forget(sent.link);
                sent.failure = error;
            }
        }
        sendAgain(sent);
        staged += sent.count;
    }

    /** Whether a send refused so goes again (to a cluster): 11200 not the leader, 11201 no leader, 11202 too few
     *  in-sync replicas, 11203 not copied to them in time (it may be stored: then twice, at least once). */
    private static boolean sendAgainAfter(RillConnection.StatusException refusal) {
        return Leaders.refused(refusal) || refusal.status == NOT_ENOUGH_REPLICAS
                || refusal.status == REPLICATION_TIMED_OUT;
    }

    /** {@code sent} once more, to the leader the map names after the rule's wait, until it lands or
     *  option failoverTimeout passes (then the task fails, in one line). */
    private void sendAgain(Sent sent) throws IOException {
        Leaders.Attempts attempts = cluster.attempts(sent.stream + "/" + sent.topic + " partition " + sent.partition);
        IOException error = sent.failure;
        while (true) {
            attempts.failed(error);
            RillConnection link = null;
            try {
                link = RillConnection.borrowAt(options, cluster.leaderAddress(sent.stream, sent.topic, sent.partition));
                link.send(RillConnection.SEND_MESSAGES, new Wire(), sent.request, sent.request.length, sent.request, 0);
                link.receive();
                link.release();
                return;
            } catch (RillConnection.StatusException refusal) {
                if (link != null) {
                    link.release();
                }
                if (!sendAgainAfter(refusal)) {
                    throw RillWrite.refused("write", options, refusal);
                }
                error = refusal;
            } catch (IOException failure) {
                if (link != null) {
                    link.close();
                }
                error = failure;
            }
        }
    }

    @Override
    public WriterCommitMessage commit() {
        try {
            for (Pending rows : pending) {
                flush(rows);
            }
            while (!inFlight.isEmpty()) {
                settle();
            }
        } catch (IOException error) {
            throw RillError.of(lost(error));
        } catch (RuntimeException error) {
            throw RillError.of(error);
        }
        return producer == null ? null
                : new RillWrite.CommitMessage(producer.producerId, producer.owner, batchId, producer.runId, taskId,
                        attemptId, staged);
    }

    /** A lost link while writing, in the Python sink's words (the cause first). */
    private Exception lost(IOException error) {
        if (error instanceof RillConnection.StatusException) {
            return RillWrite.refused("write", options, (RillConnection.StatusException) error);
        }
        return new IOException("rill.errors.Disconnected: the connection to " + String.join(",", options.servers)
                + " was lost while writing (" + error.getMessage() + "); this task attempt's rows are "
                + (producer != null ? "not committed" : "partly sent") + ", and Spark may retry the task", error);
    }

    /** The attempt failed: let its requests land, then drop its handle (best effort). */
    @Override
    public void abort() {
        while (!inFlight.isEmpty()) {
            Sent sent = inFlight.poll();
            if (sent.link == null || (sent.link != connection && !leaderLinks.containsValue(sent.link))) {
                continue;  // never sent, or its link was closed
            }
            try {
                sent.link.receive();
            } catch (RillConnection.StatusException ignored) {
                // the attempt is failing anyway
            } catch (IOException error) {
                forget(sent.link);
            }
        }
        if (producer == null) {
            return;
        }
        try {
            if (connection == null) {
                connection = RillConnection.borrow(options);
            }
            connection.call(RillConnection.ABORT_STAGED_MESSAGES, producer.header(new Wire())
                    .u64(batchId).u64(0).u8(1).u32(taskId).u64(attemptId));
        } catch (IOException | RuntimeException error) {
            System.err.println("rill sink: cannot drop the staged rows of a failed attempt: " + error.getMessage());
        }
    }

    @Override
    public void close() {
        for (RillConnection link : leaderLinks.values()) {
            if (inFlight.isEmpty()) {
                link.release();
            } else {
                link.close();
            }
        }
        leaderLinks.clear();
        if (connection != null) {
            if (inFlight.isEmpty()) {
                connection.release();
            } else {
                connection.close();
            }
            connection = null;
        }
    }
}
