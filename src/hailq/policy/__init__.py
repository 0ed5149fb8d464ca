"""Pure decisions, tested without a database."""
