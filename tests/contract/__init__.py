"""Contract tests: what the project renders vs. SGLang's own parser and models."""
