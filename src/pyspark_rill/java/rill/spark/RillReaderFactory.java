package rill.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar partition readers only (Spark converts to rows where it needs rows). */
final class RillReaderFactory implements PartitionReaderFactory {
    private final ReadOptions options;

    RillReaderFactory(ReadOptions options) {
        this.options = options;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("the rill JVM reader is columnar");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return new RillColumnarReader(options, (RillInputPartition) partition);
    }
}
