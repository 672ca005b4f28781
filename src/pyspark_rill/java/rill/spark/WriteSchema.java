package rill.spark;

import java.io.ByteArrayOutputStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * The columns a write takes, checked as pyspark_rill/arrow_write.py's check_schema (same
 * messages), and the reading of one row's fields: {@code value} BINARY|STRING (required),
 * {@code key} BINARY|STRING, {@code partition} an integer type, {@code id} BINARY (16 bytes),
 * {@code headers} MAP&lt;STRING, BINARY|STRING&gt; or the typed map the reader gives,
 * {@code stream}/{@code topic} STRING (used per row when the option is not set).
 */
final class WriteSchema implements Serializable {
    static final String KEY_HEADER = "rill.key";
    static final int MAX_HEADER_PART = 255;
    private static final String[] KINDS = {"", "raw", "string", "bool", "int8", "int16", "int32", "int64",
        "int128", "uint8", "uint16", "uint32", "uint64", "uint128", "float32", "float64"};
    private static final int[] FIXED_SIZES = {0, 0, 0, 1, 1, 2, 4, 8, 16, 1, 2, 4, 8, 16, 4, 8};

    final int value;
    final boolean valueIsString;
    final int key;  // -1: no such column
    final boolean keyIsString;
    final int partition;
    final DataType partitionType;
    final int id;
    final int headers;
    final boolean typedHeaders;
    final boolean stringHeaders;
    final int stream;
    final int topic;

