"""rill: a persistent message streaming server speaking the Iggy 0.4.x binary protocol."""

__version__ = "0.1.0"
