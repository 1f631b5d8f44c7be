"""Judges a fault campaign's history (written by workload.py and campaign.py). Pure: it reads
files and returns a verdict; it starts and signals nothing.

The history directory holds ops-*.bin and ids-*.bin (workload.py), events.jsonl (one JSON object
a line: nemesis faults with their times, server starts and exits, resource samples) and
errors-*.txt (samples of failures). check() returns a dict; its "failures" list is empty when
the campaign passed:
  - no snowflake id was received twice (any server, any incarnation, any client);
  - no segment id of a tag was received twice;
  - no id of a range a peer's own server took ("peer_range" events: Leaf's or tinyid's
    allocation on the same row, or runs of the snowflake ids Leaf's snowflake servers issued
    beside sekka's) was received from sekka, and the peer's ranges are disjoint;
  - no machine id was held by two CosId instances at once ("machine_hold" events: from the
    reply that gave an instance its id until it stopped using it);
  - ids of a tag from one server process increase: a request that started after another one on
    the same process and tag had finished got larger ids;
  - the ids of one reply (a batch) increase, of either kind;
  - every error reply is one the contract documents for these requests;
  - no reply was malformed; no server died unless the nemesis killed it;
  - no connection failed at a server that no fault aimed at then."""

import array
import bisect
import glob
import json
import os
import statistics

from workload import (CODES, DECODE_OPS, IDS_HEADER, MALFORMED, OK, OP_RECORD, OPS, OUTCOMES,
                      RUN, SEGMENT_OPS, SNOWFLAKE_OPS, STRICT_OPS, STRICT_SPACE, TRANSPORT,
                      UNDOCUMENTED)

CLASSES = {"snowflake": SNOWFLAKE_OPS, "segment": SEGMENT_OPS, "decode": DECODE_OPS,
           "strict": STRICT_OPS}


class History:
    """Every request of every client, in flat arrays (a long campaign has millions)."""

    def __init__(self, directory):
        self.start = array.array("d")
        self.end = array.array("d")
        self.server = bytearray()
        self.op = bytearray()
        self.outcome = bytearray()
        self.code = bytearray()
        # When the connection a request used was last seen working: the start of the same
        # client's previous request to that server if it succeeded (the connection was kept),
        # else -1 (this request made a new one).
        self.reused_since = array.array("d")
        # Runs of ids: first, last, the request's global index, and the id space
        # (0 = snowflake, 1 + k = the k-th tag).
        self.first = array.array("q")
        self.last = array.array("q")
        self.ref = array.array("l")
        self.space = bytearray()
        self.events = []
        # Requests whose ids did not increase within the reply (a batch must be in order).
        self.unordered_batches = []
        for path in sorted(glob.glob(os.path.join(directory, "ops-*.bin"))):
            client = path[path.rindex("-") + 1:-4]
            base = len(self.start)
            with open(path, "rb") as f:
                data = f.read()
            usable = len(data) - len(data) % OP_RECORD.size  # a client killed mid-write
            kept = {}  # server -> start of this client's last request there, if it succeeded
            for start, latency, server, op, outcome, code in OP_RECORD.iter_unpack(data[:usable]):
                self.reused_since.append(kept.get(server, -1.0))
                kept[server] = start if outcome == OK else -1.0
                self.start.append(start)
                self.end.append(start + latency)
                self.server.append(server)
                self.op.append(op)
                self.outcome.append(outcome)
                self.code.append(code)
            self._read_ids(os.path.join(directory, f"ids-{client}.bin"), base)
        events = os.path.join(directory, "events.jsonl")
        if os.path.exists(events):
            with open(events) as f:
                self.events = [json.loads(line) for line in f if line.strip()]
        self.samples = []
        for path in sorted(glob.glob(os.path.join(directory, "errors-*.txt"))):
            with open(path, errors="replace") as f:
                self.samples += [line.rstrip("\n") for line in f]

    def _read_ids(self, path, base):
        if not os.path.exists(path):
            return
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + IDS_HEADER.size <= len(data):
            index, space, _server, runs = IDS_HEADER.unpack_from(data, pos)
            pos += IDS_HEADER.size
            if pos + runs * RUN.size > len(data):
                break
            previous = None
            for k in range(runs):
                first, last = RUN.unpack_from(data, pos + k * RUN.size)
                if last < first or (previous is not None and first <= previous):
                    self.unordered_batches.append(base + index)
                previous = last
                self.first.append(first)
                self.last.append(last)
                self.ref.append(base + index)
                self.space.append(space)
            pos += runs * RUN.size

    def __len__(self):
        return len(self.start)


