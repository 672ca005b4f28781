package rill.spark;

import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;

/**
 * The options of a write, parsed and checked as pyspark_rill/options.py's WriteOptions, with
 * the same messages: sinkMode (atLeastOnce, exactlyOnce), producerId, maxRequestBytes, and
 * the target stream/topic (null: every row names it in a column of that name).
 */
final class WriteOptions extends ConnectionOptions {
    static final int HARD_LIMIT = 10_000_000;  // the server's limit on the payload bytes of one request

    final String stream;
    final String topic;
    final boolean exactlyOnce;
    final String producerId;
    final int maxRequestBytes;

    WriteOptions(Map<String, String> options) {
        super(options);
        String mode = get(options, "sinkMode", "atLeastOnce").trim();
        String lower = mode.toLowerCase(Locale.ROOT);
        if (!lower.equals("atleastonce") && !lower.equals("exactlyonce")) {
            throw new IllegalArgumentException("option 'sinkMode' must be atLeastOnce or exactlyOnce, got '"
                    + mode + "'");
        }
        exactlyOnce = lower.equals("exactlyonce");
        if (get(options, "topics", null) != null) {
            throw new IllegalArgumentException("option 'topics' is for reading; write with 'topic' or a "
                    + "'topic' column");
        }
        producerId = get(options, "producerId", null);
        if (producerId != null) {
            int length = producerId.getBytes(StandardCharsets.UTF_8).length;
            if (length < 1 || length > 255) {
                throw new IllegalArgumentException("option 'producerId' must be 1 to 255 bytes");
            }
        }
        long bytes = number(options, "maxRequestBytes", 4 << 20, 1, Long.MAX_VALUE, "a positive integer");
        if (bytes > HARD_LIMIT) {
            throw new IllegalArgumentException("option 'maxRequestBytes' must be at most 10000000 (the "
                    + "server's limit for one batch)");
        }
        maxRequestBytes = (int) bytes;
        stream = blankIsNull(get(options, "stream", null));
        topic = blankIsNull(get(options, "topic", null));
    }

    private static String blankIsNull(String text) {
        return text == null || text.isBlank() ? null : text.trim();
    }
}
