package rill.spark;

/**
 * A failure of the connector whose message says all a user needs (the option or the cause),
 * thrown where Spark would otherwise print a JVM stack trace after it: a task's failure reason
 * is then one line, {@code rill.spark.RillError: <message>}. No stack trace is recorded.
 */
final class RillError extends RuntimeException {
    RillError(String message) {
        super(message, null, false, false);
    }

    /** {@code error} as a RillError (the message kept; the class named where it says more). */
    static RillError of(Throwable error) {
        if (error instanceof RillError) {
            return (RillError) error;
        }
        String message = error.getMessage();
        boolean plain = error instanceof IllegalArgumentException || error instanceof IllegalStateException
                || error instanceof java.io.IOException;
        return new RillError(plain && message != null ? message : error.toString());
    }
}
