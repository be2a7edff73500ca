"""benchhub's benchmark suite (issue 6): `make bench` runs it; docs/performance.md holds the figures.

Every figure is printed with its conditions (machine, load, sizes, repetitions); none is asserted.
"""
