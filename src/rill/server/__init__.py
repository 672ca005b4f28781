"""The rill server: configuration, the neutral core, the wire protocols (Iggy, Kafka, TANK),
transports, auth and storage."""
