package rill.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;

/**
 * Kafka's RecordBatch v2 (as a {@code kafka} topic stores it, read whole with
 * POLL_STORED_BATCHES, docs/extensions.md 1001) decoded into the rows of the read schema, in
 * the JVM: varints, keys, values, headers, the four codecs (gzip from the JDK; snappy, raw or
 * in snappy-java's xerial framing, lz4 frames and zstd from the libraries Spark itself ships).
 *
 * <p>A record becomes the row the server's own conversion makes of it for a columnar read
 * (storage/formats/conversion.py, docs/kafka.md "A Kafka-written topic read by ..."), so
 * both readers agree: offset = base offset + delta; timestamp = the record's CreateTime (a
 * LogAppendTime batch: its max timestamp) in ms x 1000, 0 when not positive; id = 16 zero
 * bytes; key = the record's key when 1..255 bytes, else null; value = the value, empty when
 * null; headers = those with a non-empty value of at most 255 bytes and a UTF-8 name of 1..255
 * bytes other than {@code rill.key}, the last value of a repeated name in the place of its
 * first, null when none is left.
 *
 * <p>Sans-I/O: {@link #decode} takes the bytes of whole batches and keeps the records of an
 * offset range; the rows stay valid until the next {@code decode} (their slices point into the
 * given bytes or into this decoder's buffer of inflated batches).
 */
final class KafkaRecords {
    private static final int HEAD = 61;  // a batch's fixed header, up to its records
    private static final int MAX_HEADER_PART = 255;
    private static final byte[] KEY_HEADER = "rill.key".getBytes(StandardCharsets.UTF_8);
    private static final byte[] RAW = "raw".getBytes(StandardCharsets.UTF_8);
    private static final byte[] XERIAL = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

    final LongsVector offsets = new LongsVector(DataTypes.LongType);
    final LongsVector timestamps = new LongsVector(DataTypes.TimestampType);
    final SliceVector keys = new SliceVector();
    final SliceVector values = new SliceVector();
    int rows;
    private byte[][] headerSource = new byte[0][];
    private int[] headerAt = new int[0];
    private int[] headerCount = new int[0];
    private boolean anyHeaders;

    private byte[] inflated = new byte[1 << 16];  // the compressed batches of one decode, inflated
    private int inflatedLength;
    private byte[] buf;  // what the varint reads read
    private int at;

    /**
     * The offset after the last of the whole batches in {@code data[start, stop)} (its base
     * offset + last offset delta + 1): where a reader of the log goes on. IllegalStateException
     * when a batch is cut short.
     */
    static long endOf(byte[] data, int start, int stop) {
        long end = Long.MIN_VALUE;
        for (int batch = start; batch < stop; ) {
            int length = stop - batch < HEAD ? -1 : bigInt(data, batch + 8);
            if (length < HEAD - 12 || length > stop - batch - 12) {
                throw new IllegalStateException("a RecordBatch is cut short at byte " + (batch - start) + " of a reply");
            }
            end = Math.max(end, bigLong(data, batch) + bigInt(data, batch + 23) + 1);
            batch += 12 + length;
        }
        return end;
    }

    /**
     * The records of offsets [{@code from}, {@code limit}) in the whole batches of
     * {@code data[start, stop)} become rows 0..{@link #rows} (checked by {@link #endOf}
     * first). IllegalStateException naming the batch when one does not parse or decompress.
     */
    void decode(byte[] data, int start, int stop, long from, long limit) {
        rows = 0;
        anyHeaders = false;
        keys.nulls = 0;
        inflatedLength = 0;
        int batch = start;
        while (batch < stop) {
            long base = bigLong(data, batch);
            int batchEnd = batch + 12 + bigInt(data, batch + 8);
            if (data[batch + 16] != 2) {
                throw new IllegalStateException("the batch at offset " + base + " has magic " + data[batch + 16]
                        + ", not 2 (RecordBatch v2)");
            }
            int attributes = ((data[batch + 21] & 0xff) << 8) | (data[batch + 22] & 0xff);
            long last = base + bigInt(data, batch + 23);
            if (base >= limit) {
                break;
            }
            if (last >= from) {
                try {
                    records(data, batch, batchEnd, base, attributes, from, limit);
                } catch (ArrayIndexOutOfBoundsException | IllegalArgumentException error) {
                    throw new IllegalStateException("the batch at offset " + base + " does not parse: "
                            + (error.getMessage() == null ? error : error.getMessage()));
                }
            }
            batch = batchEnd;
        }
    }

