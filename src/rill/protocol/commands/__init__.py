"""One frozen dataclass per command (wire reference §3); ``rill.protocol.codes`` indexes them."""
