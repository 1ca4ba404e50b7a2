#!/usr/bin/env bash
# The project's test command: installs what the tests need, then checks
# formatting, vets, and runs every test. CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

export ONNXRUNTIME_LIB="$PWD/third_party/onnxruntime/1.29.0/linux-x64/libonnxruntime.so.1"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './third_party/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -count=1 -timeout 25m "$@" ./...
# The strict YAML decoder reads every config and request body: fuzz it
# (anchors, aliases, merge keys, redacted errors) for a bounded time.
go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 20s ./internal/yamlstrict
# The browser-facing guard of every HTTP listener parses the Host and
# Origin headers of any request: fuzz both for a few seconds each.
go test -run '^$' -fuzz '^FuzzHost$' -fuzztime 5s ./internal/httpguard
go test -run '^$' -fuzz '^FuzzOrigin$' -fuzztime 5s ./internal/httpguard
