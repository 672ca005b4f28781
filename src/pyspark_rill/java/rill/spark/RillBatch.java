package rill.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/**
 * The planning of a JVM batch read, on the driver, as pyspark_rill/readers.py plans it:
 * discover every partition's bounds (oldest stored offset, next offset), resolve
 * startingOffsets/endingOffsets (earliest, latest, JSON with -2/-1), cut the end to what
 * exists, one range per partition with data, split further for minPartitions.
 */
final class RillBatch implements Batch {
    private final ReadOptions options;
    private InputPartition[] planned;

    RillBatch(ReadOptions options) {
        this.options = options;
    }

    @Override
    public synchronized InputPartition[] planInputPartitions() {
        if (planned == null) {
            planned = plan();
        }
        return planned;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new RillReaderFactory(options);
    }

    /** "stream/topic" -> partition id -> {first, next}. */
    static Map<String, Map<String, long[]>> discover(ReadOptions options) {
        Leaders cluster = Leaders.of(options);
        if (cluster != null) {
            return discover(options, cluster);
        }
        int lost = 0;
        long started = 0;
        while (true) {
            RillConnection connection = lost == 0 ? RillConnection.borrow(options)
                    : RillConnection.again(options, lost, started);
            try {
                Map<String, Map<String, long[]>> found = discover(options, connection);
                connection.release();
                return found;
            } catch (RillConnection.StatusException error) {
                connection.release();
                if (Leaders.refused(error)) {
                    throw Leaders.notAClusterRead(options, error);
                }
                throw new IllegalArgumentException("the rill server refused a read of stream '" + options.stream
                        + "': " + error.getMessage());
            } catch (IOException error) {
                connection.close();
                if (lost++ == 0) {
                    started = System.nanoTime();
                }
            } catch (RuntimeException error) {
                connection.release();
                throw error;
            }
        }
    }

    /** {@link #discover} on a cluster: the metadata from any node, each partition's bounds from its leader. */
    private static Map<String, Map<String, long[]>> discover(ReadOptions options, Leaders cluster) {
        Map<String, int[]> partitions = cluster.onAny(connection -> {
            if (!connection.streamExists(options.stream)) {
                throw new IllegalArgumentException("option 'stream': stream '" + options.stream
                        + "' does not exist (or this user may not read it)");
            }
            Map<String, int[]> ids = new TreeMap<>();
            for (String topic : options.topics) {
                int[] found = connection.partitions(options.stream, topic);
                if (found == null) {
                    throw new IllegalArgumentException("option 'topic': topic '" + topic + "' does not exist in "
                            + "stream '" + options.stream + "' (or this user may not read it)");
                }
                ids.put(topic, found);
            }
            return ids;
        });
        Map<String, Map<String, long[]>> found = new TreeMap<>();
        for (Map.Entry<String, int[]> topic : partitions.entrySet()) {
            Map<String, long[]> parts = new TreeMap<>();
            for (int id : topic.getValue()) {
                parts.put(String.valueOf(id), cluster.onLeader(options.stream, topic.getKey(), id, connection -> {
                    connection.call(RillConnection.POLL_COLUMNAR,
                            RillConnection.columnarRequest(options.stream, topic.getKey(), id, 0, 0, 0));
                    return new long[] {Wire.getLong(connection.reply, 4), Wire.getLong(connection.reply, 12)};
                }));
            }
            found.put(options.stream + "/" + topic.getKey(), parts);
        }
        return found;
    }

    private static Map<String, Map<String, long[]>> discover(ReadOptions options, RillConnection connection)
            throws IOException {
        if (!connection.streamExists(options.stream)) {
            throw new IllegalArgumentException("option 'stream': stream '" + options.stream
                    + "' does not exist (or this user may not read it)");
        }
        Map<String, Map<String, long[]>> found = new TreeMap<>();
        for (String topic : options.topics) {
            int[] ids = connection.partitions(options.stream, topic);
            if (ids == null) {
                throw new IllegalArgumentException("option 'topic': topic '" + topic + "' does not exist in stream '"
                        + options.stream + "' (or this user may not read it)");
            }
            Map<String, long[]> parts = new TreeMap<>();
            for (int id : ids) {
                connection.send(RillConnection.POLL_COLUMNAR,
                        RillConnection.columnarRequest(options.stream, topic, id, 0, 0, 0));
            }
            for (int id : ids) {
                connection.receive();
                parts.put(String.valueOf(id), new long[] {
                    Wire.getLong(connection.reply, 4), Wire.getLong(connection.reply, 12)});
            }
            found.put(options.stream + "/" + topic, parts);
        }
        return found;
    }

