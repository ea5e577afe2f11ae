"""Speed benchmarks of tbuild against its peers: `python -m benchmarks` (see __main__.py); the other
modules here are single-purpose scripts."""
