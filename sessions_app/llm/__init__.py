"""The only code that speaks to a model: an OpenAI-compatible endpoint, spoken to with `openai`.

Nothing outside this package imports `openai`, so tests and benchmarks point one setting at a
scripted upstream and exercise the same code path as production. `client` makes the requests;
the other modules are its parts.
"""
