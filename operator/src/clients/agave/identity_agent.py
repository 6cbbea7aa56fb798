"""The identity agent of an Agave failover pair member (valtune, docs/validators.md).

It does on the pod what agave's failover guide has an operator do by hand on each
machine (anza-xyz/agave docs/src/operations/guides/validator-failover.md, "Manual
Identity Transition"), when the operator asks through one annotation of the pod, which
the kubelet writes into --request (a downward API file of metadata.annotations,
`key="value"` lines):

    valtune.dev/identity-request="<nonce> release"
        ln -sf SPARE LINK, then set-identity SPARE (the link first: a restart in
        between starts with the spare identity, never with the staked one);
    valtune.dev/identity-request="<nonce> take [require-tower] [tower=<url>]"
        copy the staked identity's tower file from the other agent (<url>) into the
        ledger, set-identity [--require-tower] STAKED, then ln -sf STAKED LINK.

set-identity is the admin RPC's setIdentity(keypair_file, require_tower), JSON-RPC over
the Unix socket LEDGER/admin.rpc, as `agave-validator -l LEDGER set-identity` sends it
(agave validator/src/commands/set_identity/mod.rs, admin_rpc_service.rs, v4.0.0); the
keypair path is the validator container's (the agent mounts no key). A request is done
once it succeeds, retried every second until then. The agent also serves this ledger's
tower files (and nothing else) on --listen, for the other member's agent.

It holds no Service Account token and reads no key: the operator confirms every step
from the validator's own getIdentity, never from the agent.
"""

import argparse
import http.server
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.request

KEY = "valtune.dev/identity-request"
TOWER = re.compile(r"^tower-1_9-[1-9A-HJ-NP-Za-km-z]{32,44}\.bin$")


def log(*parts):
    print(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), *parts, flush=True)


def request(path):
    """The request annotation's value, from the kubelet's file (Go-quoted values)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(KEY + "="):
            value = line[len(KEY) + 1 :]
            if value.startswith('"') and value.endswith('"'):
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            return value.strip()
    return None


def admin_rpc(ledger, method, params):
    """One call on the admin RPC socket: its result, or an exception with its error."""
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(os.path.join(ledger, "admin.rpc"))
        s.sendall(json.dumps(call).encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    answer = json.loads(buf)
    if "error" in answer:
        raise RuntimeError("%s: %s" % (method, answer["error"].get("message")))
    return answer.get("result")


def link(target, path):
    """ln -sf, atomically: the link is never missing."""
    tmp = path + ".tmp"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    os.symlink(target, tmp)
    os.replace(tmp, path)


def fetch_tower(url, ledger):
    name = url.rsplit("/", 1)[-1]
    if not TOWER.match(name):
        raise RuntimeError("not a tower file: %s" % url)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    tmp = os.path.join(ledger, name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(body)
    os.replace(tmp, os.path.join(ledger, name))
    return name


def perform(value, a):
    words = value.split()
    verb = words[1] if len(words) > 1 else ""
    opts = words[2:]
    if verb == "release":
        link(a.spare, a.link)
        admin_rpc(a.ledger, "setIdentity", [a.spare, False])
        log("released: set-identity", a.spare)
    elif verb == "take":
        for o in opts:
            if o.startswith("tower="):
                log("copied the tower file", fetch_tower(o[len("tower=") :], a.ledger))
        require = "require-tower" in opts
        admin_rpc(a.ledger, "setIdentity", [a.staked, require])
        link(a.staked, a.link)
        log("took: set-identity%s" % (" --require-tower" if require else ""), a.staked)
    else:
        raise RuntimeError("unknown request %r" % value)


def serve(listen, ledger):
    host, port = listen.rsplit(":", 1)

    class Towers(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.lstrip("/")
            path = os.path.join(ledger, name)
            if not TOWER.match(name) or not os.path.isfile(path):
                self.send_error(404)
                return
            with open(path, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((host, int(port)), Towers)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ledger", required=True)
    p.add_argument("--request", required=True, help="downward API file of the pod's annotations")
    p.add_argument("--link", required=True, help="the validator's --identity, a symlink")
    p.add_argument("--staked", required=True, help="the staked keypair, as the validator sees it")
    p.add_argument("--spare", required=True, help="the spare keypair, as the validator sees it")
    p.add_argument("--listen", required=True, help="HOST:PORT serving the ledger's tower files")
    a = p.parse_args()
    serve(a.listen, a.ledger)
    log("following", KEY, "in", a.request)
    done = None
    while True:
        value = request(a.request)
        if value and value != done:
            try:
                perform(value, a)
                done = value
            except Exception as e:  # retried while the request stands
                log("request %r: %s" % (value, e))
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
