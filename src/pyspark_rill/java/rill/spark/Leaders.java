package rill.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Reads of a rill cluster, as pyspark_rill/leaders.py: every partition is read from its leader,
 * and a failover is ridden out. Owns, per JVM and connection options, the cluster's map
 * ({@code GET /cluster} of the HTTP APIs option 'servers' names as {@code http://host:port},
 * else of any member's {@code http} listener the last map named; logged in as the options say)
 * and {@link Attempts}, the retry rule of one read: after a refusal (11200
 * not_leader_for_partition, 11201 leader_not_available) or a lost connection, wait (0.2 s
 * doubling to 2 s), read the map again and ask the leader it names from the same offset; fail
 * with one line naming option failoverTimeout when a read made no progress for that long.
 * Standalone ('servers' names no HTTP API, or the map says "standalone", or GET /cluster is 404):
 * {@link #of} is null
 * and reads go as on a single server.
 */
final class Leaders {
    static final int NOT_LEADER = 11200;
    static final int NO_LEADER = 11201;
    private static final double FIRST_WAIT = 0.2;
    private static final double MAX_WAIT = 2.0;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, Optional<Leaders>> CLUSTERS = new ConcurrentHashMap<>();

    private final ConnectionOptions options;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private volatile Map<String, Integer> leaders = Map.of();  // "stream\0topic\0partition" -> node
    private volatile Map<Integer, JsonNode> members = Map.of();  // node -> its listeners
    private volatile String mode = "standalone";

    private Leaders(ConnectionOptions options) {
        this.options = options;
    }

    /** The JVM's reads of the cluster these options name; null on a standalone server. */
    static Leaders of(ConnectionOptions options) {
        if (options.clusterHttp.isEmpty()) {
            return null;
        }
        String key = options.connectionKey() + "\u0000" + String.join(",", options.clusterHttp);
        Optional<Leaders> known = CLUSTERS.get(key);
        if (known == null) {
            Leaders cluster = new Leaders(options);
            try {
                cluster.refresh();
            } catch (IOException error) {
                throw new IllegalStateException("rill.errors.CannotEstablishConnection: option 'servers': cannot "
                        + "read the cluster's map: " + error.getMessage());
            }
            known = CLUSTERS.computeIfAbsent(key,
                    ignored -> cluster.mode.equals("cluster") ? Optional.of(cluster) : Optional.empty());
        }
        return known.orElse(null);
    }

    /** A refusal because rill is a cluster while 'servers' names no HTTP API: what to do. */
    static IllegalArgumentException notAClusterRead(ConnectionOptions options, Exception error) {
        return new IllegalArgumentException("option 'servers': rill is a cluster and " + String.join(",", options.servers)
                + " does not lead what the query reads (" + error.getMessage() + "); add any node's HTTP API to "
                + "'servers' (e.g. servers=" + options.servers.get(0) + ",http://<node>:<http port>) so that each "
                + "partition is read from its leader");
    }

    static boolean refused(IOException error) {
        return error instanceof RillConnection.StatusException
                && (((RillConnection.StatusException) error).status == NOT_LEADER
                    || ((RillConnection.StatusException) error).status == NO_LEADER);
    }

    // -- the map ---------------------------------------------------------------------------

    private List<String> httpAddresses() {
        List<String> addresses = new ArrayList<>(options.clusterHttp);
        for (JsonNode listeners : members.values()) {
            JsonNode address = listeners.get("http");
            if (address != null && address.isTextual()) {
                String url = ConnectionOptions.isHttp(address.asText()) ? address.asText() : "http://" + address.asText();
                if (!addresses.contains(url)) {
                    addresses.add(url);
                }
            }
        }
        return addresses;
    }

    /** Reads GET /cluster again, from the first HTTP API that answers. */
    synchronized void refresh() throws IOException {
        List<String> failures = new ArrayList<>();
        for (String address : httpAddresses()) {
            JsonNode status;
            try {
                status = status(address.replaceAll("/+$", ""));
            } catch (IOException error) {
                failures.add(address + ": " + error.getMessage());
                continue;
            }
            Map<Integer, JsonNode> nodes = new HashMap<>();
            for (JsonNode member : status.path("members")) {
                nodes.put(member.path("node_id").asInt(), member.path("listeners"));
            }
            Map<String, Integer> found = new HashMap<>();
            for (JsonNode row : status.path("partitions")) {
                JsonNode leader = row.get("leader");
                if (leader == null || leader.isNull()) {
                    continue;
                }
                String partition = String.valueOf(row.path("partition_id").asInt());
                List<String> streams = new ArrayList<>(List.of(row.path("stream_id").asText()));
                List<String> topics = new ArrayList<>(List.of(row.path("topic_id").asText()));
                if (row.hasNonNull("stream")) {
                    streams.add(row.get("stream").asText());
                }
                if (row.hasNonNull("topic")) {
                    topics.add(row.get("topic").asText());
                }
                for (String stream : streams) {
                    for (String topic : topics) {
                        found.put(stream + "\u0000" + topic + "\u0000" + partition, leader.asInt());
                    }
                }
            }
            mode = status.path("mode").asText("standalone");
            members = nodes;
            leaders = found;
            return;
        }
        throw new IOException("no HTTP API of the cluster answers GET /cluster: " + String.join("; ", failures));
    }

    private JsonNode status(String base) throws IOException {
        ObjectNode login = JSON.createObjectNode();
        String path;
        if (options.token != null) {
            login.put("token", options.token);
            path = "/personal-access-tokens/login";
        } else {
            login.put("username", options.username).put("password", options.password);
            path = "/users/login";
        }
        JsonNode identity = exchange(HttpRequest.newBuilder(URI.create(base + path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(login))));
        String token = identity.path("access_token").path("token").asText();
        return exchange(HttpRequest.newBuilder(URI.create(base + "/cluster"))
                .header("Authorization", "Bearer " + token).GET(), true);
    }

    private JsonNode exchange(HttpRequest.Builder request) throws IOException {
        return exchange(request, false);
    }

    /** The JSON answer; {@code missingIsStandalone}: a 404 (a server from before GET /cluster) is a standalone one. */
    private JsonNode exchange(HttpRequest.Builder request, boolean missingIsStandalone) throws IOException {
        HttpResponse<String> response;
        try {
            response = http.send(request.timeout(Duration.ofSeconds(10)).build(),
                    HttpResponse.BodyHandlers.ofString());
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", error);
        } catch (IllegalArgumentException error) {
            throw new IOException(error.getMessage(), error);
        }
        if (response.statusCode() == 401 || response.statusCode() == 403) {
            throw new IllegalArgumentException("options 'username'/'password' or 'token': the cluster's HTTP API "
                    + "refused them (" + response.statusCode() + "): " + response.body());
        }
        if (response.statusCode() == 404 && missingIsStandalone) {
            return JSON.createObjectNode().put("mode", "standalone");
        }
        if (response.statusCode() != 200) {
            throw new IOException("HTTP " + response.statusCode() + " " + response.body());
        }
        return JSON.readTree(response.body());
    }

    /** The Iggy TCP address of the partition's leader, as the map says (11201 when it names none). */
    String leaderAddress(String stream, String topic, int partition) throws IOException {
        Integer node = leaders.get(stream + "\u0000" + topic + "\u0000" + partition);
        JsonNode listeners = node == null ? null : members.get(node);
        JsonNode address = listeners == null ? null : listeners.get("iggy_tcp");
        if (address == null || !address.isTextual()) {
            throw new RillConnection.StatusException(NO_LEADER, "status 11201 (leader_not_available: the cluster "
                    + "map names no live leader of " + stream + "/" + topic + " partition " + partition + ")");
        }
        return address.asText();
    }

    /** A connection to the partition's leader (pooled per node). */
    RillConnection leader(String stream, String topic, int partition) throws IOException {
        return RillConnection.borrowAt(options, leaderAddress(stream, topic, partition));
    }

    /** A read on one connection (asked again after a refusal or a lost connection). */
    interface Read<T> {
        T on(RillConnection connection) throws IOException;
    }

    /** {@code read} on the partition's leader, retried by the rule. */
    <T> T onLeader(String stream, String topic, int partition, Read<T> read) {
        return retried(stream + "/" + topic + " partition " + partition, () -> leader(stream, topic, partition), read);
    }

    /** {@code read} (of metadata: every node has the same) on any node of 'servers', retried by the rule. */
    <T> T onAny(Read<T> read) {
        return retried("the cluster at " + String.join(",", options.servers), () -> RillConnection.borrow(options),
                read);
    }

    private interface Opener {
        RillConnection open() throws IOException;
    }

    private <T> T retried(String what, Opener opener, Read<T> read) {
        Attempts attempts = attempts(what);
        while (true) {
            RillConnection connection = null;
            try {
                connection = opener.open();
                T value = read.on(connection);
                connection.release();
                return value;
            } catch (RillConnection.StatusException error) {
                if (!refused(error)) {
                    if (connection != null) {
                        connection.release();
                    }
                    throw new IllegalArgumentException("the rill server refused a read (" + what + "): "
                            + error.getMessage());
                }
                if (connection != null) {
                    connection.release();
                }
                attempts.failed(error);
            } catch (IOException error) {
                if (connection != null) {
                    connection.close();
                }
                attempts.failed(error);
            } catch (RuntimeException error) {
                if (connection != null) {
                    connection.release();
                }
                throw error;
            }
        }
    }

    Attempts attempts(String what) {
        return new Attempts(what);
    }

    /** The retries of one read (see the class comment). */
    final class Attempts {
        private final String what;
        private long started;
        private double wait;
        private int failures;

        Attempts(String what) {
            this.what = what;
            progressed();
        }

        void progressed() {
            started = System.nanoTime();
            wait = FIRST_WAIT;
            failures = 0;
        }

        /** Waits and reads the map again (ask again), or fails once failoverTimeout went by. */
        void failed(IOException error) {
            failures++;
            double spent = (System.nanoTime() - started) / 1e9;
            if (spent + wait > options.failoverTimeout) {
                throw new IllegalStateException("rill.errors.LeaderNotAvailable: " + what + ": no leader answered "
                        + "within option failoverTimeout=" + seconds(options.failoverTimeout) + " s (" + failures
                        + " attempts; the last: " + describe(error) + ")");
            }
            System.err.println("rill: " + what + ": " + describe(error) + "; asking the cluster map again in "
                    + wait + " s");
            RillConnection.sleep(wait);
            wait = Math.min(wait * 2, MAX_WAIT);
            try {
                refresh();
            } catch (IOException failure) {  // (no HTTP API answers now: the next try says)
                System.err.println("rill: " + failure.getMessage());
            }
        }
    }

    private static String describe(IOException error) {
        return error.getMessage() != null ? error.getMessage()
                : error instanceof java.io.EOFException ? "the connection was closed" : error.toString();
    }

    private static String seconds(double value) {
        return value == Math.rint(value) ? String.valueOf((long) value) : String.valueOf(value);
    }
}
