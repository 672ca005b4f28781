package rill.spark;

import java.io.IOException;
import java.io.Serializable;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * The JVM sink, batch and streaming, with pyspark_rill/writers.py's semantics and messages:
 * atLeastOnce sends straight to the topic; exactlyOnce stages every task's rows under its
 * handle and the driver's commit makes the successful attempts' handles visible at once
 * (COMMIT_STAGED_MESSAGES), recording the batch as the producer's last committed one; an
 * aborted job or micro-batch leaves nothing (ABORT_STAGED_MESSAGES fences its run).
 *
 * <p>The producer is option producerId, else the streaming query's id (it lives in the
 * checkpoint), else a fresh id per batch job; its owner is {@code spark query <query id>} or
 * {@code spark batch job}, so a producerId another query or checkpoint committed with fails
 * (11002) instead of having batches taken for replays; and "already committed" is accepted
 * only for the producer's last committed batch (the replay after a crash between the sink's
 * commit and the checkpoint's). Owns: the driver side (commit, abort) and the commit message.
 */
final class RillWrite implements WriteBuilder, SupportsTruncate, Write, BatchWrite, StreamingWrite {
    static final int OWNER_MISMATCH = 11002;
    static final String BATCH_JOB_OWNER = "spark batch job";

    private final WriteOptions options;
    private final WriteSchema schema;
    private final String queryId;
    private final long runId = newRunId();

    /** As pyspark_rill/writers.py: the exactly-once sink refuses a rill cluster (known by an HTTP API in 'servers'). */
    static final String EXACTLY_ONCE_ON_A_CLUSTER = "option 'sinkMode': exactlyOnce is not supported on a rill "
            + "cluster yet (its staged appends are kept by the node that takes them, not replicated, and would "
            + "not survive a failover); use sinkMode=atLeastOnce (its sends go to each partition's "
            + "leader and are replicated), or a standalone rill server";

    RillWrite(WriteOptions options, LogicalWriteInfo info) {
        this.options = options;
        this.schema = new WriteSchema(info.schema(), options);
        this.queryId = info.queryId();
        if (options.exactlyOnce && Leaders.of(options) != null) {
            throw new IllegalArgumentException(EXACTLY_ONCE_ON_A_CLUSTER);
        }
        if (options.stream != null && options.topic != null) {
            checkTopic();
        }
    }

    /** The target topic exists (else the query fails now, on the driver, in one line, and no task runs). */
    private void checkTopic() {
        withConnection(connection -> {
            if (connection.partitions(options.stream, options.topic) == null) {
                throw RillDataWriter.missingTopic(options.stream, options.topic);
            }
        });
    }

    static long newRunId() {
        return new SecureRandom().nextLong() & Long.MAX_VALUE | 1;  // never 0, which means "no run"
    }

    /** Who writes: the producer, its owner, and this run of the write. */
    static final class Producer implements Serializable {
        final String producerId;
        final String owner;
        final long runId;

        Producer(String producerId, String owner, long runId) {
            this.producerId = producerId;
            this.owner = owner;
            this.runId = runId;
        }

        /** The owner header (version 1) and the producer id that start STAGE, COMMIT and ABORT. */
        Wire header(Wire wire) {
            return wire.u8(0).u8(1).str8(owner).str8(producerId);
        }

        IllegalArgumentException notTheOwner() {
            return new IllegalArgumentException("option 'producerId': producer '" + producerId + "' belongs to "
                    + "another writer (another streaming query or checkpoint, or batch jobs): its committed batches "
                    + "would be taken for replays of this one's (" + owner + ") and their rows dropped. Use a new "
                    + "producerId, or run the query from the checkpoint that wrote them: a producerId belongs to "
                    + "one checkpoint");
        }
    }

    /** What a task attempt reports to the driver (null in atLeastOnce mode). */
    static final class CommitMessage implements WriterCommitMessage {
        final String producerId;
        final String owner;
        final long batchId;
        final long runId;
        final int taskId;
        final long attemptId;
        final long messages;  // staged under the handle

        CommitMessage(String producerId, String owner, long batchId, long runId, int taskId, long attemptId,
                      long messages) {
            this.producerId = producerId;
            this.owner = owner;
            this.batchId = batchId;
            this.runId = runId;
            this.taskId = taskId;
            this.attemptId = attemptId;
            this.messages = messages;
        }
    }

    /** Builds the writers of the tasks (shipped to the executors). */
    static final class Factory implements DataWriterFactory, StreamingDataWriterFactory {
        private final WriteOptions options;
        private final WriteSchema schema;
        private final Producer producer;

        Factory(WriteOptions options, WriteSchema schema, Producer producer) {
            this.options = options;
            this.schema = schema;
            this.producer = producer;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return new RillDataWriter(options, schema, producer, 0, partitionId);
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new RillDataWriter(options, schema, producer, epochId, partitionId);
        }
    }