def repeated_ids(history):
    """[(space, count of repeated ids, example id, (request, request))] per id space that has
    any: an id received n times counts n - 1."""
    found = []
    spaces = sorted(set(history.space))
    for space in spaces:
        idx = [i for i in range(len(history.first)) if history.space[i] == space]
        idx.sort(key=history.first.__getitem__)
        covered, covered_by, repeats, example = None, None, 0, None
        for i in idx:
            first, last = history.first[i], history.last[i]
            if covered is not None and first <= covered:
                repeats += min(last, covered) - first + 1
                if example is None:
                    example = (first, (history.ref[covered_by], history.ref[i]))
            if covered is None or last > covered:
                covered, covered_by = last, i
        if repeats:
            found.append((space, repeats, example[0], example[1]))
    return found


def peer_ranges(history, tag_names):
    """{space: [(first, last)]} of the peers' "peer_range" events: a segment peer's names its
    tag (its space is the tag's), a snowflake peer's its space and its runs."""
    by_space = {}
    for e in history.events:
        if e.get("type") != "peer_range":
            continue
        if "tag" in e:
            space = 1 + list(tag_names).index(e["tag"]) if e["tag"] in tag_names else None
            by_space.setdefault(space, []).append((e["first"], e["last"]))
        else:
            by_space.setdefault(e["space"], []).extend(tuple(r) for r in e["runs"])
    return by_space


def peer_overlaps(history, tag_names):
    """[(space, id, what)] for the first id of each space that a peer's range shares with another
    of its ranges or with an id sekka issued."""
    found = []
    for space, ranges in peer_ranges(history, tag_names).items():
        ranges.sort()
        for (a0, a1), (b0, _) in zip(ranges, ranges[1:]):
            if b0 <= a1:
                found.append((space, b0, "two of the peer's ranges"))
                break
        starts = [r[0] for r in ranges]
        for i in range(len(history.first)):
            if history.space[i] != space:
                continue
            first, last = history.first[i], history.last[i]
            k = bisect.bisect_right(starts, last) - 1  # the last range starting at or below `last`
            if k >= 0 and ranges[k][1] >= first:
                found.append((space, max(first, ranges[k][0]), "a peer's range and sekka"))
                break
    return found


def machine_overlaps(history):
    """[(machine id, holding, holding)] for each machine id two instances held at once (the
    first such pair)."""
    by_machine = {}
    for e in history.events:
        if e.get("type") == "machine_hold":
            by_machine.setdefault(e["machine"], []).append(e)
    found = []
    for machine, holds in sorted(by_machine.items()):
        holds.sort(key=lambda e: e["from"])
        longest = None
        for h in holds:
            if longest is not None and h["from"] < longest["until"] and (
                    h["instance"] != longest["instance"]):
                found.append((machine, longest, h))
                break
            if longest is None or h["until"] > longest["until"]:
                longest = h
    return found


def id_count(history):
    return sum(history.last[i] - history.first[i] + 1 for i in range(len(history.first)))


def incarnations(history):
    """{server: sorted start times of its processes} from the "start" events."""
    starts = {}
    for e in history.events:
        if e.get("type") == "start":
            starts.setdefault(e["server"], []).append(e["t"])
    for v in starts.values():
        v.sort()
    return starts


