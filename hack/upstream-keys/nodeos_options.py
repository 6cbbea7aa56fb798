#!/usr/bin/env python3
"""The long option names nodeos registers at a tag: every `add_options()` chain (and
calls through a variable holding one) in the sources of the plugins nodeos links
(programs/nodeos/CMakeLists.txt) and of nodeos itself, preprocessor lines dropped (an
#ifdef'd option counts); appbase's own options (config, config-dir, data-dir, plugin,
print-default-config, version, full-version) and nodeos' logconf are added by name (appbase
is a submodule of another repository).

Usage: hack/upstream-keys/nodeos_options.py REPO TAG > crates/upstream-keys/tests/fixtures/nodeos/TAG.options
(REPO a clone or mirror of AntelopeIO/leap or AntelopeIO/spring with its tags). The contract
test (crates/upstream-keys/tests/contract.rs) compares upstream_keys::nodeos with the result."""
import re, subprocess, sys
repo, tag = sys.argv[1], sys.argv[2]
plugins = ["chain", "chain_api", "http", "http_client", "net", "net_api", "producer",
           "producer_api", "state_history", "trace_api", "db_size_api", "resource_monitor",
           "test_control", "test_control_api", "prometheus"]
def git(*a):
    return subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True, check=True).stdout
files = []
for p in plugins:
    files += [f for f in git("ls-tree", "-r", "--name-only", tag, f"plugins/{p}_plugin").split()
              if re.search(r"\.(cpp|hpp)$", f) and "/test" not in f]
files += [f for f in git("ls-tree", "-r", "--name-only", tag, "programs/nodeos").split() if f.endswith(".cpp")]

def calls(src, start):
    """The first string literal of each call in the chain starting at src[start] ('(')."""
    names, i, n = [], start, len(src)
    while i < n:
        while i < n and src[i] in " \t\r\n": i += 1
        if i >= n or src[i] != "(": break
        # one call: (args) with strings and nesting
        depth, j, first = 0, i, None
        while j < n:
            c = src[j]
            if c == '"':
                k = j + 1
                while src[k] != '"':
                    k += 2 if src[k] == "\\" else 1
                if depth == 1 and first is None and src[i+1:j].strip() == "":
                    first = src[j+1:k]
                j = k + 1; continue
            if c == "(": depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0: break
            j += 1
        if first is not None: names.append(first.split(",")[0])
        i = j + 1
    return names

out = set()
for f in files:
    src = git("show", f"{tag}:{f}")
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"(?m)^\s*#.*$", "", src)
    for m in re.finditer(r"add_options\(\)", src):
        out.update(calls(src, m.end()))
    for v in re.findall(r"(\w+)\s*=\s*[\w.>-]+add_options\(\)", src):
        for m in re.finditer(r"\b" + v + r"\s*(?=\()", src):
            out.update(calls(src, m.end()))
out |= {"config", "config-dir", "data-dir", "logconf", "plugin", "print-default-config", "version", "full-version"}
print(f"# The options nodeos registers at {tag} (leap 5.x or spring 1.x, as the file's name says)")
print(f"# (hack/upstream-keys/nodeos_options.py REPO {tag}).")
print("\n".join(sorted(out)))
