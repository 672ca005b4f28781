"""Reply payloads (wire reference §4): one frozen dataclass per record, with encode/decode."""
