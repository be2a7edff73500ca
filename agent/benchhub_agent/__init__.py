"""benchhub-agent: one command from a GGUF file to a signed, uploaded A/B benchmark result."""

from importlib.metadata import version

# The one place the version is read: pyproject.toml sets it, and the wheel's name, `--version` and
# the payload's agent.version all come from the installed package's metadata.
__version__ = version("benchhub-agent")
