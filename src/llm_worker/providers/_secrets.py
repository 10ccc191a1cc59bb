"""The providers' scrubbing of credentials: `llm_worker._secrets`, where MCP shares it."""

from llm_worker._secrets import (
    Scrubber,
    chain_leaks,
    header_secrets,
    install_log_filter,
    scrub_error,
    url_secrets,
)

__all__ = (
    "Scrubber",
    "chain_leaks",
    "header_secrets",
    "install_log_filter",
    "scrub_error",
    "url_secrets",
)
