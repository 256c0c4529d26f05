"""The OpenAI-compatible doors (`/v1/`): any OpenAI client talks to a Parley agent, and the
conversation is kept as a Parley session."""
