#!/usr/bin/python3
"""The Python client's conformance driver (tests/conformance/PROTOCOL.md): JSON requests on
stdin, one JSON reply a line on stdout."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sekka_client  # noqa: E402

SECONDS = {"connect_timeout_ms": "connect_timeout", "timeout_ms": "timeout",
           "target_refill_ms": "target_refill", "validity_ms": "validity",
           "backoff_min_ms": "backoff_min", "backoff_max_ms": "backoff_max",
           "strict_wait_ms": "strict_wait"}


def kind(e):
    if isinstance(e, ValueError):
        return "invalid_argument"
    for name, k in (("AuthError", "auth"), ("NoServerError", "no_server"),
                    ("ClosedError", "closed"), ("SekkaError", "refused")):
        cls = getattr(sekka_client, name, None)
        if cls is not None and isinstance(e, cls):
            return k
    return "other:" + type(e).__name__


def open_client(req):
    options = {}
    for key, value in req["options"].items():
        if key in SECONDS:
            options[SECONDS[key]] = value / 1000
        else:
            options[key] = value
    return sekka_client.Client(servers=req["servers"], **options)


def handle(client, req):
    """(reply, client) for one request."""
    op = req["op"]
    if op == "open":
        return {"ok": True}, open_client(req)
    if op in ("ids", "tag"):
        ids = []
        try:
            for _ in range(req["n"]):
                ids.append(str(client.next_id() if op == "ids" else client.next(req["tag"])))
        except Exception as e:  # noqa: BLE001 - every failure is reported by kind
            return {"ids": ids, "error": kind(e), "message": str(e)}, client
        return {"ids": ids}, client
    if op == "strict":
        ids = []
        try:
            for _ in range(req["n"]):
                ids.append(str(client.strict(req["tag"])))
        except Exception as e:  # noqa: BLE001 - every failure is reported by kind
            return {"ids": ids, "error": kind(e), "message": str(e)}, client
        return {"ids": ids}, client
    if op == "strict_batch":
        return {"ids": [str(i) for i in client.strict_batch(req["tag"], req["n"])]}, client
    if op == "batch":
        return {"ids": [str(i) for i in client.next_ids(req["n"])]}, client
    if op == "stats":
        return {"stats": client.stats()}, client
    if op in ("close", "exit"):
        if op == "close":
            client.close()
        return {"ok": True}, client
    raise ValueError(f"unknown op {op!r}")


def main():
    client = None
    for line in sys.stdin:
        req = json.loads(line)
        start = time.monotonic()
        try:
            reply, client = handle(client, req)
        except Exception as e:  # noqa: BLE001
            reply = {"error": kind(e), "message": str(e)}
        reply["ms"] = (time.monotonic() - start) * 1000
        print(json.dumps(reply), flush=True)
        if req["op"] == "exit":
            return


if __name__ == "__main__":
    main()
