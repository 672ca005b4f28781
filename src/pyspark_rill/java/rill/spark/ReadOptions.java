package rill.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The options of a batch read, parsed and checked as pyspark_rill/options.py does, with the
 * same messages (each names the option). Spark hands them lower-cased. Owns: the option names
 * ({@link #KNOWN}, equal to the Python source's; a test compares them) and which options only
 * the Python implementation serves ({@link #pythonOnly}).
 */
final class ReadOptions extends ConnectionOptions {
    static final List<String> KNOWN = Arrays.asList(
            "servers", "transport", "username", "password", "token", "caFile", "verifyCertificate",
            "reconnectAttempts", "reconnectBackoff", "failoverTimeout",
            "stream", "topic", "topics", "startingOffsets", "endingOffsets", "startingTimestamp",
            "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "failOnDataLoss", "headersFormat",
            "minPartitions", "fetchMaxMessages", "fetchMaxBytes", "consumerName",
            "sinkMode", "producerId", "maxRequestBytes", "implementation",
            "path", "checkpointLocation", "queryName");
    private static final Set<String> SPARK_OPTIONS = Set.of("path", "checkpointLocation", "queryName");

    final String stream;
    final List<String> topics;
    final String starting;  // "earliest", "latest" or JSON
    final String ending;  // "latest" or JSON
    final boolean failOnDataLoss;
    final boolean typedHeaders;
    final int minPartitions;  // 0: none
    final int fetchMaxMessages;
    final int fetchMaxBytes;
    final boolean streaming;
    final long maxOffsetsPerTrigger;  // 0: none
    final long minOffsetsPerTrigger;  // 0: none
    final String consumerName;
    /** Why the Python implementation must serve this read (null: the JVM one can). */
    final String pythonOnly;

    private ReadOptions(Map<String, String> options, boolean streaming) {
        super(options);
        this.streaming = streaming;
        String name = get(options, "stream", null);
        if (name == null || name.isBlank()) {
            throw new IllegalArgumentException("option 'stream' is required");
        }
        stream = name.trim();
        String topic = get(options, "topic", null);
        String list = get(options, "topics", null);
        if (topic != null && !topic.isEmpty() && list != null && !list.isEmpty()) {
            throw new IllegalArgumentException("give option 'topic' or option 'topics', not both");
        }
        topics = new ArrayList<>();
        for (String item : (topic != null && !topic.isEmpty() ? topic : list == null ? "" : list).split(",")) {
            if (!item.isBlank()) {
                topics.add(item.trim());
            }
        }
        if (topics.isEmpty()) {
            throw new IllegalArgumentException("option 'topic' (or 'topics', a comma-separated list) is required");
        }
        if (new LinkedHashSet<>(topics).size() != topics.size()) {
            throw new IllegalArgumentException("option 'topics' lists a topic twice: '" + list + "'");
        }
        starting = get(options, "startingOffsets", streaming ? "latest" : "earliest").trim();
        checkOffsets("startingOffsets", starting, "earliest", "latest");
        if (streaming && get(options, "endingOffsets", null) != null) {
            throw new IllegalArgumentException("option 'endingOffsets' is for batch queries only");
        }
        ending = get(options, "endingOffsets", "latest").trim();
        checkOffsets("endingOffsets", ending, "latest");
        maxOffsetsPerTrigger = number(options, "maxOffsetsPerTrigger", 0, 1, Long.MAX_VALUE, "a positive integer");
        minOffsetsPerTrigger = number(options, "minOffsetsPerTrigger", 0, 1, Long.MAX_VALUE, "a positive integer");
        if (!streaming && (maxOffsetsPerTrigger > 0 || minOffsetsPerTrigger > 0)) {
            throw new IllegalArgumentException("options 'maxOffsetsPerTrigger'/'minOffsetsPerTrigger' are for "
                    + "streaming queries only");
        }
        if (maxOffsetsPerTrigger > 0 && minOffsetsPerTrigger > maxOffsetsPerTrigger) {
            throw new IllegalArgumentException("option 'minOffsetsPerTrigger' exceeds 'maxOffsetsPerTrigger'");
        }
        consumerName = get(options, "consumerName", null);
        String failText = get(options, "failOnDataLoss", "true").trim().toLowerCase(Locale.ROOT);
        if (!failText.equals("true") && !failText.equals("false")) {
            throw new IllegalArgumentException("option 'failOnDataLoss' must be true or false, got '" + failText + "'");
        }
        failOnDataLoss = failText.equals("true");
        String headers = get(options, "headersFormat", "binary").trim().toLowerCase(Locale.ROOT);
        if (!headers.equals("binary") && !headers.equals("typed")) {
            throw new IllegalArgumentException("option 'headersFormat' must be one of binary, typed, got '"
                    + headers + "'");
        }
        typedHeaders = headers.equals("typed");
        minPartitions = (int) number(options, "minPartitions", 0, 1, Integer.MAX_VALUE, "a positive integer");
        fetchMaxMessages = (int) number(options, "fetchMaxMessages", 32768, 1, Integer.MAX_VALUE,
                "a positive integer");
        fetchMaxBytes = (int) number(options, "fetchMaxBytes", 16 << 20, 1, Integer.MAX_VALUE, "a positive integer");
        if (get(options, "startingTimestamp", null) != null && get(options, "startingOffsets", null) != null) {
            throw new IllegalArgumentException("give option 'startingOffsets' or 'startingTimestamp', not both");
        }
        if (implementation.equals("python")) {
            pythonOnly = "option implementation=python";
        } else if (pythonTransport != null) {
            pythonOnly = pythonTransport;
        } else if (get(options, "startingTimestamp", null) != null) {
            pythonOnly = "option 'startingTimestamp'";
        } else {
            pythonOnly = null;
        }
    }

    static ReadOptions parse(Map<String, String> options, boolean streaming) {
        return new ReadOptions(options, streaming);
    }

    /** The same check as the Python source's check_known, with its message. */
    static void checkKnown(Map<String, String> options) {
        Map<String, String> known = new TreeMap<>();
        for (String name : KNOWN) {
            known.put(name.toLowerCase(Locale.ROOT), name);
        }
        List<String> unknown = new ArrayList<>();
        for (String key : options.keySet()) {
            if (!known.containsKey(key.toLowerCase(Locale.ROOT))) {
                unknown.add(key);
            }
        }
        if (!unknown.isEmpty()) {
            unknown.sort(null);
            Set<String> shown = new TreeSet<>(known.values());
            shown.removeAll(SPARK_OPTIONS);
            throw new IllegalArgumentException("unknown option '" + unknown.get(0) + "' for format 'rill'; "
                    + "known options: " + String.join(", ", shown));
        }
    }

    /** Offsets JSON {"stream/topic": {"partition": offset}} (offset >= 0, -2 or -1), checked. */
    static Map<String, Map<String, Long>> offsetsJson(String name, String text, String... words) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(text);
        } catch (Exception error) {
            throw new IllegalArgumentException("option '" + name + "' must be " + String.join(" or ", words)
                    + " or JSON like {\"stream/topic\": {\"1\": 42}}, got '" + text + "' ("
                    + error.getMessage().split("\n")[0] + ")");
        }
        if (root == null || !root.isObject() || root.size() == 0) {
            throw new IllegalArgumentException("option '" + name + "': the JSON must be a non-empty object, got '"
                    + text + "'");
        }
        Map<String, Map<String, Long>> spec = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> entry = it.next();
            String key = entry.getKey();
            if (key.chars().filter(c -> c == '/').count() != 1 || !entry.getValue().isObject()) {
                throw new IllegalArgumentException("option '" + name + "': keys are \"stream/topic\" and values "
                        + "objects of partition -> offset, got '" + key + "': " + entry.getValue());
            }
            Map<String, Long> partitions = new TreeMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> parts = entry.getValue().fields(); parts.hasNext(); ) {
                Map.Entry<String, JsonNode> part = parts.next();
                String partition = part.getKey();
                if (partition.isEmpty() || !partition.chars().allMatch(Character::isDigit)
                        || Long.parseLong(partition) < 1) {
                    throw new IllegalArgumentException("option '" + name + "': '" + key
                            + "' has a bad partition id '" + partition + "'");
                }
                JsonNode offset = part.getValue();
                if (!offset.isIntegralNumber() || offset.asLong() < -2) {
                    throw new IllegalArgumentException("option '" + name + "': offset of " + key + "/" + partition
                            + " must be an integer >= 0, -2 (earliest) or -1 (latest), got " + offset);
                }
                partitions.put(String.valueOf(Long.parseLong(partition)), offset.asLong());
            }
            spec.put(key, partitions);
        }
        return spec;
    }

    private static void checkOffsets(String name, String text, String... words) {
        if (!Arrays.asList(words).contains(text.toLowerCase(Locale.ROOT))) {
            offsetsJson(name, text, words);
        }
    }
}
