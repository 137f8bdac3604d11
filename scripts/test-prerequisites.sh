#!/usr/bin/env bash
# Runs before `npm test`: makes sure what the tests talk to is there, so the
# README's one test command works on a fresh machine.
#  - Debian's protoc, gRPC Python plugin and runtimes, for the Python client proof (clients/python);
#  - a local PostgreSQL on 127.0.0.1:5432, for the PostgreSQL store and scale-out tests;
#  - Debian's chromium, which the console's end-to-end test drives headless (playwright-core cannot download a browser).
set -uo pipefail

have_python_tools() {
  command -v grpc_python_plugin >/dev/null 2>&1 && /usr/bin/python3 -c "import grpc, google.protobuf" 2>/dev/null
}

if ! have_python_tools; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test prerequisites: installing protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf >/dev/null
  else
    echo "test prerequisites: the Python client test needs: sudo apt-get install -y protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf" >&2
  fi
fi

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test prerequisites: installing chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "test prerequisites: the console's browser test needs: sudo apt-get install -y chromium" >&2
  fi
fi

if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "test prerequisites: starting the local PostgreSQL cluster"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
  fi
fi
if ! { command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432; }; then
  echo "test prerequisites: the PostgreSQL tests need a server on 127.0.0.1:5432 (user postgres, trust auth) or PARLEY_TEST_PG_URL" >&2
fi
exit 0