def segment_order_violations(history):
    """Requests whose segment ids are not above those of a request on the same server process
    and tag that had finished before they started. [(tag space, server, request, request)]."""
    starts = incarnations(history)
    groups = {}
    for i in range(len(history.first)):
        space = history.space[i]
        if space == 0 or space == STRICT_SPACE:  # strict ids: strict_order_violations
            continue
        r = history.ref[i]
        server = history.server[r]
        times = starts.get(server, [])
        k = bisect.bisect_right(times, history.start[r]) - 1
        if k < 0 or (k + 1 < len(times) and history.end[r] >= times[k + 1]):
            continue  # not wholly inside one process's life
        g = groups.setdefault((space, server, k), {})
        lo, hi = g.get(r, (history.first[i], history.last[i]))
        g[r] = (min(lo, history.first[i]), max(hi, history.last[i]))
    violations = []
    for (space, server, _k), requests in groups.items():
        by_start = sorted(requests, key=history.start.__getitem__)
        by_end = sorted(requests, key=history.end.__getitem__)
        j, highest, highest_by = 0, None, None
        for r in by_start:
            while j < len(by_end) and history.end[by_end[j]] < history.start[r]:
                done = by_end[j]
                if highest is None or requests[done][1] > highest:
                    highest, highest_by = requests[done][1], done
                j += 1
            if highest is not None and requests[r][0] <= highest:
                violations.append((space, server, highest_by, r))
    return violations


def strict_order_violations(history):
    """Strict-id requests whose ids are not above those of every strict request, on any server,
    that had finished before they started (real-time order, as Jepsen's linearizability checks
    order non-overlapping operations). [(request finished first, request started after)]."""
    requests = {}
    for i in range(len(history.first)):
        if history.space[i] != STRICT_SPACE:
            continue
        r = history.ref[i]
        lo, hi = requests.get(r, (history.first[i], history.last[i]))
        requests[r] = (min(lo, history.first[i]), max(hi, history.last[i]))
    by_start = sorted(requests, key=history.start.__getitem__)
    by_end = sorted(requests, key=history.end.__getitem__)
    violations, j, highest, highest_by = [], 0, None, None
    for r in by_start:
        while j < len(by_end) and history.end[by_end[j]] < history.start[r]:
            done = by_end[j]
            if highest is None or requests[done][1] > highest:
                highest, highest_by = requests[done][1], done
            j += 1
        if highest is not None and requests[r][0] <= highest:
            violations.append((highest_by, r))
    return violations


def unexplained_connection_failures(history):
    """Requests that failed on the connection (refused, reset, closed) at a server that no
    fault aimed at then and that was not starting or exiting: a server that drops connections
    on its own. [(request index)]. Timeouts are not counted: a loaded machine may be slow; nor
    is the first use of a connection kept from before the server last exited (the server that
    had it is gone, however long ago)."""
    windows, exits = {}, {}
    for e in history.events:
        if e.get("type") == "fault" and e.get("servers"):
            end = e.get("ready") or e.get("heal") or e["t0"]
            for s in e["servers"]:
                windows.setdefault(s, []).append((e["t0"] - 0.5, end + 1.0))
        elif e.get("type") in ("start", "exit"):
            windows.setdefault(e["server"], []).append((e["t"] - 2.0, e["t"] + 2.0))
            if e["type"] == "exit":
                exits.setdefault(e["server"], []).append(e["t"])
    out = []
    for i in range(len(history)):
        if history.outcome[i] != TRANSPORT:
            continue
        t, since = history.start[i], history.reused_since[i]
        if any(a <= t <= b for a, b in windows.get(history.server[i], [])):
            continue
        if since >= 0 and any(since < x < t for x in exits.get(history.server[i], [])):
            continue
        out.append(i)
    return out


def outcome_counts(history):
    """{op name: {outcome or error code: count}}."""
    counts = {}
    for i in range(len(history)):
        key = OUTCOMES[history.outcome[i]]
        if key == "error":
            key = CODES[history.code[i]]
        per_op = counts.setdefault(OPS[history.op[i]], {})
        per_op[key] = per_op.get(key, 0) + 1
    return counts


def success_times(history):
    """{(server, class): sorted end times of its successful requests}."""
    times = {}
    for i in range(len(history)):
        if history.outcome[i] != OK:
            continue
        for name, ops in CLASSES.items():
            if history.op[i] in ops:
                times.setdefault((history.server[i], name), []).append(history.end[i])
    for v in times.values():
        v.sort()
    return times


