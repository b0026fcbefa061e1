#!/usr/bin/env bash
# Builds and runs the fuzz targets: libFuzzer through `libfuzzer-sys`, on stable Rust (fuzz/README.md).
#
#   fuzz/run.sh build                       build every target
#   fuzz/run.sh smoke [SECONDS]             each target for SECONDS (default 10) from its seeds, in a
#                                           throw-away corpus; fails on the first finding (CI)
#   fuzz/run.sh run [TARGET...] [-- FLAGS]  the long run: each TARGET (default: all, one after the
#                                           other) for FUZZ_SECONDS (default 600; 0 = until a finding),
#                                           growing fuzz/corpus/TARGET; findings go to fuzz/artifacts/TARGET;
#                                           FLAGS go to libFuzzer (e.g. -jobs=2 -workers=2)
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$HOME/.cargo/bin:$PATH"
TARGETS=(ip_key tier_token tier_header cidr)
host=$(rustc -vV | sed -n 's/^host: //p')
# Its own target directory: these flags differ from the addon's build, which must not be rebuilt.
export CARGO_TARGET_DIR="$PWD/target"
# Coverage instrumentation with stable `-C` flags (what cargo-fuzz passes, less the sanitizer, which
# needs nightly's -Z; debug assertions and overflow checks come from Cargo.toml's release profile).
# `--target` keeps the flags off build scripts, which are not linked with libFuzzer.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares"

build() {
  cargo build --quiet --release --locked --target "$host" --bins
}

bin() {
  echo "$CARGO_TARGET_DIR/$host/release/$1"
}

# fuzz TARGET CORPUS SECONDS [FLAGS...]: one libFuzzer run from the target's seeds into CORPUS.
fuzz() {
  local target=$1 corpus=$2 seconds=$3
  shift 3
  mkdir -p "$corpus" "artifacts/$target"
  "$(bin "$target")" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="artifacts/$target/" "$@" "$corpus" "seeds/$target"
}

cmd=${1:-run}
shift || true
case "$cmd" in
  build)
    build
    ;;
  smoke)
    seconds=${1:-10}
    build
    for t in "${TARGETS[@]}"; do
      tmp=$(mktemp -d)
      if fuzz "$t" "$tmp" "$seconds" >"$tmp.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp.log")
        echo "fuzz smoke: $t: $runs executions in ${seconds} s, no finding"
      else
        tail -n 40 "$tmp.log" >&2
        echo "fuzz smoke: $t FAILED; the input is in fuzz/artifacts/$t/ (fuzz/README.md: reproducing)" >&2
        exit 1
      fi
      rm -rf "$tmp" "$tmp.log"
    done
    ;;
  run)
    targets=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do targets+=("$1"); shift; done
    [ "${1:-}" = "--" ] && shift
    [ ${#targets[@]} -gt 0 ] || targets=("${TARGETS[@]}")
    build
    for t in "${targets[@]}"; do
      echo "fuzz: $t for ${FUZZ_SECONDS:-600} s (corpus fuzz/corpus/$t, findings fuzz/artifacts/$t)"
      fuzz "$t" "corpus/$t" "${FUZZ_SECONDS:-600}" "$@"
    done
    ;;
  *)
    sed -n '2,10p' "$0" >&2
    exit 2
    ;;
esac
