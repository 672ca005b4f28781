package rill.spark;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** A rill topic (or topics): JVM scans and writes, or the Python table's where the options ask for it. */
final class RillTable implements Table, SupportsRead, SupportsWrite {
    private final StructType schema;
    private final Table python;

    RillTable(StructType schema, Table python) {
        this.schema = schema;
        this.python = python;
    }

    @Override
    public String name() {
        return "rill";
    }

    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public Map<String, String> properties() {
        return python.properties();
    }

    @Override
    public Set<TableCapability> capabilities() {
        return python.capabilities();
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return new RillScanBuilder(schema, options, (SupportsRead) python);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        WriteOptions options = new WriteOptions(info.options());
        if (options.implementation.equals("python") || options.pythonTransport != null) {
            return ((SupportsWrite) python).newWriteBuilder(info);
        }
        return new RillWrite(options, info);
    }
}
