"""The REST API under /agents-api/, split by workflow; every view is scoped to the caller."""
