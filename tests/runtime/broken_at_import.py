"""A handler module that fails as it is imported, for the worker command's tests."""

RATE = 1 / 0

app = None
