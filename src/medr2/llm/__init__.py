"""LLM layer: one interface (chat, JSON-schema output, continuation log-probabilities, token
counts), a persistent cache every call goes through, and backends (local llama.cpp so far)."""
