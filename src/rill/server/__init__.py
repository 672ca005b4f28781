"""The rill server: configuration, core services, storage and transports."""
