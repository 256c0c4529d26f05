"""The scripted upstream for benchmarks: one process whose answer is chosen by the model name.

Every scenario talks to the same process, so Direct, Parley and Naive are measured against the
same server without restarts: the model `bench:200:0.05` answers 200 tokens, 0.05 s apart. Any
other model gets the echo reply of testkit.upstream.
"""

from __future__ import annotations

import argparse
import contextlib
import threading

from testkit.upstream import Reply, ScriptedUpstream, echo_reply


def model_name(tokens: int, delay: float) -> str:
    return f"bench:{tokens}:{delay:g}"


def reply_for(body: dict) -> Reply:
    parts = str(body.get("model") or "").split(":")
    if len(parts) == 3 and parts[0] == "bench":
        try:
            return Reply(tokens=int(parts[1]), delay=float(parts[2]))
        except ValueError:
            pass
    return echo_reply(body)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    with ScriptedUpstream(default=reply_for, host="127.0.0.1", port=args.port) as up:
        print(f"scripted upstream at {up.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
