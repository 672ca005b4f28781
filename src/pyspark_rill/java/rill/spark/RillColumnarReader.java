package rill.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads one partition range and fills Spark's column vectors from each reply. Its first
 * request (POLL_STORED_BATCHES for no record) tells the topic's record format: a {@code kafka}
 * topic is read with POLL_STORED_BATCHES (code 1001), its stored RecordBatch v2 bytes decoded
 * here ({@link KafkaRecords}: no per-record work on the server); an {@code iggy} topic (or a
 * server without 1001) with POLL_MESSAGES_COLUMNAR (docs/extensions.md, code 1000), whose
 * replies fill the columns as follows: the timestamps column as is, offsets counted
 * from base_offset, id and payload copied from the records region at their fixed places
 * (id at +17, headers_length at +37, payload after the headers), header maps parsed only for
 * records that carry headers (the key header {@code rill.key} becomes the key column).
 * Two requests stay in flight ahead of the reply being converted, as in the Python reader;
 * the data-loss rules and messages are the Python reader's (pyspark_rill/arrow_read.py).
 * A lost connection is opened again and the read goes on from the first row not yet handed
 * to Spark. When rill is a cluster ({@link Leaders}), the range is read from the partition's
 * leader, and after a refusal or a lost leader from the leader the map names next, from the
 * same first row not yet handed to Spark.
 */
final class RillColumnarReader implements PartitionReader<ColumnarBatch> {
    private static final int PREFETCH = 2;
    private static final String KEY_HEADER = "rill.key";
    private static final String[] KINDS = {"", "raw", "string", "bool", "int8", "int16", "int32", "int64",
        "int128", "uint8", "uint16", "uint32", "uint64", "uint128", "float32", "float64"};
    private static final int HEADER = 36;  // partition_id, first, next, base, count, base_position
    private static final int INVALID_COMMAND = 3;  // a server's answer to a command it does not know
    private enum Mode { UNKNOWN, COLUMNAR, STORED }

    private final ReadOptions options;
    private final RillInputPartition range;
    private final ArrayDeque<long[]> inFlight = new ArrayDeque<>();  // {offset asked, count asked}
    private RillConnection connection;
    private long position;  // first offset not yet handed to Spark
    private long requested;  // first offset not yet asked for
    private boolean done;
    private int lost;  // links lost in a row (reset by a reply)
    private long lostAt;
    private Mode mode = Mode.UNKNOWN;
    private final KafkaRecords kafka = new KafkaRecords();
    private final Leaders cluster;  // null: a standalone server
    private final Leaders.Attempts attempts;

    private final int capacity;
    private final ReplyVector.Batch rows = new ReplyVector.Batch();
    private byte[] spare = new byte[1 << 16];  // the reply buffer the batch handed to Spark does not use
    private final OnHeapColumnVector keys;  // used when a reply has headers
    private final OnHeapColumnVector headers;
    private final ConstantColumnVector noKeys;  // else these
    private final ConstantColumnVector noHeaders;
    private final ConstantColumnVector zeroIds;  // a Kafka record has no id: 16 zero bytes
    private final ColumnVector[] columns;
    private final ColumnarBatch batch;

    RillColumnarReader(ReadOptions options, RillInputPartition range) {
        this.options = options;
        this.range = range;
        this.position = this.requested = range.start;
        cluster = Leaders.of(options);
        attempts = cluster == null ? null
                : cluster.attempts(range.stream + "/" + range.topic + " partition " + range.partition);
        capacity = (int) Math.max(1, Math.min(options.fetchMaxMessages, range.end - range.start));
        StructType schema = RillProvider.schema(options.typedHeaders);
        ConstantColumnVector stream = new ConstantColumnVector(capacity, DataTypes.StringType);
        stream.setUtf8String(UTF8String.fromString(range.stream));
        ConstantColumnVector topic = new ConstantColumnVector(capacity, DataTypes.StringType);
        topic.setUtf8String(UTF8String.fromString(range.topic));
        ConstantColumnVector partition = new ConstantColumnVector(capacity, DataTypes.IntegerType);
        partition.setInt(range.partition);
        keys = new OnHeapColumnVector(capacity, DataTypes.BinaryType);
        headers = new OnHeapColumnVector(capacity, schema.fields()[8].dataType());
        noKeys = new ConstantColumnVector(capacity, DataTypes.BinaryType);
        noKeys.setNull();
        noHeaders = new ConstantColumnVector(capacity, schema.fields()[8].dataType());
        noHeaders.setNull();
        zeroIds = new ConstantColumnVector(capacity, DataTypes.BinaryType);
        zeroIds.setBinary(new byte[16]);
        columns = new ColumnVector[] {
            stream, topic, partition,
            new ReplyVector(DataTypes.LongType, ReplyVector.Kind.OFFSET, rows),
            new ReplyVector(DataTypes.BinaryType, ReplyVector.Kind.ID, rows),
            new ReplyVector(DataTypes.TimestampType, ReplyVector.Kind.TIMESTAMP, rows),
            noKeys,
            new ReplyVector(DataTypes.BinaryType, ReplyVector.Kind.VALUE, rows),
            noHeaders};
        batch = new ColumnarBatch(columns);  // columns 6 and 8 are swapped per reply (headers or not)
    }

