package rill.spark;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A scan: in the JVM when it is a batch read the JVM reader serves, else the Python source's
 * scan (built only then, so a JVM batch read starts no Python process).
 */
final class RillScanBuilder implements ScanBuilder {
    private final StructType schema;
    private final CaseInsensitiveStringMap options;
    private final SupportsRead python;

    RillScanBuilder(StructType schema, CaseInsensitiveStringMap options, SupportsRead python) {
        this.schema = schema;
        this.options = options;
        this.python = python;
    }

    @Override
    public Scan build() {
        ReadOptions.checkKnown(options);
        String implementation = options.getOrDefault("implementation", "jvm").trim();
        if (implementation.equalsIgnoreCase("python")) {
            return pythonScan();
        }
        return new JvmScan();
    }

    private Scan pythonScan() {
        return python.newScanBuilder(options).build();
    }

    private final class JvmScan implements Scan {
        private Scan delegate;

        private synchronized Scan delegate() {
            if (delegate == null) {
                delegate = pythonScan();
            }
            return delegate;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "rill (JVM reader)";
        }

        @Override
        public Batch toBatch() {
            ReadOptions parsed = ReadOptions.parse(options, false);
            if (parsed.pythonOnly != null) {
                return delegate().toBatch();
            }
            return new RillBatch(parsed);
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            ReadOptions parsed = ReadOptions.parse(options, true);
            if (parsed.pythonOnly != null) {
                return delegate().toMicroBatchStream(checkpointLocation);
            }
            return new RillMicroBatchStream(parsed);
        }
    }
}
