package rill.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/**
 * Micro-batch reads in the JVM, the Python stream reader's logic (pyspark_rill/readers.py)
 * with the same offsets: the canonical JSON {@code {"stream/topic": {"partition": next}}},
 * keys sorted, formatted as Python's json.dumps formats it, so that a checkpoint written by
 * one implementation restarts on the other. Admission control (maxOffsetsPerTrigger split
 * across partitions in proportion to their backlog, minOffsetsPerTrigger), Trigger.AvailableNow,
 * reportLatestOffset, partitions added later read from their start. Source metrics (each
 * progress's {@code sources[].metrics}): the lag of every partition after the batch,
 * {@code offsetsBehindLatest} (the offsets JSON's shape, offsets behind the partition's end
 * as last seen), and its {@code min/max/avgOffsetsBehindLatest} as Spark's Kafka source
 * reports them.
 */
final class RillMicroBatchStream implements MicroBatchStream, SupportsAdmissionControl,
        SupportsTriggerAvailableNow, ReportsSourceMetrics {
    private final ReadOptions options;
    private Map<String, Map<String, Long>> latest;  // last seen, for reportLatestOffset
    private Map<String, Map<String, Long>> target;  // Trigger.AvailableNow: never read past it

    RillMicroBatchStream(ReadOptions options) {
        this.options = options;
    }

    /** Offsets as Spark keeps them in the checkpoint. */
    static final class RillOffset extends Offset {
        final Map<String, Map<String, Long>> offsets;

        RillOffset(Map<String, Map<String, Long>> offsets) {
            this.offsets = offsets;
        }

        @Override
        public String json() {
            return toJson(offsets);
        }
    }

    /** json.dumps of the sorted dict: {"a/b": {"1": 5, "2": 7}}, non-ASCII as \\uXXXX. */
    static String toJson(Map<String, Map<String, Long>> offsets) {
        StringBuilder out = new StringBuilder("{");
        String comma = "";
        for (Map.Entry<String, Map<String, Long>> topic : new TreeMap<>(offsets).entrySet()) {
            out.append(comma);
            quote(out, topic.getKey()).append(": {");
            String inner = "";
            for (Map.Entry<String, Long> part : new TreeMap<>(topic.getValue()).entrySet()) {
                out.append(inner);
                quote(out, part.getKey()).append(": ").append(part.getValue());
                inner = ", ";
            }
            out.append('}');
            comma = ", ";
        }
        return out.append('}').toString();
    }

    private static StringBuilder quote(StringBuilder out, String text) {
        out.append('"');
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                case '\b': out.append("\\b"); break;
                case '\f': out.append("\\f"); break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"');
    }

    static Map<String, Map<String, Long>> fromJson(String json) {
        Map<String, Map<String, Long>> offsets = new TreeMap<>();
        try {
            JsonNode root = new ObjectMapper().readTree(json);
            for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> topic = it.next();
                Map<String, Long> parts = new TreeMap<>();
                for (Iterator<Map.Entry<String, JsonNode>> p = topic.getValue().fields(); p.hasNext(); ) {
                    Map.Entry<String, JsonNode> part = p.next();
                    parts.put(part.getKey(), part.getValue().asLong());
                }
                offsets.put(topic.getKey(), parts);
            }
        } catch (IOException error) {
            throw new IllegalArgumentException("a rill offset in the checkpoint is not JSON: " + json);
        }
        return offsets;
    }

    private static Map<String, Map<String, Long>> of(Offset offset) {
        return offset instanceof RillOffset ? ((RillOffset) offset).offsets : fromJson(offset.json());
    }

    private static Map<String, Map<String, Long>> nexts(Map<String, Map<String, long[]>> found) {
        Map<String, Map<String, Long>> result = new TreeMap<>();
        for (Map.Entry<String, Map<String, long[]>> topic : found.entrySet()) {
            Map<String, Long> parts = new TreeMap<>();
            topic.getValue().forEach((partition, bounds) -> parts.put(partition, bounds[1]));
            result.put(topic.getKey(), parts);
        }
        return result;
    }

    @Override
    public Offset initialOffset() {
        Map<String, Map<String, long[]>> found = RillBatch.discover(options);
        return new RillOffset(RillBatch.resolve("startingOffsets", options.starting, found, -2));
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        if (options.maxOffsetsPerTrigger > 0) {
            return ReadLimit.maxRows(options.maxOffsetsPerTrigger);
        }
        if (options.minOffsetsPerTrigger > 0) {
            return ReadLimit.minRows(options.minOffsetsPerTrigger, Long.MAX_VALUE);  // no maximum delay
        }
        return ReadLimit.allAvailable();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        target = nexts(RillBatch.discover(options));
    }

    @Override
    public Offset reportLatestOffset() {
        return latest == null ? null : new RillOffset(latest);
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(start, limit) is the one Spark calls");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        Map<String, Map<String, Long>> start = of(startOffset);
        Map<String, Map<String, long[]>> found = RillBatch.discover(options);
        latest = nexts(found);
        for (Map.Entry<String, Map<String, Long>> topic : start.entrySet()) {
            for (String partition : topic.getValue().keySet()) {
                if (!found.getOrDefault(topic.getKey(), Map.of()).containsKey(partition)
                        && options.failOnDataLoss) {
                    throw new IllegalStateException("RillDataLossError: " + topic.getKey() + " partition "
                            + partition + " was deleted while the query read it; set option failOnDataLoss=false "
                            + "to go on without it");
                }
            }
        }
        Map<String, Long> begin = new TreeMap<>();
        Map<String, Long> end = new TreeMap<>();
        for (Map.Entry<String, Map<String, long[]>> topic : found.entrySet()) {
            for (Map.Entry<String, long[]> part : topic.getValue().entrySet()) {
                long cap = part.getValue()[1];
                if (target != null) {
                    cap = Math.min(cap, target.getOrDefault(topic.getKey(), Map.of()).getOrDefault(part.getKey(), 0L));
                }
                Long previous = start.getOrDefault(topic.getKey(), Map.of()).get(part.getKey());
                long first = previous == null ? part.getValue()[0] : previous;
                String name = topic.getKey() + "\u0000" + part.getKey();
                begin.put(name, first);
                end.put(name, Math.max(cap, first));
            }
        }
        admit(begin, end, limit);
        Map<String, Map<String, Long>> result = new TreeMap<>();
        for (Map.Entry<String, Long> entry : end.entrySet()) {
            String[] name = entry.getKey().split("\u0000");
            if (entry.getValue() > begin.get(entry.getKey())
                    || start.getOrDefault(name[0], Map.of()).containsKey(name[1])) {
                result.computeIfAbsent(name[0], key -> new TreeMap<>()).put(name[1], entry.getValue());
            }
        }
        return new RillOffset(result);
    }

    /** The Python reader's _admit: cut to maxOffsetsPerTrigger by backlog shares, or hold below the minimum. */
    private void admit(Map<String, Long> begin, Map<String, Long> end, ReadLimit limit) {
        long maximum = limit instanceof ReadMaxRows ? ((ReadMaxRows) limit).maxRows() : 0;
        long minimum = limit instanceof ReadMinRows ? ((ReadMinRows) limit).minRows() : options.minOffsetsPerTrigger;
        if (!(limit instanceof ReadMaxRows) && !(limit instanceof ReadMinRows)) {
            return;  // all available
        }
        Map<String, Long> backlog = new TreeMap<>();
        long total = 0;
        for (String name : end.keySet()) {
            long lag = end.get(name) - begin.get(name);
            backlog.put(name, lag);
            total += lag;
        }
        if (minimum > 0 && target == null && total < minimum) {
            end.putAll(begin);
            return;
        }
        if (maximum == 0 || total <= maximum) {
            return;
        }
        final long all = total;
        Map<String, Long> shares = new TreeMap<>();
        long given = 0;
        for (Map.Entry<String, Long> entry : backlog.entrySet()) {
            long share = Math.multiplyExact(maximum, entry.getValue()) / all;
            shares.put(entry.getKey(), share);
            given += share;
        }
        List<String> byRemainder = new ArrayList<>(backlog.keySet());
        byRemainder.sort((a, b) -> {
            long ra = Math.multiplyExact(maximum, backlog.get(a)) % all;
            long rb = Math.multiplyExact(maximum, backlog.get(b)) % all;
            return ra != rb ? Long.compare(rb, ra) : a.compareTo(b);  // as Python's (key, partition) order
        });
        for (int i = 0; i < maximum - given; i++) {
            shares.merge(byRemainder.get(i), 1L, Long::sum);
        }
        shares.forEach((name, share) -> end.put(name, begin.get(name) + share));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
        Map<String, Map<String, Long>> start = of(startOffset);
        List<RillInputPartition> ranges = new ArrayList<>();
        for (Map.Entry<String, Map<String, Long>> topic : of(endOffset).entrySet()) {
            String key = topic.getKey();
            String name = key.substring(key.indexOf('/') + 1);
            String stream = key.substring(0, key.indexOf('/'));
            for (Map.Entry<String, Long> part : topic.getValue().entrySet()) {
                Long begin = start.getOrDefault(key, Map.of()).get(part.getKey());
                boolean fresh = begin == null;  // appeared after the query started: from its oldest message
                long first = fresh ? 0 : begin;
                if (part.getValue() > first) {
                    ranges.add(new RillInputPartition(stream, name, Integer.parseInt(part.getKey()), first,
                            part.getValue(), fresh));
                }
            }
        }
        return RillBatch.split(ranges, options.minPartitions).toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new RillReaderFactory(options);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return new RillOffset(fromJson(json));
    }

    /** Stores the batch's end as a consumer offset (option consumerName): monitoring only, never fails. */
    @Override
    public void commit(Offset end) {
        if (options.consumerName == null) {
            return;
        }
        RillConnection connection = null;
        try {
            connection = RillConnection.borrow(options);
            for (Map.Entry<String, Map<String, Long>> topic : of(end).entrySet()) {
                String key = topic.getKey();
                for (Map.Entry<String, Long> part : topic.getValue().entrySet()) {
                    if (part.getValue() <= 0) {
                        continue;
                    }
                    connection.call(121, new Wire().u8(1).ident(options.consumerName)
                            .ident(key.substring(0, key.indexOf('/'))).ident(key.substring(key.indexOf('/') + 1))
                            .u32(Integer.parseInt(part.getKey())).u64(part.getValue() - 1));
                }
            }
            connection.release();
        } catch (IOException | RuntimeException error) {
            if (connection != null) {
                connection.close();
            }
            System.err.println("rill: cannot store consumer offsets of " + options.consumerName + ": " + error);
        }
    }

    /** The lag of each partition: its end as last seen minus the batch's end offset. */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        if (latest == null || latestConsumedOffset.isEmpty()) {
            return Map.of();
        }
        Map<String, Map<String, Long>> consumed = of(latestConsumedOffset.get());
        Map<String, Map<String, Long>> behind = new TreeMap<>();
        long least = Long.MAX_VALUE;
        long most = 0;
        long total = 0;
        int partitions = 0;
        for (Map.Entry<String, Map<String, Long>> topic : latest.entrySet()) {
            Map<String, Long> done = consumed.getOrDefault(topic.getKey(), Map.of());
            for (Map.Entry<String, Long> part : topic.getValue().entrySet()) {
                Long at = done.get(part.getKey());
                long lag = Math.max(0, part.getValue() - (at == null ? 0 : at));
                behind.computeIfAbsent(topic.getKey(), key -> new TreeMap<>()).put(part.getKey(), lag);
                least = Math.min(least, lag);
                most = Math.max(most, lag);
                total += lag;
                partitions++;
            }
        }
        if (partitions == 0) {
            return Map.of();
        }
        Map<String, String> metrics = new TreeMap<>();
        metrics.put("offsetsBehindLatest", toJson(behind));
        metrics.put("minOffsetsBehindLatest", String.valueOf(least));
        metrics.put("maxOffsetsBehindLatest", String.valueOf(most));
        metrics.put("avgOffsetsBehindLatest", String.valueOf((double) total / partitions));
        return metrics;
    }

    @Override
    public void stop() {
    }

    @Override
    public String toString() {
        return "rill (JVM reader)";
    }
}