    @Override
    public boolean next() throws IOException {
        try {
            return nextBatch();
        } catch (RuntimeException error) {
            throw RillError.of(error);  // the task's failure reason: one line
        }
    }

    private boolean nextBatch() throws IOException {
        while (!done) {
            try {
                return fetch();
            } catch (RillConnection.StatusException error) {
                if (!Leaders.refused(error)) {
                    throw new IllegalStateException(range.stream + "/" + range.topic + " partition "
                            + range.partition + ": the server refused the read: " + error.getMessage());
                }
                if (cluster == null) {
                    throw Leaders.notAClusterRead(options, error);
                }
                dropConnection();
                attempts.failed(error);
            } catch (IOException error) {
                dropConnection();
                if (cluster != null) {
                    attempts.failed(error);
                } else if (lost++ == 0) {
                    lostAt = System.nanoTime();
                }
            }
        }
        return false;
    }

    private boolean fetch() throws IOException {
        if (connection == null) {
            connection = cluster != null ? cluster.leader(range.stream, range.topic, range.partition)
                    : lost == 0 ? RillConnection.borrow(options) : RillConnection.again(options, lost, lostAt);
            requested = position;
        }
        if (mode == Mode.UNKNOWN) {
            mode = formatOf();
        }
        if (mode == Mode.STORED) {
            return fetchStored();
        }
        while (position < range.end) {
            while (requested < range.end && inFlight.size() < PREFETCH) {
                int count = (int) Math.min(options.fetchMaxMessages, range.end - requested);
                connection.send(RillConnection.POLL_COLUMNAR, RillConnection.columnarRequest(
                        range.stream, range.topic, range.partition, requested, count, options.fetchMaxBytes));
                inFlight.add(new long[] {requested, count});
                requested += count;
            }
            long[] asked = inFlight.poll();
            connection.receive();
            byte[] reply = connection.reply;  // the batch's from now on; the connection reads into the other
            connection.reply = spare;
            spare = reply;
            long first = Wire.getLong(reply, 4);
            long next = Wire.getLong(reply, 12);
            long base = Wire.getLong(reply, 20);
            int count = Wire.getInt(reply, 28);
            // offsets below the partition's first stored one were removed; a sparse log's holes
            // (a reply starting past what was asked, above it) were never there
            if (first > asked[0] && !(range.fromEarliest && asked[0] == range.start)) {
                dataLoss(asked[0], Math.min(first, range.end));
            }
            long last = count == 0 ? base - 1 : recordOffset(reply, count, count - 1);
            boolean dense = last == base + count - 1;  // else the records skip offsets (TANK's numbers)
            int usable;
            if (dense) {
                usable = (int) Math.min(count, range.end - base);
            } else {
                usable = 0;
                while (usable < count && recordOffset(reply, count, usable) < range.end) {
                    usable++;
                }
            }
            if (usable <= 0) {
                if (next < range.end) {
                    dataLoss(Math.max(asked[0], next), range.end);
                }
                break;
            }
            fill(reply, base, count, usable);
            rows.sparse = !dense;
            lost = 0;
            if (attempts != null) {
                attempts.progressed();
            }
            position = usable == count ? last + 1 : range.end;  // on after the last record taken
            if (position != asked[0] + asked[1]) {  // a short or shifted reply: ask again from position
                while (!inFlight.isEmpty()) {
                    inFlight.poll();
                    connection.receive();
                }
                requested = position;
            }
            return true;
        }
        finish();
        return false;
    }

