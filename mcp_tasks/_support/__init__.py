"""Plumbing every room shares: the anyio backend helpers, rate-limited logs, names
loaded on first use."""