    WriteSchema(StructType schema, WriteOptions options) {
        Map<String, Integer> index = new java.util.HashMap<>();
        StructField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            index.put(fields[i].name(), i);
        }
        if (!index.containsKey("value")) {
            throw new IllegalArgumentException("column 'value' is required to write to rill (BINARY or STRING)");
        }
        value = index.get("value");
        valueIsString = expect(fields[value], "BINARY or STRING", BinaryType.class, StringType.class)
                instanceof StringType;
        key = index.getOrDefault("key", -1);
        keyIsString = key >= 0 && expect(fields[key], "BINARY or STRING", BinaryType.class, StringType.class)
                instanceof StringType;
        partition = index.getOrDefault("partition", -1);
        partitionType = partition < 0 ? null : expect(fields[partition], "TINYINT or SMALLINT or INT or BIGINT",
                ByteType.class, ShortType.class, IntegerType.class, LongType.class);
        id = index.getOrDefault("id", -1);
        if (id >= 0) {
            expect(fields[id], "BINARY", BinaryType.class);
        }
        stream = index.getOrDefault("stream", -1);
        topic = index.getOrDefault("topic", -1);
        for (int column : new int[] {stream, topic}) {
            if (column >= 0) {
                expect(fields[column], "STRING", StringType.class);
            }
        }
        headers = index.getOrDefault("headers", -1);
        boolean typed = false;
        boolean strings = false;
        if (headers >= 0) {
            DataType kind = fields[headers].dataType();
            boolean good = kind instanceof MapType && ((MapType) kind).keyType() instanceof StringType;
            if (good) {
                DataType values = ((MapType) kind).valueType();
                typed = values instanceof StructType && ((StructType) values).fields().length == 2
                        && ((StructType) values).fields()[0].name().equals("kind")
                        && ((StructType) values).fields()[1].name().equals("value");
                strings = values instanceof StringType;
                good = typed || strings || values instanceof BinaryType;
            }
            if (!good) {
                throw new IllegalArgumentException("column 'headers' must be MAP<STRING, BINARY>, MAP<STRING, STRING> "
                        + "or MAP<STRING, STRUCT<kind STRING, value BINARY>>, got "
                        + kind.simpleString().toUpperCase(Locale.ROOT));
            }
        }
        typedHeaders = typed;
        stringHeaders = strings;
        if (options.stream == null && stream < 0) {
            throw new IllegalArgumentException("option 'stream' or a column 'stream' is required to write");
        }
        if (options.topic == null && topic < 0) {
            throw new IllegalArgumentException("option 'topic' or a column 'topic' is required to write");
        }
    }

    @SafeVarargs
    private static DataType expect(StructField field, String allowed, Class<? extends DataType>... types) {
        for (Class<? extends DataType> type : types) {
            if (type.isInstance(field.dataType())) {
                return field.dataType();
            }
        }
        throw new IllegalArgumentException("column '" + field.name() + "' must be " + allowed + ", got "
                + field.dataType().simpleString().toUpperCase(Locale.ROOT));
    }

    byte[] value(InternalRow row) {
        if (row.isNullAt(value)) {
            throw emptyValue();
        }
        byte[] bytes = valueIsString ? row.getUTF8String(value).getBytes() : row.getBinary(value);
        if (bytes.length == 0) {
            throw emptyValue();
        }
        return bytes;
    }

    /** Where a row's value bytes are ({@link #locateValue}): read in place, never copied. */
    static final class ValueBytes {
        Object base;
        long offset;
        int length;

        /** Copies the value to {@code to[at ...]}. */
        void copyTo(byte[] to, int at) {
            Platform.copyMemory(base, offset, to, Platform.BYTE_ARRAY_OFFSET + at, length);
        }
    }

    /**
     * Points {@code into} at the row's value (as {@link #value}, same checks): inside the row
     * itself when it is an UnsafeRow (what Spark hands a writer; its BINARY and STRING cells
     * are both offset-and-size words), so no array is made per row; else a copy.
     */
    void locateValue(InternalRow row, ValueBytes into) {
        if (row instanceof UnsafeRow) {
            UnsafeRow unsafe = (UnsafeRow) row;
            if (unsafe.isNullAt(value)) {
                throw emptyValue();
            }
            long offsetAndSize = unsafe.getLong(value);
            into.base = unsafe.getBaseObject();
            into.offset = unsafe.getBaseOffset() + (int) (offsetAndSize >> 32);
            into.length = (int) offsetAndSize;
            if (into.length == 0) {
                throw emptyValue();
            }
            return;
        }
        byte[] bytes = value(row);
        into.base = bytes;
        into.offset = Platform.BYTE_ARRAY_OFFSET;
        into.length = bytes.length;
    }

    private static IllegalArgumentException emptyValue() {
        return new IllegalArgumentException("column 'value' has a null or empty value; rill messages need a "
                + "payload of at least one byte");
    }

    /** The row's key, or null (none, null or empty). */
    byte[] key(InternalRow row) {
        if (key < 0 || row.isNullAt(key)) {
            return null;
        }
        byte[] bytes = keyIsString ? row.getUTF8String(key).getBytes() : row.getBinary(key);
        return bytes.length == 0 ? null : bytes;
    }

    /** The row's partition, or 0 (none). */
    long partition(InternalRow row) {
        if (partition < 0 || row.isNullAt(partition)) {
            return 0;
        }
        if (partitionType instanceof ByteType) {
            return row.getByte(partition);
        }
        if (partitionType instanceof ShortType) {
            return row.getShort(partition);
        }
        return partitionType instanceof IntegerType ? row.getInt(partition) : row.getLong(partition);
    }

    /** The row's id (16 bytes), or null. */
    byte[] id(InternalRow row) {
        if (id < 0 || row.isNullAt(id)) {
            return null;
        }
        byte[] bytes = row.getBinary(id);
        if (bytes.length != 16) {
            throw new IllegalArgumentException("column 'id' must hold 16-byte values (or null)");
        }
        return bytes;
    }

    String target(InternalRow row, int column, String option, String name) {
        if (option != null) {
            return option;
        }
        if (row.isNullAt(column)) {
            throw new IllegalArgumentException("column '" + name + "' has a null value (and option '" + name
                    + "' is not set)");
        }
        return row.getUTF8String(column).toString();
    }

    /** The row's header map encoded (name, kind, value entries; the key last as rill.key), or null. */
    byte[] headers(InternalRow row, byte[] keyBytes) {
        boolean any = headers >= 0 && !row.isNullAt(headers);
        if (!any && keyBytes == null) {
            return null;
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(64);
        if (any) {
            MapData map = row.getMap(headers);
            ArrayData names = map.keyArray();
            ArrayData values = map.valueArray();
            for (int i = 0; i < map.numElements(); i++) {
                if (values.isNullAt(i)) {
                    continue;
                }
                String name = names.getUTF8String(i).toString();
                int kind;
                byte[] bytes;
                if (typedHeaders) {
                    InternalRow entry = values.getStruct(i, 2);
                    String kindName = entry.isNullAt(0) ? null : entry.getUTF8String(0).toString();
                    kind = kindName == null ? -1 : java.util.Arrays.asList(KINDS).indexOf(
                            kindName.trim().toLowerCase(Locale.ROOT));
                    if (kind < 1) {
                        throw new IllegalArgumentException("column 'headers': header '" + name + "' has kind "
                                + (kindName == null ? "None" : "'" + kindName + "'") + "; the kinds are "
                                + String.join(", ", java.util.Arrays.copyOfRange(KINDS, 1, KINDS.length)));
                    }
                    if (entry.isNullAt(1)) {
                        throw new IllegalArgumentException("column 'headers': header '" + name + "' (kind "
                                + KINDS[kind] + ") has a null value");
                    }
                    bytes = entry.getBinary(1);
                    if (FIXED_SIZES[kind] != 0 && bytes.length != FIXED_SIZES[kind]) {
                        throw new IllegalArgumentException("column 'headers': header '" + name + "' of kind "
                                + KINDS[kind] + " must hold " + FIXED_SIZES[kind] + " byte(s) (little-endian), got "
                                + bytes.length);
                    }
                } else if (stringHeaders) {
                    kind = 2;
                    bytes = values.getUTF8String(i).getBytes();
                } else {
                    kind = 1;
                    bytes = values.getBinary(i);
                }
                byte[] nameBytes = name.getBytes(StandardCharsets.UTF_8);
                if (nameBytes.length < 1 || nameBytes.length > MAX_HEADER_PART) {
                    throw new IllegalArgumentException("column 'headers': header name '" + name + "' must be 1 to "
                            + MAX_HEADER_PART + " bytes");
                }
                if (bytes.length < 1 || bytes.length > MAX_HEADER_PART) {
                    throw new IllegalArgumentException("column 'headers': the value of header '" + name
                            + "' must be 1 to " + MAX_HEADER_PART + " bytes, got " + bytes.length);
                }
                entry(out, nameBytes, kind, bytes);
            }
        }
        if (keyBytes != null) {
            entry(out, KEY_HEADER.getBytes(StandardCharsets.UTF_8), 1, keyBytes);
        }
        return out.size() == 0 ? null : out.toByteArray();
    }

    private static void entry(ByteArrayOutputStream out, byte[] name, int kind, byte[] value) {
        byte[] length = new byte[4];
        Wire.putInt(length, 0, name.length);
        out.write(length, 0, 4);
        out.write(name, 0, name.length);
        out.write(kind);
        Wire.putInt(length, 0, value.length);
        out.write(length, 0, 4);
        out.write(value, 0, value.length);
    }
}
