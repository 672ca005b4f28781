package rill.spark;

import java.util.Arrays;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column read straight from a columnar reply's bytes, without copying it into a vector
 * first: {@code offset} (base_offset + row), {@code timestamp} (the reply's timestamps
 * column), {@code id} (16 bytes at a record's +17) and {@code value} (the payload, after the
 * headers). Valid until the reader's next batch, as Spark's own vectors of a reused batch.
 */
final class ReplyVector extends ColumnVector {
    enum Kind { OFFSET, TIMESTAMP, ID, VALUE }

    private final Kind kind;
    private final Batch batch;

    /** One reply's bytes and where each row's fields are. */
    static final class Batch {
        byte[] reply;
        long baseOffset;
        boolean sparse;  // the records skip offsets: each row's offset is its record's own
        int timestampsAt;
        int[] recordAt = new int[0];
        int[] payloadAt = new int[0];
        int[] payloadLength = new int[0];

        void capacity(int rows) {
            if (recordAt.length < rows) {
                recordAt = new int[rows];
                payloadAt = new int[rows];
                payloadLength = new int[rows];
            }
        }
    }

    ReplyVector(DataType type, Kind kind, Batch batch) {
        super(type);
        this.kind = kind;
        this.batch = batch;
    }

    @Override
    public long getLong(int row) {
        if (kind == Kind.OFFSET) {
            return batch.sparse ? Wire.getLong(batch.reply, batch.recordAt[row]) : batch.baseOffset + row;
        }
        return Wire.getLong(batch.reply, batch.timestampsAt + 8 * row);
    }

    @Override
    public byte[] getBinary(int row) {
        if (kind == Kind.ID) {
            int at = batch.recordAt[row] + 17;
            return Arrays.copyOfRange(batch.reply, at, at + 16);
        }
        int at = batch.payloadAt[row];
        return Arrays.copyOfRange(batch.reply, at, at + batch.payloadLength[row]);
    }

    @Override
    public boolean hasNull() {
        return false;
    }

    @Override
    public int numNulls() {
        return 0;
    }

    @Override
    public boolean isNullAt(int row) {
        return false;
    }

    @Override
    public void close() {
        // the reply's bytes belong to the reader
    }

    @Override
    public void closeIfFreeable() {
        // Spark calls it after each batch: the reader reuses this vector for the next reply
    }

    private UnsupportedOperationException unsupported() {
        return new UnsupportedOperationException(kind + " column of a rill reply");
    }

    @Override
    public boolean getBoolean(int row) {
        throw unsupported();
    }

    @Override
    public byte getByte(int row) {
        throw unsupported();
    }

    @Override
    public short getShort(int row) {
        throw unsupported();
    }

    @Override
    public int getInt(int row) {
        throw unsupported();
    }

    @Override
    public float getFloat(int row) {
        throw unsupported();
    }

    @Override
    public double getDouble(int row) {
        throw unsupported();
    }

    @Override
    public ColumnarArray getArray(int row) {
        throw unsupported();
    }

    @Override
    public ColumnarMap getMap(int row) {
        throw unsupported();
    }

    @Override
    public Decimal getDecimal(int row, int precision, int scale) {
        throw unsupported();
    }

    @Override
    public UTF8String getUTF8String(int row) {
        throw unsupported();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw unsupported();
    }
}
