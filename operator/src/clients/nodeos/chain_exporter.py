#!/usr/bin/env python3
"""valtune's chain exporter for nodeos, a sidecar of every nodeos trial pod.

It serves at /metrics what nodeos' own prometheus_plugin does not have:
- how far the head block is behind the wall clock, from /v1/chain/get_info
  (chain_api_plugin: head_block_num, head_block_time; spring v1.2.2
  plugins/chain_plugin/include/eosio/chain_plugin/get_info_db.hpp). The plugin has no
  head-block-time metric, and spring updates its block metrics only every 1000th block
  while more than 5 minutes behind (libraries/chain/controller.cpp, log_applied);
- the blocks applied and seconds spent catching up after start, until caught up;
- the swap of the nodeos process: `Swap` of /proc/<pid>/smaps_rollup, which counts the
  pages of a tmpfs-backed state in swap (VmSwap counts anonymous memory only).
Once nodeos is caught up it writes a marker file, which the memory hog waits for.

Standard library only; rendered into a ConfigMap by the operator.
"""

import argparse
import datetime
import json
import os
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# block_interval_ms = 500 (libraries/chain/include/eosio/chain/config.hpp).
BLOCK_SECONDS = 0.5


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodeos", default="http://127.0.0.1:8888", help="nodeos' HTTP server")
    p.add_argument("--listen", default=":9108", help="[host]:port to serve /metrics on")
    p.add_argument("--caught-up-blocks", type=float, default=120.0,
                   help="caught up once at most this many blocks behind")
    p.add_argument("--marker", default="caught-up",
                   help="file written once caught up (relative to the working directory)")
    p.add_argument("--poll-seconds", type=float, default=0.25)
    p.add_argument("--process", default="nodeos", help="the process name (comm)")
    return p.parse_args()


def block_time(text):
    """get_info's block times are UTC without a zone: 2021-06-12T10:00:00.500."""
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


def swap_bytes(procfs, name):
    """Swap of every process called `name`, from smaps_rollup (None: none found)."""
    total = None
    try:
        pids = [p for p in os.listdir(procfs) if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(os.path.join(procfs, pid, "status")) as f:
                comm = f.readline().split(":", 1)[1].strip()
            if comm != name:
                continue
            with open(os.path.join(procfs, pid, "smaps_rollup")) as f:
                for line in f:
                    if line.startswith("Swap:"):
                        total = (total or 0) + int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue
    return total


class Chain:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.head = None  # (head_block_num, head_block_time), None when get_info fails
        self.caught_up = os.path.exists(args.marker)
        self.catch_up_blocks = 0.0
        self.catch_up_seconds = 0.0
        self.previous = None  # (wall time, head_block_num) of the last poll catching up

    def poll(self):
        try:
            url = self.args.nodeos.rstrip("/") + "/v1/chain/get_info"
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
            head = (int(body["head_block_num"]), block_time(body["head_block_time"]))
        except Exception:  # not up yet, restarting, or not nodeos: no reading
            head = None
        now = time.time()
        with self.lock:
            self.head = head
            if head is None or self.caught_up:
                return now, head
            if max(0.0, now - head[1]) / BLOCK_SECONDS <= self.args.caught_up_blocks:
                # The last interval ended in sync: it is not all catching up, leave it out.
                self.caught_up = True
                with open(self.args.marker, "w") as f:
                    f.write("caught up at head block %d\n" % head[0])
                return now, head
            if self.previous is not None:
                self.catch_up_seconds += now - self.previous[0]
                self.catch_up_blocks += head[0] - self.previous[1]
            self.previous = (now, head[0])
        return now, head

    def page(self):
        now, head = self.poll()
        swap = swap_bytes(os.environ.get("PROCFS", "/proc"), self.args.process)
        with self.lock:
            out = [
                "# HELP valtune_nodeos_up Whether /v1/chain/get_info answered.",
                "# TYPE valtune_nodeos_up gauge",
                "valtune_nodeos_up %d" % (head is not None),
                "# HELP valtune_nodeos_caught_up Whether nodeos has caught up since start.",
                "# TYPE valtune_nodeos_caught_up gauge",
                "valtune_nodeos_caught_up %d" % self.caught_up,
                "# HELP valtune_nodeos_catch_up_blocks Blocks applied while catching up after start.",
                "# TYPE valtune_nodeos_catch_up_blocks gauge",
                "valtune_nodeos_catch_up_blocks %r" % float(self.catch_up_blocks),
                "# HELP valtune_nodeos_catch_up_seconds Seconds spent catching up after start.",
                "# TYPE valtune_nodeos_catch_up_seconds gauge",
                "valtune_nodeos_catch_up_seconds %r" % float(self.catch_up_seconds),
            ]
            if head is not None:
                out += [
                    "# HELP valtune_nodeos_head_block_num head_block_num of get_info.",
                    "# TYPE valtune_nodeos_head_block_num gauge",
                    "valtune_nodeos_head_block_num %d" % head[0],
                    "# HELP valtune_nodeos_head_block_time_seconds head_block_time of get_info.",
                    "# TYPE valtune_nodeos_head_block_time_seconds gauge",
                    "valtune_nodeos_head_block_time_seconds %r" % head[1],
                    "# HELP valtune_nodeos_head_block_lag_seconds The wall clock minus head_block_time.",
                    "# TYPE valtune_nodeos_head_block_lag_seconds gauge",
                    "valtune_nodeos_head_block_lag_seconds %r" % max(0.0, now - head[1]),
                ]
            if swap is not None:
                out += [
                    "# HELP valtune_nodeos_swap_bytes Swap of the nodeos process' mappings (smaps_rollup).",
                    "# TYPE valtune_nodeos_swap_bytes gauge",
                    "valtune_nodeos_swap_bytes %d" % swap,
                ]
        return "\n".join(out) + "\n"


def main():
    args = parse_args()
    chain = Chain(args)

    def keep_polling():
        while True:
            chain.poll()
            time.sleep(args.poll_seconds)

    threading.Thread(target=keep_polling, daemon=True).start()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = chain.page().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    host, _, port = args.listen.rpartition(":")
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
