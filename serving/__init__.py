"""The processes `manage.py serve` runs: the supervisor and its daphne workers, nginx in front,
the embedded model's llama.cpp server, where each listens, the channel layer between them, and
the library tuning each process applies as it loads. It depends on the apps; nothing in the apps
imports it."""
