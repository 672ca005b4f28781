package rill.spark;

import java.util.Arrays;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Columns a reader fills row by row from bytes it decoded ({@link KafkaRecords}): a column of
 * longs ({@link LongsVector}: offsets, timestamps) and a column of byte slices
 * ({@link SliceVector}: keys, values), each slice a place in some buffer the reader keeps
 * until its next batch (a reply, or the buffer a compressed batch was inflated into), so a
 * value is copied only when Spark asks for it, as {@link ReplyVector}'s are.
 */
abstract class HeapVector extends ColumnVector {
    HeapVector(DataType type) {
        super(type);
    }

    @Override
    public void close() {
        // the arrays are the reader's, reused for its next batch
    }

    @Override
    public void closeIfFreeable() {
        // Spark calls it after each batch: the reader reuses this vector
    }

    private UnsupportedOperationException unsupported() {
        return new UnsupportedOperationException(dataType() + " column of a rill reader");
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
    public long getLong(int row) {
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
    public byte[] getBinary(int row) {
        throw unsupported();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw unsupported();
    }
}

/** A LONG or TIMESTAMP column over a long[] (no nulls). */
final class LongsVector extends HeapVector {
    long[] values = new long[0];

    LongsVector(DataType type) {
        super(type);
    }

    void capacity(int rows) {
        if (values.length < rows) {
            values = Arrays.copyOf(values, Math.max(rows, values.length * 2));
        }
    }

    @Override
    public long getLong(int row) {
        return values[row];
    }
}

/** A BINARY column of slices of buffers: row i is {@code source[i][at[i] .. at[i] + length[i])},
 * null where {@code length[i]} is -1. */
final class SliceVector extends HeapVector {
    byte[][] source = new byte[0][];
    int[] at = new int[0];
    int[] length = new int[0];
    int nulls;

    SliceVector() {
        super(DataTypes.BinaryType);
    }

    void capacity(int rows) {
        if (at.length < rows) {
            int size = Math.max(rows, at.length * 2);
            source = Arrays.copyOf(source, size);
            at = Arrays.copyOf(at, size);
            length = Arrays.copyOf(length, size);
        }
    }

    void set(int row, byte[] buffer, int start, int size) {
        source[row] = buffer;
        at[row] = start;
        length[row] = size;
    }

    void setNull(int row) {
        source[row] = null;
        length[row] = -1;
        nulls++;
    }

    @Override
    public boolean hasNull() {
        return nulls > 0;
    }

    @Override
    public int numNulls() {
        return nulls;
    }

    @Override
    public boolean isNullAt(int row) {
        return length[row] < 0;
    }

    @Override
    public byte[] getBinary(int row) {
        int size = length[row];
        return size < 0 ? null : Arrays.copyOfRange(source[row], at[row], at[row] + size);
    }
}
