"""The ``hailq`` command line (``hailq.cli.main``). The only part of hailq that reads
environment variables."""
