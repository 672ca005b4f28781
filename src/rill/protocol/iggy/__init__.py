"""Iggy 0.4.x's codec (wire reference): frames, command codes, commands, responses,
message layouts and headers, and the JSON values of its HTTP API. Shared by the server
and the SDK; sans-I/O like every codec under ``rill.protocol``."""
