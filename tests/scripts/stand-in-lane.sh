#!/usr/bin/env bash
# A stand-in for scripts/local-model.sh, for scripts/first-answer.py --stand-in: `build`
# says the real script's four steps (STAND_IN_STEP_SECONDS apart, default 2) and leaves in
# LOCAL_MODEL_DIR what a built lane holds, with a llama-server that is
# tests/scripts/stand_in_llama_server.py; `serve` is the real script's (next to this one
# in the clone, as local-model.real.sh). Nothing is downloaded, built or loaded.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${LOCAL_MODEL_DIR:?LOCAL_MODEL_DIR must name the stand-in cache}
PAUSE=${STAND_IN_STEP_SECONDS:-2}
log() { printf '%s local-model: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

case "${1:-}" in
build)
    step=0
    for name in download-source build-server download-weights assemble-weights; do
        step=$((step + 1))
        log "step $step of 4: $name"
        sleep "$PAUSE"
    done
    mkdir -p "$DIR/bin"
    printf '#!/bin/sh\n# stand-in llama-server (tests/scripts/stand_in_llama_server.py)\nexec "${PYTHON:-python3}" -m tests.scripts.stand_in_llama_server "$@"\n' \
        >"$DIR/bin/llama-server"
    chmod +x "$DIR/bin/llama-server"
    echo stand-in >"$DIR/model.gguf"
    echo "stand-in  model.gguf" >"$DIR/model.gguf.sha256"
    log "ready (stand-in)"
    ;;
serve) exec bash "$ROOT/scripts/local-model.real.sh" "$@" ;;
*) echo "usage: $0 build|serve" >&2; exit 2 ;;
esac
