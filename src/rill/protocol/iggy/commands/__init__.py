"""One frozen dataclass per command (wire reference §3); ``rill.protocol.iggy.codes`` indexes them."""