def longest_gap(times, t0, t1):
    """The longest time within [t0, t1] without a success, counting from t0."""
    k = bisect.bisect_right(times, t0)
    prev, gap = t0, 0.0
    while k < len(times) and times[k] <= t1:
        gap = max(gap, times[k] - prev)
        prev = times[k]
        k += 1
    return max(gap, t1 - prev) if k == len(times) or times[k] > t1 else gap


# The faults that restart a server (a new process takes a worker id).
RESTARTS = ("kill", "fresh_data_dir", "restart_clock_back")


def fault_stats(history, times=None):
    """Per fault: the longest time its servers went without issuing ids of its class, from the
    fault's start until every server was ready again, and the recovery time (heal to ready)."""
    times = times if times is not None else success_times(history)
    n_servers = 1 + max(history.server) if len(history) else 0
    # Strict ids are the cluster's, not a server's: answered by any server counts.
    strict = sorted(t for (_server, name), v in times.items() if name == "strict" for t in v)
    out = []
    for e in history.events:
        if e.get("type") != "fault":
            continue
        window_end = e.get("ready") or e.get("heal") or e["t0"]
        targets = e.get("servers")
        if targets is None:
            targets = list(range(n_servers))
        gaps = [longest_gap(times.get((s, e.get("class", "snowflake")), []), e["t0"], window_end)
                for s in targets]
        # A restart's cost depends on worker.keep_id (a wait past its own id's hwm, or none):
        # restarts of servers that keep their id are their own rows.
        kind = e["kind"] + (" (keep_id)" if e.get("keep_id") and e["kind"] in RESTARTS else "")
        out.append({"kind": kind, "unavailable_s": round(max(gaps, default=0.0), 3),
                    "strict_unavailable_s": (round(longest_gap(strict, e["t0"], window_end), 3)
                                             if strict else None),
                    "recovery_s": (round(e["ready"] - e["heal"], 3)
                                   if e.get("ready") and e.get("heal") else None),
                    "recovered": bool(e.get("ready"))})
    return out


def summarize_faults(stats):
    """{kind: {count, unavailable median/max, recovery median/max, unrecovered}}."""
    by_kind = {}
    for s in stats:
        by_kind.setdefault(s["kind"], []).append(s)
    out = {}
    for kind, items in sorted(by_kind.items()):
        un = [s["unavailable_s"] for s in items]
        rec = [s["recovery_s"] for s in items if s["recovery_s"] is not None]
        strict = [s["strict_unavailable_s"] for s in items
                  if s.get("strict_unavailable_s") is not None]
        out[kind] = {"count": len(items),
                     "strict_unavailable_max_s": round(max(strict), 3) if strict else None,
                     "unavailable_median_s": round(statistics.median(un), 3),
                     "unavailable_max_s": round(max(un), 3),
                     "recovery_median_s": round(statistics.median(rec), 3) if rec else None,
                     "recovery_max_s": round(max(rec), 3) if rec else None,
                     "unrecovered": sum(1 for s in items if not s["recovered"])}
    return out


def resource_report(history):
    """Per server: (RSS KiB, fds) in the first and the last sample of its last process."""
    first, last = {}, {}
    for e in history.events:
        if e.get("type") != "usage":
            continue
        for server, (rss, fds, incarnation) in e["servers"].items():
            if server not in first or first[server][2] != incarnation:
                first[server] = (rss, fds, incarnation)
            last[server] = (rss, fds, incarnation)
    return {s: {"rss_kib": [first[s][0], last[s][0]], "fds": [first[s][1], last[s][1]],
                "process": first[s][2]} for s in sorted(first)}


def fd_report(history):
    """{server: {"start": breakdown, "end": breakdown}} from the "fds" events."""
    out = {}
    for e in history.events:
        if e.get("type") == "fds":
            for server, breakdown in e["servers"].items():
                out.setdefault(server, {})[e["when"]] = breakdown
    return out


