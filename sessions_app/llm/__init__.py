"""The only code that speaks to a model: an OpenAI-compatible endpoint, spoken to with `openai`.

Nothing else in Parley imports `openai`, so tests and benchmarks point one setting at a
scripted upstream and exercise the same code path as production. `client` makes the requests,
with the others as its parts; `embedded` starts the embedded model.
"""