    /** The topic's record format (POLL_STORED_BATCHES for no record): how to read it. */
    private Mode formatOf() throws IOException {
        try {
            connection.call(RillConnection.POLL_STORED_BATCHES, RillConnection.columnarRequest(
                    range.stream, range.topic, range.partition, position, 0, 0));
        } catch (RillConnection.StatusException error) {
            if (error.status == INVALID_COMMAND) {
                return Mode.COLUMNAR;  // a server before 1001: it converts, the columnar read takes it
            }
            throw error;
        }
        byte[] reply = connection.reply;
        String format = new String(reply, 21, reply[20] & 0xff, StandardCharsets.UTF_8);
        return format.equals("kafka") ? Mode.STORED : Mode.COLUMNAR;
    }

    /**
     * The read of a {@code kafka} topic: whole stored batches (1001), the records of
     * [position, end) decoded. A reply's batches may start before the offset asked (the batch
     * holding it) and end after it; the next request, for the offset after the reply's last
     * batch, is sent before the reply is decoded, so the server reads while this task decodes.
     */
    private boolean fetchStored() throws IOException {
        while (position < range.end) {
            if (inFlight.isEmpty()) {
                askStored(position);
            }
            long asked = inFlight.poll()[0];
            connection.receive();
            byte[] reply = connection.reply;  // the batch's from now on, as in fetch()
            int length = connection.replyLength;
            connection.reply = spare;
            spare = reply;
            long first = Wire.getLong(reply, 4);
            long next = Wire.getLong(reply, 12);
            int recordsAt = 21 + (reply[20] & 0xff);
            if (first > asked && !(range.fromEarliest && asked == range.start)) {
                dataLoss(asked, Math.min(first, range.end));
            }
            lost = 0;
            if (attempts != null) {
                attempts.progressed();
            }
            if (length == recordsAt) {  // nothing stored from there on
                if (next < range.end) {
                    dataLoss(Math.max(asked, next), range.end);
                }
                break;
            }
            try {
                long end = KafkaRecords.endOf(reply, recordsAt, length);
                if (end <= position) {
                    throw new IllegalStateException("the server answered batches that end at offset " + end
                            + ", before " + position);
                }
                if (end < range.end) {
                    askStored(end);  // read by the server while this reply is decoded
                }
                kafka.decode(reply, recordsAt, length, position, range.end);
                position = Math.min(end, range.end);
            } catch (IllegalStateException error) {
                throw new IllegalStateException(range.stream + "/" + range.topic + " partition " + range.partition
                        + ": " + error.getMessage());
            }
            if (kafka.rows > 0) {
                fillStored();
                return true;
            }
        }
        finish();
        return false;
    }

    private void askStored(long offset) throws IOException {
        int count = (int) Math.min(options.fetchMaxMessages, range.end - offset);
        connection.send(RillConnection.POLL_STORED_BATCHES, RillConnection.columnarRequest(
                range.stream, range.topic, range.partition, offset, count, options.fetchMaxBytes));
        inFlight.add(new long[] {offset, count});
    }

    /** The rows {@link KafkaRecords} decoded as the batch. */
    private void fillStored() {
        int count = kafka.rows;
        columns[3] = kafka.offsets;
        columns[4] = zeroIds;
        columns[5] = kafka.timestamps;
        columns[6] = kafka.keys;
        columns[7] = kafka.values;
        columns[8] = noHeaders;
        if (kafka.anyHeaders()) {
            headers.reset();
            headers.reserve(count);
            WritableColumnVector names = headers.getChild(0);
            WritableColumnVector entries = headers.getChild(1);
            int elements = 0;
            for (int i = 0; i < count; i++) {
                int kept = kafka.headers(i, names, entries, options.typedHeaders, elements);
                if (kept == 0) {
                    headers.putNull(i);
                } else {
                    headers.putArray(i, elements, kept);
                    elements += kept;
                }
            }
            columns[8] = headers;
        }
        batch.setNumRows(count);
    }

    private void finish() {
        done = true;
        if (connection != null && inFlight.isEmpty()) {
            connection.release();
        } else if (connection != null) {
            connection.close();
        }
        connection = null;
        inFlight.clear();
    }

    private void dropConnection() {
        if (connection != null) {
            connection.close();
            connection = null;
        }
        inFlight.clear();
    }