def check(directory, tag_names=()):
    h = History(directory)
    failures = []
    repeats = repeated_ids(h)
    for space, count, example, (a, b) in repeats:
        name = ("snowflake" if space == 0 else "strict" if space == STRICT_SPACE else
                f"tag {tag_names[space - 1] if tag_names else space}")
        failures.append(f"{count} repeated {name} ids, e.g. {example} (requests at "
                        f"{h.start[a]:.3f} on server {h.server[a]} and {h.start[b]:.3f} on "
                        f"server {h.server[b]})")
    shared = peer_overlaps(h, tag_names)
    for space, example, what in shared:
        name = ("snowflake" if space == 0 else
                f"tag {tag_names[space - 1] if space and tag_names else space}")
        failures.append(f"id {example} of {name} was issued by {what}")
    twice = machine_overlaps(h)
    for machine, a, b in twice:
        failures.append(f"machine id {machine} was held by {a['instance']} ({a['from']:.3f} to "
                        f"{a['until']:.3f}) and {b['instance']} (from {b['from']:.3f}) at once")
    order = segment_order_violations(h)
    if order:
        space, server, a, b = order[0]
        failures.append(f"{len(order)} segment requests got ids below an earlier request's on the "
                        f"same server process, e.g. server {server} at {h.start[a]:.3f} and "
                        f"{h.start[b]:.3f}")
    strict = strict_order_violations(h)
    if strict:
        a, b = strict[0]
        failures.append(f"{len(strict)} strict requests got ids below those of a strict request "
                        f"that finished before they began, e.g. server {h.server[a]} done at "
                        f"{h.end[a]:.3f}, server {h.server[b]} begun at {h.start[b]:.3f}")
    if h.unordered_batches:
        r = h.unordered_batches[0]
        failures.append(f"{len(h.unordered_batches)} replies whose ids did not increase within "
                        f"the reply, e.g. server {h.server[r]} at {h.start[r]:.3f}")
    undocumented = sum(1 for i in range(len(h)) if h.code[i] == UNDOCUMENTED)
    if undocumented:
        failures.append(f"{undocumented} error replies not documented for these requests")
    malformed = sum(1 for i in range(len(h)) if h.outcome[i] == MALFORMED)
    if malformed:
        failures.append(f"{malformed} malformed replies")
    dropped = unexplained_connection_failures(h)
    if dropped:
        i = dropped[0]
        failures.append(f"{len(dropped)} requests failed on the connection at a server no fault "
                        f"aimed at, e.g. server {h.server[i]} at {h.start[i]:.3f}")
    crashes = [e for e in h.events if e.get("type") == "exit" and not e.get("expected")]
    for e in crashes:
        failures.append(f"server {e['server']} exited on its own ({e.get('status')}): "
                        f"{e.get('log', '')[:200]}")
    stats = fault_stats(h)
    faults = summarize_faults(stats)
    unrecovered = sum(1 for s in stats if not s["recovered"])
    if unrecovered:
        failures.append(f"{unrecovered} faults after which the servers were not all ready again "
                        "within the campaign's bound")
    result = {
        "requests": len(h),
        "ids_checked": id_count(h),
        "repeated_ids": sum(r[1] for r in repeats),
        "peer_ranges": sum(1 for e in h.events if e.get("type") == "peer_range"),
        "peer_ids": sum(last - first + 1 for ranges in peer_ranges(h, tag_names).values()
                        for first, last in ranges),
        "peer_overlaps": len(shared),
        "machine_holds": sum(1 for e in h.events if e.get("type") == "machine_hold"),
        "machine_overlaps": len(twice),
        "segment_order_violations": len(order),
        "strict_requests": len({h.ref[i] for i in range(len(h.first))
                                if h.space[i] == STRICT_SPACE}),
        "strict_order_violations": len(strict),
        "unordered_batches": len(h.unordered_batches),
        "undocumented_errors": undocumented,
        "malformed_replies": malformed,
        "unexplained_connection_failures": len(dropped),
        "server_exits": [{k: e.get(k) for k in ("server", "t", "status", "expected", "log")}
                         for e in h.events if e.get("type") == "exit"],
        "outcomes": outcome_counts(h),
        "faults": faults,
        "fault_events": stats,
        "unrecovered_faults": unrecovered,
        "resources": resource_report(h),
        "fds": fd_report(h),
        "error_samples": h.samples[:40],
        "failures": failures,
    }
    return result