    private InputPartition[] plan() {
        Map<String, Map<String, long[]>> found = discover(options);
        Map<String, Map<String, Long>> start = resolve("startingOffsets", options.starting, found, -2);
        Map<String, Map<String, Long>> end = resolve("endingOffsets", options.ending, found, -1);
        List<RillInputPartition> ranges = new ArrayList<>();
        for (Map.Entry<String, Map<String, Long>> topic : end.entrySet()) {
            String name = topic.getKey().substring(topic.getKey().indexOf('/') + 1);
            for (Map.Entry<String, Long> part : topic.getValue().entrySet()) {
                long next = found.get(topic.getKey()).get(part.getKey())[1];
                long stop = Math.min(part.getValue(), next);
                long first = start.get(topic.getKey()).get(part.getKey());
                if (stop > first) {
                    ranges.add(new RillInputPartition(options.stream, name, Integer.parseInt(part.getKey()),
                            first, stop, false));
                }
            }
        }
        return split(ranges).toArray(new InputPartition[0]);
    }

    List<RillInputPartition> split(List<RillInputPartition> ranges) {
        return split(ranges, options.minPartitions);
    }

    static List<RillInputPartition> split(List<RillInputPartition> ranges, int minPartitions) {
        if (minPartitions == 0 || ranges.size() >= minPartitions) {
            return ranges;
        }
        long total = 0;
        for (RillInputPartition range : ranges) {
            total += range.end - range.start;
        }
        List<RillInputPartition> pieces = new ArrayList<>();
        for (RillInputPartition range : ranges) {
            long size = range.end - range.start;
            long count = Math.max(1, Math.min(size, (long) Math.rint((double) minPartitions * size / total)));
            for (long i = 0; i < count; i++) {
                pieces.add(new RillInputPartition(range.stream, range.topic, range.partition,
                        range.start + size * i / count, range.start + size * (i + 1) / count,
                        range.fromEarliest && i == 0));
            }
        }
        return pieces;
    }

    static Map<String, Map<String, Long>> resolve(String option, String text,
                                                           Map<String, Map<String, long[]>> found, long fallback) {
        String word = text.toLowerCase(Locale.ROOT);
        Map<String, Map<String, Long>> spec = word.equals("earliest") || word.equals("latest") ? Map.of()
                : ReadOptions.offsetsJson(option, text, "earliest", "latest");
        long everywhere = word.equals("earliest") ? -2 : word.equals("latest") ? -1 : fallback;
        for (Map.Entry<String, Map<String, Long>> entry : spec.entrySet()) {
            if (!found.containsKey(entry.getKey())) {
                throw new IllegalArgumentException("option '" + option + "': '" + entry.getKey()
                        + "' is not one of the query's topics (" + String.join(", ", found.keySet()) + ")");
            }
            for (String partition : entry.getValue().keySet()) {
                if (!found.get(entry.getKey()).containsKey(partition)) {
                    throw new IllegalArgumentException("option '" + option + "': " + entry.getKey()
                            + " has no partition " + partition);
                }
            }
        }
        Map<String, Map<String, Long>> resolved = new TreeMap<>();
        for (Map.Entry<String, Map<String, long[]>> topic : found.entrySet()) {
            Map<String, Long> parts = new TreeMap<>();
            for (Map.Entry<String, long[]> part : topic.getValue().entrySet()) {
                long wanted = spec.getOrDefault(topic.getKey(), Map.of()).getOrDefault(part.getKey(), everywhere);
                parts.put(part.getKey(), wanted == -2 ? part.getValue()[0] : wanted == -1 ? part.getValue()[1] : wanted);
            }
            resolved.put(topic.getKey(), parts);
        }
        return resolved;
    }
}
