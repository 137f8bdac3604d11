#!/usr/bin/env bash
# Runs the official A2A conformance kit (a2a-tck, prepared by ../shared/tck/prepare.sh) against a fresh Parley:
# parley-bridge (embedded) with the conformance agent and push notifications on (the kit's webhook receiver listens on
# loopback), in a new data directory on free loopback ports. The extended card stays off: it requires API keys, and
# the kit sends no credentials. Not part of `npm test`: the kit takes about 100 s per binding on 2 cores.
#
#   bash scripts/tck.sh [--transport jsonrpc,grpc,http_json] [--levels must,should] [--tck /tmp/tck] [-k EXPR]
#
# Env: TCK_RUN (default ../shared/tck/run.sh beside the repository, else /work/shared/tck/run.sh), TCK_OUT (reports
# directory; default a new temporary one). Needs `npm run build` first. Exits with run.sh's status (0: no MUST test
# failed); the server's log is kept in the reports directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRANSPORT=jsonrpc,grpc,http_json
LEVELS=must,should
TCK=/tmp/tck
KEXPR=()
while (($#)); do
  case $1 in
    --transport) TRANSPORT=$2; shift 2 ;;
    --levels) LEVELS=$2; shift 2 ;;
    --tck) TCK=$2; shift 2 ;;
    -k) KEXPR=(-k "$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

RUN=${TCK_RUN:-}
if [[ -z $RUN ]]; then
  for candidate in "$ROOT/../shared/tck/run.sh" /work/shared/tck/run.sh; do
    [[ -f $candidate ]] && { RUN=$candidate; break; }
  done
fi
[[ -n $RUN && -f $RUN ]] || { echo "the kit's run.sh is not found; set TCK_RUN" >&2; exit 2; }
[[ -f $ROOT/apps/bridge/dist/main.js ]] || { echo "apps/bridge is not built: run npm run build first" >&2; exit 2; }

# The repository's Node (node_modules/.bin/node, as npm scripts use) when it is installed.
NODE=$ROOT/node_modules/.bin/node
[[ -x $NODE ]] || NODE=node

OUT=${TCK_OUT:-$(mktemp -d -t parley-tck-XXXXXX)}
mkdir -p "$OUT"
DATA=$(mktemp -d -t parley-tck-data-XXXXXX)
free_port() { "$NODE" -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
PORT=$(free_port)
GRPC_PORT=$(free_port)

PORT=$PORT PARLEY_GRPC_PORT=$GRPC_PORT PARLEY_DATA_DIR=$DATA PARLEY_AGENT=conformance PARLEY_PUSH=on \
  PARLEY_PUSH_ALLOWED_ADDRESSES=127.0.0.1 PARLEY_LOG_LEVEL=warn \
  "$NODE" "$ROOT/apps/bridge/dist/main.js" >"$OUT/server.log" 2>&1 &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT

URL=http://127.0.0.1:$PORT
for _ in $(seq 1 100); do
  curl -sf "$URL/readyz" >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || { echo "parley-bridge exited; its log:" >&2; cat "$OUT/server.log" >&2; exit 1; }
  sleep 0.2
done
curl -sf "$URL/readyz" >/dev/null || { echo "parley-bridge did not become ready at $URL" >&2; exit 1; }

echo "parley-bridge at $URL (gRPC 127.0.0.1:$GRPC_PORT); reports in $OUT"
status=0
bash "$RUN" "$URL" --transport "$TRANSPORT" --levels "$LEVELS" --tck "$TCK" --out "$OUT" "${KEXPR[@]}" || status=$?
exit "$status"
