package rill.spark;

import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM implementation of the {@code rill} format (DataSource V2). When its jar is on the
 * session ({@code pyspark_rill.configure}), the short name {@code rill} resolves here: batch
 * and micro-batch reads ({@link RillBatch}, {@link RillMicroBatchStream}) and writes
 * ({@link RillWrite}) run in the JVM; a query with {@code implementation=python} or with an
 * option only the Python source serves is handed to the Python data source of the same name,
 * through Spark's own Python data source table. Same schema, options and messages as the Python source (pyspark_rill/schema.py).
 */
public final class RillProvider implements TableProvider, DataSourceRegister {
    static final String COMMON = "stream STRING NOT NULL, topic STRING NOT NULL, partition INT NOT NULL, "
            + "offset BIGINT NOT NULL, id BINARY NOT NULL, timestamp TIMESTAMP NOT NULL, key BINARY, "
            + "value BINARY NOT NULL, ";
    static final String BINARY_HEADERS = COMMON + "headers MAP<STRING, BINARY>";
    static final String TYPED_HEADERS = COMMON + "headers MAP<STRING, STRUCT<kind: STRING, value: BINARY>>";

    static StructType schema(boolean typedHeaders) {
        return StructType.fromDDL(typedHeaders ? TYPED_HEADERS : BINARY_HEADERS);
    }

    @Override
    public String shortName() {
        return "rill";
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        ReadOptions.checkKnown(options);
        String format = options.getOrDefault("headersFormat", "binary").trim().toLowerCase(Locale.ROOT);
        return schema(format.equals("typed"));
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;  // as the Python source: a write's schema is the DataFrame's
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        PythonDataSourceV2 python = new PythonDataSourceV2();
        python.setShortName(shortName());
        return new RillTable(schema, python.getTable(schema, partitioning, properties));
    }
}
