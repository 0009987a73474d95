#!/usr/bin/env bash
# Builds gantry from this clone and installs it on PATH:
#   ./scripts/install.sh              # into ~/.local/bin (or $PREFIX/bin)
#   PREFIX=/usr/local ./scripts/install.sh
# The binary records the commit it was built from (`gantry version`).
# Outside a clone, the same binary comes from the module itself:
#   go install github.com/gantry-dev/gantry/cmd/gantry@latest
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${PREFIX:-$HOME/.local}"
bin="$prefix/bin"
mkdir -p "$bin"
echo "install: building gantry (a few minutes on 2 cores with a cold build cache)..."
# The commit, stamped even where the toolchain records no VCS information
# (GOFLAGS=-buildvcs=false).
commit="$(git rev-parse HEAD 2>/dev/null || true)"
go build -ldflags "-X github.com/gantry-dev/gantry/internal/version.commit=$commit" -o "$bin/gantry.new" ./cmd/gantry
mv -f "$bin/gantry.new" "$bin/gantry"
echo "install: $bin/gantry ($("$bin/gantry" version 2>/dev/null | head -1 || true))"
case ":$PATH:" in
*":$bin:"*) ;;
*) echo "install: $bin is not on your PATH; add it: export PATH=\"$bin:\$PATH\"" ;;
esac
