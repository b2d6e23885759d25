#!/usr/bin/env bash
# Readies this checkout for test/gpu/run.sh on a GPU machine (see the top of
# run.sh), after `npm ci`, `make -C test/c all` and
# ../shared/tools/device-pack.sh (which puts node into .device/):
#   - builds build/gpu/launch_loop (test/gpu/launch_loop.c) with cc;
#   - copies into build/gpu/ctest what run.sh's C step needs of build/ctest
#     (test_cuda and the shared objects it loads), and into build/gpu/models
#     the three ONNX models of the models check (fetched with npm pack
#     when they are not in build/onnx-models yet);
#   - copies into .device/node_modules what the run needs of node_modules:
#     all but typescript and @types, which only `npm run test:types` uses;
#   - prints what would travel with carry [".device", "build/Release",
#     "build/gpu"] and fails when it is over the 64 MiB a run may carry
#     (all of build/ is: the C tests' other builds and mutants).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
[ -f build/Release/halrt.node ] || { echo "prepare.sh: build the addon first (npm ci)" >&2; exit 1; }
[ -x build/ctest/test_cuda ] || { echo "prepare.sh: build the C tests first (make -C test/c all)" >&2; exit 1; }
[ -f .device/node.xz ] || echo "prepare.sh: no .device/node.xz yet: run ../shared/tools/device-pack.sh" >&2

mkdir -p build/gpu
cc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc test/gpu/launch_loop.c -ldl -o build/gpu/launch_loop
rm -rf build/gpu/ctest build/gpu/models
mkdir -p build/gpu/ctest build/gpu/models
cp build/ctest/test_cuda build/ctest/*.so build/gpu/ctest/
node -e '
  const oracle = require("./test/support/onnx/oracle");
  for (const key of Object.keys(oracle.MODELS)) {
    const found = oracle.model(key);
    if (found.unavailable !== undefined) { console.error(`prepare.sh: ${found.unavailable}`); process.exit(1); }
    require("fs").copyFileSync(found.path, `build/gpu/models/${require("path").basename(found.path)}`);
  }'

mkdir -p .device
rm -rf .device/node_modules
cp -r node_modules .device/node_modules
rm -rf .device/node_modules/typescript .device/node_modules/@types .device/node_modules/.bin

# What travels: tracked and untracked files git does not ignore, plus the
# carried folders.
tree=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2> /dev/null || true) |
  awk '{ s += $1 } END { print s + 0 }')
device=$(du -sb .device | cut -f1)
builds=$(du -sbc build/Release build/gpu | tail -1 | cut -f1)
total=$((tree + device + builds))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "working tree $(mib "$tree"), .device $(mib "$device"), build/Release and build/gpu $(mib "$builds"): $(mib "$total") of 64 MiB"
if [ "$total" -gt $((64 << 20)) ]; then
  echo "prepare.sh: over the 64 MiB a run may carry" >&2
  exit 1
fi
echo 'carry [".device", "build/Release", "build/gpu"]; there: source .device/env.sh && bash test/gpu/run.sh'
