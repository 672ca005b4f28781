"""Transports: how bytes move (TCP, QUIC, HTTP) and the generic connection loop that carries
every protocol's frames to its ``WireProtocol``; no protocol knowledge lives here."""
