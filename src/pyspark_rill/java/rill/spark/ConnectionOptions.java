package rill.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The options every use of the connector shares (reads and writes): the servers, the login,
 * the reconnect budget, and the implementation asked for, parsed and checked as
 * pyspark_rill/options.py's ConnectionOptions with the same messages (each names the option).
 * Owns: the shared option helpers (lookup of Spark's lower-cased keys, numbers, seconds).
 */
class ConnectionOptions implements Serializable {
    final List<String> servers;  // the host:port entries of 'servers'
    final List<String> clusterHttp;  // its http(s):// entries: where a cluster's map is read
    final double failoverTimeout;  // seconds a read of a cluster waits for a partition's leader
    final String username;
    final String password;
    final String token;
    final int reconnectAttempts;
    final double reconnectBackoff;
    final String implementation;  // "jvm" or "python"
    /** Why the Python implementation must serve these options whatever is asked (null: none). */
    final String pythonTransport;

    ConnectionOptions(Map<String, String> options) {
        ReadOptions.checkKnown(options);
        implementation = get(options, "implementation", "jvm").trim().toLowerCase(Locale.ROOT);
        if (!implementation.equals("jvm") && !implementation.equals("python")) {
            throw new IllegalArgumentException(
                    "option 'implementation' must be jvm or python, got '" + implementation + "'");
        }
        String transport = get(options, "transport", "tcp").trim().toLowerCase(Locale.ROOT);
        if (!transport.equals("tcp") && !transport.equals("quic")) {
            throw new IllegalArgumentException("option 'transport' must be tcp or quic, got '" + transport
                    + "' (the connector needs rill's binary extension commands, which HTTP does not serve)");
        }
        pythonTransport = !transport.equals("tcp") || get(options, "caFile", null) != null
                ? "option 'transport': quic" : null;
        List<String> all = parseServers(get(options, "servers", "127.0.0.1:8090"));
        servers = new ArrayList<>();
        clusterHttp = new ArrayList<>();
        for (String server : all) {
            (isHttp(server) ? clusterHttp : servers).add(server);
        }
        if (servers.isEmpty()) {
            throw new IllegalArgumentException("option 'servers' names only HTTP APIs ('"
                    + String.join(",", all) + "'): give at least one server's host:port (its Iggy TCP or QUIC "
                    + "listener) too");
        }
        failoverTimeout = seconds(options, "failoverTimeout", 60.0);
        username = get(options, "username", System.getenv("RILL_USERNAME"));
        password = get(options, "password", System.getenv("RILL_PASSWORD"));
        token = get(options, "token", System.getenv("RILL_TOKEN"));
        if (token == null && (username == null || password == null)) {
            throw new IllegalArgumentException("credentials missing: give options 'username' and 'password', "
                    + "or 'token' (or the environment variables RILL_USERNAME/RILL_PASSWORD or RILL_TOKEN)");
        }
        reconnectAttempts = (int) number(options, "reconnectAttempts", 10, 0, Integer.MAX_VALUE,
                "an integer >= 0");
        reconnectBackoff = seconds(options, "reconnectBackoff", 1.0);
    }

    /** Identifies a server and a login: connections are pooled by it. */
    String connectionKey() {
        return String.join(",", servers) + "\u0000" + username + "\u0000" + password + "\u0000" + token;
    }

    static String get(Map<String, String> options, String name, String fallback) {
        String value = options.get(name.toLowerCase(Locale.ROOT));
        if (value == null) {
            value = options.get(name);
        }
        return value == null ? fallback : value;
    }

    static long number(Map<String, String> options, String name, long fallback, long least, long most,
                       String expected) {
        String text = get(options, name, null);
        if (text == null) {
            return fallback;
        }
        try {
            long value = Long.parseLong(text.trim());
            if (value >= least && value <= most) {
                return value;
            }
        } catch (NumberFormatException ignored) {
            // refused below
        }
        throw new IllegalArgumentException("option '" + name + "' must be " + expected + ", got '" + text + "'");
    }

    static double seconds(Map<String, String> options, String name, double fallback) {
        String text = get(options, name, null);
        if (text == null) {
            return fallback;
        }
        try {
            double value = Double.parseDouble(text.trim());
            if (value > 0 && value <= 3600) {
                return value;
            }
        } catch (NumberFormatException ignored) {
            // refused below
        }
        throw new IllegalArgumentException("option '" + name + "' must be a number of seconds (0 < s <= 3600), "
                + "got '" + text + "'");
    }

    static boolean isHttp(String server) {
        String lower = server.toLowerCase(Locale.ROOT);
        return lower.startsWith("http://") || lower.startsWith("https://");
    }

    static List<String> parseServers(String text) {
        List<String> servers = new ArrayList<>();
        for (String item : text.split(",")) {
            String server = item.trim();
            if (server.isEmpty()) {
                continue;
            }
            String address = server;
            if (isHttp(server)) {
                address = server.substring(server.indexOf("://") + 3);
                while (address.endsWith("/")) {
                    address = address.substring(0, address.length() - 1);
                }
            }
            int colon = address.lastIndexOf(':');
            boolean good = colon > 0 && colon < address.length() - 1;
            if (good) {
                String port = address.substring(colon + 1);
                good = port.chars().allMatch(Character::isDigit) && port.length() <= 5
                        && Integer.parseInt(port) > 0 && Integer.parseInt(port) < 65536;
            }
            if (!good) {
                throw new IllegalArgumentException("option 'servers' must be host:port or a comma-separated "
                        + "list of them (a cluster node's HTTP API as http://host:port), got '" + text + "'");
            }
            servers.add(server);
        }
        if (servers.isEmpty()) {
            throw new IllegalArgumentException("option 'servers' is empty");
        }
        return servers;
    }
}
