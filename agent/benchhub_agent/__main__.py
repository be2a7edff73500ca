"""`python -m benchhub_agent` runs the same CLI as the `benchhub-agent` console script."""

from .cli import main

main()
