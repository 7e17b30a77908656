"""Triple extractors: deterministic rules, the structured reader of guideline summaries, the LLM."""
