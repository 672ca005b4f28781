package rill.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** Offsets [start, end) of one partition; fromEarliest: the start is "whatever is oldest". */
final class RillInputPartition implements InputPartition {
    final String stream;
    final String topic;
    final int partition;
    final long start;
    final long end;
    final boolean fromEarliest;

    RillInputPartition(String stream, String topic, int partition, long start, long end, boolean fromEarliest) {
        this.stream = stream;
        this.topic = topic;
        this.partition = partition;
        this.start = start;
        this.end = end;
        this.fromEarliest = fromEarliest;
    }
}
