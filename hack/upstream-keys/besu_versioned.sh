#!/bin/sh
# Whether each of Besu's versioned options (upstream_keys::besu::VERSIONED) exists at each tag
# named, as the lists' extraction reads it: the "--..." literals of Besu's CLI and RocksDB plugin
# sources (besu/src/main/java before 24.x, app/src/main/java after).
# Usage: hack/upstream-keys/besu_versioned.sh BESU_REPO > crates/upstream-keys/tests/fixtures/besu/versioned.txt
repo=$1
options="--Xsnapsync-synchronizer-flat-db-healing-enabled --Xbonsai-full-flat-db-enabled --Xbonsai-limit-trie-logs-enabled --bonsai-limit-trie-logs-enabled --miner-enabled --miner-coinbase --Xplugin-rocksdb-high-spec-enabled"
tags="22.7.0 22.10.0 23.4.0 23.7.0 24.1.2 24.2.0 24.5.1 24.5.2 24.6.0 25.5.0 25.6.0 25.7.0 25.11.0 25.12.0 26.2.0"
echo "# hyperledger/besu: TAG OPTION 1|0 (present or not), by hack/upstream-keys/besu_versioned.sh"
for t in $tags; do
  found=$(git -C "$repo" grep -h -o -E '"--[A-Za-z][A-Za-z0-9-]*"' "$t" -- \
    'app/src/main/java/org/hyperledger/besu/cli/*' 'besu/src/main/java/org/hyperledger/besu/cli/*' \
    'plugins/rocksdb/src/main/*' | tr -d '"' | sort -u)
  for o in $options; do
    if echo "$found" | grep -qx -- "$o"; then echo "$t $o 1"; else echo "$t $o 0"; fi
  done
done
