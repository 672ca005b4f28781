"""Transports: decode, one core call, encode. Nothing else lives here."""
