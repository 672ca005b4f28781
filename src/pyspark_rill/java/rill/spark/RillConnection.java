package rill.spark;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * One logged-in TCP connection to a rill server speaking the Iggy binary protocol: requests
 * {@code [length u32][code u32][payload]}, replies {@code [status u32][length u32][payload]},
 * little-endian (docs/extensions.md). Owns: framing, login, the commands' codes (GET_STREAM,
 * GET_TOPIC, POLL_MESSAGES_COLUMNAR; the sink's SEND_MESSAGES and staged appends), and a
 * per-JVM pool of idle connections (a login costs a bcrypt check on the server, so tasks
 * reuse them).
 */
final class RillConnection implements Closeable {
    static final int GET_STREAM = 200;
    static final int GET_TOPIC = 300;
    static final int LOGIN_USER = 38;
    static final int LOGIN_WITH_TOKEN = 44;
    static final int POLL_COLUMNAR = 1000;
    static final int POLL_STORED_BATCHES = 1001;
    static final int SEND_MESSAGES = 101;
    static final int STAGE_MESSAGES = 1010;
    static final int COMMIT_STAGED_MESSAGES = 1011;
    static final int ABORT_STAGED_MESSAGES = 1012;
    static final int GET_PRODUCER_STATE = 1013;

    private static final Map<String, ConcurrentLinkedQueue<RillConnection>> IDLE = new ConcurrentHashMap<>();

    final ConnectionOptions options;
    final String poolKey;  // the options' key, and in a cluster the node's address
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;
    private final byte[] header = new byte[8];
    byte[] reply = new byte[1 << 16];
    int replyLength;

    /** A rill status other than 0, with the code and the server's words. */
    static final class StatusException extends IOException {
        final int status;