    static IllegalStateException refused(String what, ConnectionOptions options, RillConnection.StatusException error) {
        return new IllegalStateException("the rill server at " + String.join(",", options.servers) + " refused the "
                + what + ": " + error.getMessage());
    }

    // ------------------------------------------------------------------ WriteBuilder, Write

    @Override
    public WriteBuilder truncate() {
        throw new IllegalArgumentException("rill topics are append-only: write with mode('append')");
    }

    @Override
    public Write build() {
        return this;
    }

    @Override
    public String description() {
        return "rill (JVM writer)";
    }

    @Override
    public BatchWrite toBatch() {
        return this;
    }

    @Override
    public StreamingWrite toStreaming() {
        return this;
    }

    @Override
    public boolean useCommitCoordinator() {
        return true;  // one attempt per task is committed (both interfaces' default)
    }

    private Producer batchProducer() {
        return options.exactlyOnce ? new Producer(options.producerId != null ? options.producerId
                : "spark-batch-" + UUID.randomUUID(), BATCH_JOB_OWNER, runId) : null;
    }

    private Producer streamProducer() {
        return options.exactlyOnce ? new Producer(options.producerId != null ? options.producerId : queryId,
                "spark query " + queryId, runId) : null;
    }

    private Producer batchJob;

    private synchronized Producer batchJob() {
        if (batchJob == null) {
            batchJob = batchProducer();
        }
        return batchJob;
    }

    // ------------------------------------------------------------------ BatchWrite

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        return new Factory(options, schema, batchJob());
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        if (options.exactlyOnce) {
            commit(batchJob(), 0, messages);
        }
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        if (options.exactlyOnce) {
            abort(batchJob(), 0);
        } else {
            System.err.println("rill sink (atLeastOnce): the job failed; rows already sent stay");
        }
    }

    // ------------------------------------------------------------------ StreamingWrite

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
        return new Factory(options, schema, streamProducer());
    }

    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {
        if (options.exactlyOnce) {
            commit(streamProducer(), epochId, messages);
        }
    }

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {
        if (options.exactlyOnce) {
            abort(streamProducer(), epochId);
        }
    }

    // ------------------------------------------------------------------ the driver's calls

    private interface Call {
        void run(RillConnection connection) throws IOException;
    }

    /** {@code call} on a connection, asked again once reconnected when the link is lost (a commit
     * that had landed answers "already committed" for this very batch, which is accepted). */
    private void withConnection(Call call) {
        int lost = 0;
        long started = 0;
        while (true) {
            RillConnection connection = lost == 0 ? RillConnection.borrow(options)
                    : RillConnection.again(options, lost, started);
            try {
                call.run(connection);
                connection.release();
                return;
            } catch (RillConnection.StatusException error) {
                connection.release();
                throw refused("request of the sink", options, error);
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

    private void commit(Producer producer, long batchId, WriterCommitMessage[] messages) {
        List<CommitMessage> handles = new ArrayList<>();
        for (WriterCommitMessage message : messages) {
            if (message instanceof CommitMessage) {
                handles.add((CommitMessage) message);
            }
        }
        withConnection(connection -> {
            Wire request = producer.header(new Wire()).u64(batchId).u32(handles.size());
            for (CommitMessage handle : handles) {
                request.u32(handle.taskId).u64(handle.attemptId).u64(handle.messages);
            }
            try {
                connection.call(RillConnection.COMMIT_STAGED_MESSAGES, request);
            } catch (RillConnection.StatusException error) {
                if (error.status == OWNER_MISMATCH) {
                    throw producer.notTheOwner();
                }
                throw error;
            }
            boolean replay = connection.reply[0] == 1;
            if (replay) {
                connection.call(RillConnection.GET_PRODUCER_STATE, new Wire().str8(producer.producerId));
                boolean committed = connection.reply[0] != 0;
                long last = Wire.getLong(connection.reply, 1);
                if (!committed || last != batchId) {
                    throw new IllegalStateException("RillSinkError: producer '" + producer.producerId + "': batch "
                            + batchId + " was already committed, but the producer's last committed batch is "
                            + (committed ? String.valueOf(last) : "None") + ", so this is not the replay of a batch "
                            + "after a crash: this writer (" + producer.owner + ") is behind the producer's history "
                            + "(a checkpoint restored or rolled back, or another writer's producerId) and its next "
                            + "batches would be skipped as replays; refusing. Use a new checkpoint and a new "
                            + "producerId");
                }
            }
        });
    }

    private void abort(Producer producer, long batchId) {
        withConnection(connection -> {
            try {
                connection.call(RillConnection.ABORT_STAGED_MESSAGES, producer.header(new Wire())
                        .u64(batchId).u64(producer.runId).u8(0).u32(0).u64(0));
            } catch (RillConnection.StatusException error) {
                if (error.status != OWNER_MISMATCH) {
                    throw error;
                }
                System.err.println("rill sink: not aborting batch " + batchId + " of producer " + producer.producerId
                        + ": it belongs to another query or checkpoint");
            }
        });
    }

    @Override
    public String toString() {
        return description();
    }
}