    private void records(byte[] data, int batch, int batchEnd, long base, int attributes, long from, long limit) {
        long baseTimestamp = bigLong(data, batch + 27);
        long maxTimestamp = bigLong(data, batch + 35);
        int count = bigInt(data, batch + 57);
        boolean logAppendTime = (attributes & 0x08) != 0;
        int codec = attributes & 0x07;
        byte[] block = data;
        int blockEnd = batchEnd;
        at = batch + HEAD;
        if (codec != 0) {
            int inflatedAt = inflatedLength;
            inflate(codec, data, at, batchEnd - at, base);
            block = inflated;
            at = inflatedAt;
            blockEnd = inflatedLength;
        }
        buf = block;
        capacity(rows + Math.max(0, count));
        for (int i = 0; i < count; i++) {
            int length = varint();
            int endsAt = at + length;
            at++;  // attributes
            long timestampDelta = varlong();
            long offset = base + varint();
            if (offset < from) {
                if (length < 0) {
                    throw new IllegalArgumentException("a record of negative length");
                }
                at = endsAt;
                continue;
            }
            if (offset >= limit) {
                break;
            }
            int keyLength = varint();
            int keyAt = at;
            if (keyLength > 0) {
                at += keyLength;
            }
            int valueLength = varint();
            int valueAt = at;
            if (valueLength > 0) {
                at += valueLength;
            }
            int headers = varint();
            int headersAt = at;
            for (int h = 0; h < headers; h++) {
                int nameLength = varint();
                if (nameLength < 0) {
                    throw new IllegalArgumentException("a header with a null key");
                }
                at += nameLength;
                int headerValue = varint();
                if (headerValue > 0) {
                    at += headerValue;
                }
            }
            if (at > endsAt || endsAt > blockEnd || length < 0) {
                throw new IllegalArgumentException("record at offset " + offset + " overruns its length");
            }
            at = endsAt;
            int row = rows++;
            offsets.values[row] = offset;
            long millis = logAppendTime ? maxTimestamp : baseTimestamp + timestampDelta;
            timestamps.values[row] = millis > 0 ? millis * 1000 : 0;
            if (keyLength > 0 && keyLength <= MAX_HEADER_PART) {
                keys.set(row, block, keyAt, keyLength);
            } else {
                keys.setNull(row);
            }
            values.set(row, block, valueAt, Math.max(valueLength, 0));
            headerSource[row] = headers > 0 ? block : null;
            headerAt[row] = headersAt;
            headerCount[row] = headers;
            anyHeaders |= headers > 0;
        }
    }

    private void capacity(int wanted) {
        offsets.capacity(wanted);
        timestamps.capacity(wanted);
        keys.capacity(wanted);
        values.capacity(wanted);
        if (headerAt.length < wanted) {
            int size = Math.max(wanted, headerAt.length * 2);
            headerSource = Arrays.copyOf(headerSource, size);
            headerAt = Arrays.copyOf(headerAt, size);
            headerCount = Arrays.copyOf(headerCount, size);
        }
    }

    /** Whether some row of the last decode has a header to look at. */
    boolean anyHeaders() {
        return anyHeaders;
    }

    /**
     * Row {@code row}'s headers (the rules above) as map entries from element
     * {@code elements} of {@code names}/{@code entries} (with {@code typed}: entries is a
     * struct of kind "raw" and value); returns how many were written.
     */
    int headers(int row, WritableColumnVector names, WritableColumnVector entries, boolean typed, int elements) {
        int count = headerCount[row];
        if (count == 0) {
            return 0;
        }
        byte[] block = headerSource[row];
        buf = block;
        at = headerAt[row];
        int[] kept = new int[4 * count];  // name at, name length, value at, value length
        int size = 0;
        for (int h = 0; h < count; h++) {
            int nameLength = varint();
            int nameAt = at;
            at += nameLength;
            int valueLength = varint();
            if (valueLength <= 0) {
                continue;  // a null or empty value: no Iggy header holds one
            }
            int valueAt = at;
            at += valueLength;
            if (valueLength > MAX_HEADER_PART || nameLength == 0 || nameLength > MAX_HEADER_PART
                    || Arrays.equals(block, nameAt, nameAt + nameLength, KEY_HEADER, 0, KEY_HEADER.length)
                    || !utf8(block, nameAt, nameLength)) {
                continue;
            }
            int same = 0;
            while (same < size && !Arrays.equals(block, kept[4 * same], kept[4 * same] + kept[4 * same + 1],
                    block, nameAt, nameAt + nameLength)) {
                same++;
            }
            kept[4 * same] = nameAt;
            kept[4 * same + 1] = nameLength;
            kept[4 * same + 2] = valueAt;
            kept[4 * same + 3] = valueLength;
            size = Math.max(size, same + 1);  // a repeated name keeps its first place, takes the last value
        }
        names.reserve(elements + size);
        entries.reserve(elements + size);
        if (typed) {
            entries.getChild(0).reserve(elements + size);
            entries.getChild(1).reserve(elements + size);
        }
        for (int k = 0; k < size; k++) {
            names.putByteArray(elements + k, block, kept[4 * k], kept[4 * k + 1]);
            if (typed) {
                entries.getChild(0).putByteArray(elements + k, RAW, 0, RAW.length);
                entries.getChild(1).putByteArray(elements + k, block, kept[4 * k + 2], kept[4 * k + 3]);
            } else {
                entries.putByteArray(elements + k, block, kept[4 * k + 2], kept[4 * k + 3]);
            }
        }
        return size;
    }