        StatusException(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    private RillConnection(ConnectionOptions options, Socket socket, String poolKey) throws IOException {
        this.options = options;
        this.poolKey = poolKey;
        this.socket = socket;
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
        this.out = new BufferedOutputStream(socket.getOutputStream(), 1 << 12);
    }

    /** An idle pooled connection for these options, or a new logged-in one. */
    static RillConnection borrow(ConnectionOptions options) {
        ConcurrentLinkedQueue<RillConnection> idle = IDLE.get(options.connectionKey());
        RillConnection connection = idle == null ? null : idle.poll();
        return connection != null ? connection : open(options);
    }

    /** Back to the pool (only a connection with no request in flight). */
    void release() {
        IDLE.computeIfAbsent(poolKey, key -> new ConcurrentLinkedQueue<>()).add(this);
    }

    /**
     * An idle pooled connection to the node at {@code server} (host:port, a cluster's node),
     * or a new logged-in one: one try, an IOException when it cannot be made ({@link Leaders}).
     */
    static RillConnection borrowAt(ConnectionOptions options, String server) throws IOException {
        String key = options.connectionKey() + "\u0000@" + server;
        ConcurrentLinkedQueue<RillConnection> idle = IDLE.get(key);
        RillConnection pooled = idle == null ? null : idle.poll();
        if (pooled != null) {
            return pooled;
        }
        return loggedIn(options, connectTo(server), key);
    }

    /** A connection over ``socket``, logged in (a refused login is the options' fault: one
     *  line naming them); the socket is closed when this fails. */
    private static RillConnection loggedIn(ConnectionOptions options, Socket socket, String key)
            throws IOException {
        try {
            RillConnection connection = new RillConnection(options, socket, key);
            connection.login();
            return connection;
        } catch (StatusException error) {
            closeQuietly(socket);
            throw new IllegalArgumentException("options 'username'/'password' or 'token': "
                    + "the server refused the login: " + error.getMessage());
        } catch (IOException error) {
            closeQuietly(socket);
            throw error;
        }
    }

    private static Socket connectTo(String server) throws IOException {
        int colon = server.lastIndexOf(':');
        Socket socket = new Socket();
        try {
            socket.setTcpNoDelay(true);
            socket.setReceiveBufferSize(4 << 20);
            socket.connect(new InetSocketAddress(server.substring(0, colon),
                    Integer.parseInt(server.substring(colon + 1))), 5000);
            return socket;
        } catch (IOException | RuntimeException error) {
            closeQuietly(socket);
            throw error;
        }
    }

    /**
     * A logged-in connection to the first server of 'servers' that answers, trying the list
     * 1 + reconnectAttempts times with the back-off between rounds (as the Python source).
     */
    static RillConnection open(ConnectionOptions options) {
        int rounds = options.reconnectAttempts + 1;
        long started = System.nanoTime();
        List<String> failures = new ArrayList<>();
        for (int attempt = 1; attempt <= rounds; attempt++) {
            failures.clear();
            for (String server : options.servers) {
                Socket socket;
                try {
                    socket = connectTo(server);
                } catch (IOException error) {
                    failures.add(server + ": " + error.getMessage());
                    continue;
                }
                try {
                    return loggedIn(options, socket, options.connectionKey());
                } catch (IOException error) {
                    failures.add(server + ": " + error.getMessage());
                }
            }
            if (attempt < rounds) {
                sleep(delaySeconds(options.reconnectBackoff, attempt));
            }
        }
        String budget = budget(options, started);
        throw new Unreachable("rill.errors.CannotEstablishConnection: option 'servers': cannot reach a rill "
                + "server at " + String.join(",", options.servers) + " over tcp (" + rounds + " rounds, " + budget
                + "): " + String.join("; ", failures), String.join("; ", failures));
    }

    /** No server of 'servers' answered (the message names the option and the budget used). */
    static final class Unreachable extends IllegalArgumentException {
        final String failures;

        Unreachable(String message, String failures) {
            super(message);
            this.failures = failures;
        }
    }

    static String budget(ConnectionOptions options, long startedNanos) {
        double backoff = options.reconnectBackoff;
        return String.format("gave up after %.1f s; options reconnectAttempts=%d, reconnectBackoff=%s",
                (System.nanoTime() - startedNanos) / 1e9, options.reconnectAttempts,
                backoff == Math.rint(backoff) ? String.valueOf((long) backoff) : String.valueOf(backoff));
    }

    /**
     * A connection again after one was lost ({@code lost} times in a row, the first loss at
     * {@code startedNanos}): the reader's or the planner's errors, in the Python source's words.
     */
    static RillConnection again(ConnectionOptions options, int lost, long startedNanos) {
        if (lost > 3) {
            throw new IllegalStateException("rill.errors.Disconnected: the connection to "
                    + String.join(",", options.servers) + " was lost " + lost + " times in a row while reading");
        }
        try {
            return borrow(options);
        } catch (Unreachable error) {
            throw new IllegalStateException("rill.errors.CannotEstablishConnection: the connection to "
                    + String.join(",", options.servers) + " was lost and could not be made again ("
                    + budget(options, startedNanos) + "): " + error.failures);
        }
    }

    static double delaySeconds(double backoff, int attempt) {
        return Math.min(backoff * Math.pow(2, attempt - 1), backoff * 8);
    }

    static void sleep(double seconds) {
        try {
            Thread.sleep((long) (seconds * 1000));
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", error);
        }
    }

    private void login() throws IOException {
        Wire payload = new Wire();
        if (options.token != null) {
            payload.str8(options.token);
            call(LOGIN_WITH_TOKEN, payload);
        } else {
            payload.str8(options.username).str8(options.password).u32(0).u32(0);
            call(LOGIN_USER, payload);
        }
    }

    /** Sends a request without waiting for its reply. */
    void send(int code, Wire payload) throws IOException {
        Wire.putInt(header, 0, payload.length() + 4);
        Wire.putInt(header, 4, code);
        out.write(header, 0, 8);
        out.write(payload.bytes(), 0, payload.length());
        out.flush();
    }

    /** Sends a request made of parts (a head, then bulk bytes) without waiting for its reply. */
    void send(int code, Wire head, byte[] body1, int length1, byte[] body2, int length2) throws IOException {
        Wire.putInt(header, 0, head.length() + length1 + length2 + 4);
        Wire.putInt(header, 4, code);
        out.write(header, 0, 8);
        out.write(head.bytes(), 0, head.length());
        out.write(body1, 0, length1);
        out.write(body2, 0, length2);
        out.flush();
    }

    /** Reads the next reply into {@link #reply} (length {@link #replyLength}). */
    void receive() throws IOException {
        in.readFully(header, 0, 8);
        int status = Wire.getInt(header, 0);
        int length = Wire.getInt(header, 4);
        if (length < 0) {
            throw new IOException("reply of " + Integer.toUnsignedString(length) + " bytes");
        }
        if (reply.length < length) {
            reply = new byte[Math.max(length, reply.length * 2)];
        }
        in.readFully(reply, 0, length);
        replyLength = length;
        if (status != 0) {
            String words = new String(reply, 0, length, StandardCharsets.UTF_8);
            throw new StatusException(status, "status " + status + (words.isEmpty() ? meaning(status) : ": " + words));
        }
    }

    /** The words of the statuses a connector's user can act on (the binary protocol carries only the code). */
    static String meaning(int status) {
        switch (status) {
            case 40: return " (unauthenticated: log in again)";
            case 41: return " (unauthorized: the user lacks the permission for this; grant it, or use another user)";
            case 1009: case 1010: return " (the stream does not exist)";
            case 2010: case 2011: return " (the topic does not exist)";
            case 3009: return " (the topic is full: it reached its max_topic_size)";
            case 11000: return " (staged messages not found: expired, or dropped by an abort)";
            case 11001: return " (staged messages count mismatch)";
            case 11002: return " (producer owner mismatch)";
            case 11200: return " (not_leader_for_partition: this node does not lead the partition)";
            case 11201: return " (leader_not_available: the partition has no leader now)";
            default: return "";
        }
    }

    void call(int code, Wire payload) throws IOException {
        send(code, payload);
        receive();
    }

    static Wire columnarRequest(String stream, String topic, int partition, long offset, int count,
                                int maxBytes) {
        return new Wire().ident(stream).ident(topic).u32(partition).u64(offset).u32(count).u32(maxBytes);
    }

    /** The partition ids of a topic, or null when the stream or the topic does not exist. */
    int[] partitions(String stream, String topic) throws IOException {
        try {
            call(GET_TOPIC, new Wire().ident(stream).ident(topic));
        } catch (StatusException error) {
            if (error.status == 1009 || error.status == 1010 || error.status == 2010 || error.status == 2011) {
                return null;
            }
            throw error;
        }
        if (replyLength == 0) {
            return null;
        }
        int nameLength = reply[50] & 0xff;  // topic header: 50 bytes, then str8 name
        int count = Wire.getInt(reply, 12);
        int[] ids = new int[count];
        for (int i = 0, at = 51 + nameLength; i < count; i++, at += 40) {
            ids[i] = Wire.getInt(reply, at);
        }
        return ids;
    }

    boolean streamExists(String stream) throws IOException {
        try {
            call(GET_STREAM, new Wire().ident(stream));
        } catch (StatusException error) {
            if (error.status == 1009 || error.status == 1010) {
                return false;
            }
            throw error;
        }
        return replyLength > 0;
    }

    static void closeQuietly(Closeable closeable) {
        try {
            closeable.close();
        } catch (IOException ignored) {
            // closing is best effort
        }
    }

    @Override
    public void close() {
        closeQuietly(socket);
    }
}