    /** The offset of record {@code number} of a reply of {@code count} records (its first field). */
    private static long recordOffset(byte[] reply, int count, int number) {
        int boundariesAt = HEADER + 8 * count;
        int recordsAt = boundariesAt + 4 * (count + 1) - Wire.getInt(reply, 32);  // minus base_position
        return Wire.getLong(reply, recordsAt + Wire.getInt(reply, boundariesAt + 4 * number));
    }

    private void dataLoss(long first, long end) {
        if (options.failOnDataLoss) {
            throw new IllegalStateException("RillDataLossError: " + range.stream + "/" + range.topic
                    + " partition " + range.partition + ": offsets " + first + ".." + (end - 1)
                    + " were removed (retention, purge or deletion) before the query read them; set option "
                    + "failOnDataLoss=false to skip lost offsets");
        }
    }

    /** The first {@code usable} records of a reply as the batch: where each field is, and the
     * key and header columns when some record has headers. */
    private void fill(byte[] reply, long base, int count, int usable) {
        int boundariesAt = HEADER + 8 * count;
        int recordsAt = boundariesAt + 4 * (count + 1) - Wire.getInt(reply, 32);  // minus base_position
        ReplyVector.Batch at = rows;
        at.reply = reply;
        at.baseOffset = base;
        at.timestampsAt = HEADER;
        at.capacity(usable);
        boolean anyHeaders = false;
        for (int i = 0; i < usable; i++) {
            int record = recordsAt + Wire.getInt(reply, boundariesAt + 4 * i);
            int headersLength = Wire.getInt(reply, record + 37);
            int payload = record + 41 + headersLength;
            at.recordAt[i] = record;
            at.payloadAt[i] = payload + 4;
            at.payloadLength[i] = Wire.getInt(reply, payload);
            anyHeaders |= headersLength != 0;
        }
        if (anyHeaders) {
            keys.reset();
            headers.reset();
            int elements = 0;
            for (int i = 0; i < usable; i++) {
                int record = at.recordAt[i];
                int headersLength = Wire.getInt(reply, record + 37);
                if (headersLength == 0) {
                    keys.putNull(i);
                    headers.putNull(i);
                } else {
                    elements = headersOf(reply, record + 41, headersLength, i, elements);
                }
            }
        }
        columns[6] = anyHeaders ? keys : noKeys;
        columns[8] = anyHeaders ? headers : noHeaders;
        batch.setNumRows(usable);
    }

    /** Parses one record's headers into the key and headers columns; returns the map elements used. */
    private int headersOf(byte[] reply, int at, int length, int row, int elements) {
        WritableColumnVector names = headers.getChild(0);
        WritableColumnVector entries = headers.getChild(1);
        int first = elements;
        boolean keyFound = false;
        for (int end = at + length; at < end; ) {
            int nameLength = Wire.getInt(reply, at);
            String name = new String(reply, at + 4, nameLength, StandardCharsets.UTF_8);
            int kind = reply[at + 4 + nameLength] & 0xff;
            int valueLength = Wire.getInt(reply, at + 5 + nameLength);
            int valueAt = at + 9 + nameLength;
            if (name.equals(KEY_HEADER)) {
                keys.putByteArray(row, reply, valueAt, valueLength);
                keyFound = true;
            } else {
                names.reserve(elements + 1);
                entries.reserve(elements + 1);
                names.putByteArray(elements, reply, at + 4, nameLength);
                if (options.typedHeaders) {
                    byte[] kindName = (kind < KINDS.length ? KINDS[kind] : "kind" + kind).getBytes(StandardCharsets.UTF_8);
                    entries.getChild(0).reserve(elements + 1);
                    entries.getChild(1).reserve(elements + 1);
                    entries.getChild(0).putByteArray(elements, kindName, 0, kindName.length);
                    entries.getChild(1).putByteArray(elements, reply, valueAt, valueLength);
                } else {
                    entries.putByteArray(elements, reply, valueAt, valueLength);
                }
                elements++;
            }
            at = valueAt + valueLength;
        }
        if (!keyFound) {
            keys.putNull(row);
        }
        if (elements == first) {
            headers.putNull(row);
        } else {
            headers.putArray(row, first, elements - first);
        }
        return elements;
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        if (connection != null) {
            if (inFlight.isEmpty()) {
                connection.release();
            } else {
                connection.close();
            }
            connection = null;
        }
        batch.close();
        keys.close();
        headers.close();
        noKeys.close();
        noHeaders.close();
    }
}
