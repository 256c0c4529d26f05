"""The run engine: one user turn and the agent's answer, streamed, persisted, measured.

A run's story, module by module: `start` checks the ask and batches it; `creation` writes the
runs and their messages in one transaction, with the plan of each model call (`plan`), sending
that call ahead (`early`);
`generate` streams the answer in rounds of model calls and tool calls, merging pieces
(`coalesce`) and saving as it goes (`store`); `cancel` stops it; a run that called its client's
tools pauses, and `resume` goes on with it once their results come. A run's state is one `LiveRun`
(`live`), which `registry` holds from its creation to its end; `lifespan` starts the engine on
the loop that serves and stops it gracefully (streaming answers stored as they stand);
`liveness` vouches for this process's runs and reaps those whose process died; `dbthread`
batches the database work of many runs into one thread hop.

Adapters (the API, the chat socket, commands) import only what is named here.
"""

from sessions_app.engine import lifespan
from sessions_app.engine.cancel import cancel_run
from sessions_app.engine.errors import InputError, NotServing, RunConflict
from sessions_app.engine.live import Placement, RunHandle, RunOptions
from sessions_app.engine.liveness import ensure_heartbeat
from sessions_app.engine.resume import continue_run
from sessions_app.engine.start import start_run
from sessions_app.engine.toolcalls import answered

__all__ = [
    "InputError",
    "NotServing",
    "Placement",
    "RunConflict",
    "RunHandle",
    "RunOptions",
    "answered",
    "cancel_run",
    "continue_run",
    "ensure_heartbeat",
    "lifespan",
    "start_run",
]
