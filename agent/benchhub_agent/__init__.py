"""benchhub-agent: one command from a GGUF file to a signed, uploaded A/B benchmark result."""

__version__ = "0.1.0"