    private static boolean utf8(byte[] data, int start, int length) {
        for (int i = start; i < start + length; i++) {
            if (data[i] < 0) {
                try {
                    StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                            .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(data, start, length));
                    return true;
                } catch (CharacterCodingException error) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Appends the inflated records of a compressed batch to {@link #inflated}. */
    private void inflate(int codec, byte[] data, int start, int length, long base) {
        try {
            switch (codec) {
                case 1:
                    drain(new GZIPInputStream(new ByteArrayInputStream(data, start, length), 1 << 16));
                    break;
                case 2:
                    snappy(data, start, length);
                    break;
                case 3:
                    drain(new net.jpountz.lz4.LZ4FrameInputStream(new ByteArrayInputStream(data, start, length)));
                    break;
                case 4:
                    drain(new com.github.luben.zstd.ZstdInputStream(new ByteArrayInputStream(data, start, length)));
                    break;
                default:
                    throw new IOException("unknown codec " + codec);
            }
        } catch (IOException | RuntimeException error) {
            throw new IllegalStateException("the batch at offset " + base + " does not decompress: "
                    + (error.getMessage() == null ? error : error.getMessage()));
        }
    }

    private void snappy(byte[] data, int start, int length) throws IOException {
        if (length >= 16 && Arrays.equals(data, start, start + 8, XERIAL, 0, 8)) {
            // snappy-java's framing: a 16-byte header, then blocks of [u32 big-endian length][raw snappy]
            for (int block = start + 16, stop = start + length; block < stop; ) {
                int size = bigInt(data, block);
                if (size < 0 || block + 4 + size > stop) {
                    throw new IOException("a snappy block is cut short");
                }
                snappyBlock(data, block + 4, size);
                block += 4 + size;
            }
        } else {
            snappyBlock(data, start, length);
        }
    }

    private void snappyBlock(byte[] data, int start, int length) throws IOException {
        int size = org.xerial.snappy.Snappy.uncompressedLength(data, start, length);
        room(size);
        inflatedLength += org.xerial.snappy.Snappy.uncompress(data, start, length, inflated, inflatedLength);
    }

    private void drain(InputStream stream) throws IOException {
        try (InputStream in = stream) {
            while (true) {
                room(1 << 15);
                int read = in.read(inflated, inflatedLength, inflated.length - inflatedLength);
                if (read < 0) {
                    return;
                }
                inflatedLength += read;
            }
        }
    }

    private void room(int more) {
        if (inflatedLength + more > inflated.length) {
            // rows already decoded keep the old buffer (their slices point into it)
            inflated = Arrays.copyOf(inflated, Math.max(inflated.length * 2, inflatedLength + more));
        }
    }

    private long varlong() {
        byte b = buf[at++];
        if (b >= 0) {
            return (b >>> 1) ^ -(b & 1);
        }
        long raw = b & 0x7f;
        for (int shift = 7; ; shift += 7) {
            if (shift > 63) {
                throw new IllegalArgumentException("a varint longer than 10 bytes");
            }
            b = buf[at++];
            raw |= (long) (b & 0x7f) << shift;
            if (b >= 0) {
                return (raw >>> 1) ^ -(raw & 1);
            }
        }
    }

    private int varint() {
        long value = varlong();
        if (value != (int) value) {
            throw new IllegalArgumentException("a varint past 32 bits");
        }
        return (int) value;
    }

    static int bigInt(byte[] data, int at) {
        return (data[at] & 0xff) << 24 | (data[at + 1] & 0xff) << 16 | (data[at + 2] & 0xff) << 8 | (data[at + 3] & 0xff);
    }

    static long bigLong(byte[] data, int at) {
        return ((long) bigInt(data, at)) << 32 | (bigInt(data, at + 4) & 0xffffffffL);
    }
}
