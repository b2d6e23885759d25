#!/usr/bin/env bash
# The consumer test (npm run test:consumer; CI runs it after npm test): packs
# halrt with `npm pack` (prepack builds the linux-x64 prebuild) and installs
# the tarball with `npm install --offline` into new projects:
#   prebuilt      PATH holds only node, npm, npx and sh, and CC/CXX name a
#                 script that fails: no compiler can run; afterwards there is
#                 no build/ and the process loads prebuilds/linux-x64/
#   source        --build-from-source: node-gyp compiles build/Release/halrt.node
#   wrong-arch    the tarball repacked with its prebuild marked as an aarch64
#                 binary: loading it fails, so the install compiles instead
# In each, consumer.cjs requires the package, makes a tensor on local-sync,
# reads it back and checks which addon file the process mapped;
# consumer.mjs imports it as an ES module (named imports) and runs the
# shipped example module through load(); `npx halrt devices` and
# `npx halrt --version` run; in the prebuilt project every js block of
# README.md and docs/ runs verbatim; consumer.ts is compiled by this repository's
# tsc (strict, module nodenext, @types/node from here) against the installed
# index.d.ts and run. Prints each install's wall time. Any failure ends the
# script with a line saying what failed, and a non-zero status.
#
# The only dependency, node-gyp-build (the version package-lock.json locks),
# must be in the npm cache for --offline: when it is not, it is added first
# (online).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/halrt-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "test/consumer/run.sh: FAILED: $*" >&2
  exit 1
}

version=$(node -p "require('./package.json').version")
loader=$(node -p "require('./package-lock.json').packages['node_modules/node-gyp-build'].version")
if ! npm cache add --offline "node-gyp-build@$loader" > /dev/null 2>&1; then
  echo "test/consumer/run.sh: adding node-gyp-build@$loader to the npm cache"
  npm cache add "node-gyp-build@$loader" || fail "npm cache add node-gyp-build@$loader"
fi

echo "test/consumer/run.sh: npm pack (prepack builds the prebuild)"
npm pack --json --pack-destination "$work" > "$work/pack.json" || fail 'npm pack'
tarball=$work/$(node -p "JSON.parse(require('fs').readFileSync('$work/pack.json', 'utf8'))[0].filename")
prebuild=prebuilds/linux-x64/halrt.glibc.node
tar -tzf "$tarball" > "$work/listing"
grep -qx "package/$prebuild" "$work/listing" || fail "the tarball has no $prebuild"

# The wrong-arch tarball: the same package, its prebuild's ELF machine field
# (offset 18) set to aarch64 (0xb7).
mkdir "$work/repack"
tar -xzf "$tarball" -C "$work/repack"
node -e "
  const fs = require('fs');
  const file = process.argv[1];
  const bytes = fs.readFileSync(file);
  if (bytes.readUInt16LE(18) !== 0x3e) throw new Error(file + ' is not an x86-64 ELF file');
  bytes.writeUInt16LE(0xb7, 18);
  fs.writeFileSync(file, bytes);
" "$work/repack/package/$prebuild"
wrong_arch=$work/halrt-wrong-arch.tgz
tar -czf "$wrong_arch" -C "$work/repack" package

# PATH for the prebuilt install: no compiler, make or Python on it.
tools=$work/tools
mkdir "$tools"
for tool in node npm npx sh; do ln -s "$(command -v "$tool")" "$tools/$tool"; done
printf '#!/bin/sh\necho "$0 $*" >> %s/compiler-ran\nexit 1\n' "$work" > "$work/no-compiler"
chmod +x "$work/no-compiler"

# install NAME TARBALL [ENV...] [-- NPM-ARGS...]: a new project $work/NAME
# with the tarball installed offline; prints the wall time.
install() {
  local name=$1 tgz=$2
  shift 2
  local env=() args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=("$1"); shift; done
  [ $# -gt 0 ] && shift && args=("$@")
  local dir=$work/$name
  mkdir "$dir"
  echo '{"name": "consumer", "version": "1.0.0", "private": true, "type": "module"}' > "$dir/package.json"
  local start end
  start=$(date +%s%N)
  (cd "$dir" && env "${env[@]}" npm install --offline --no-audit --no-fund "${args[@]}" "$tgz") > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; fail "$name: npm install --offline ${args[*]} of the tarball"; }
  end=$(date +%s%N)
  echo "test/consumer/run.sh: $name: install took $(( (end - start) / 1000000 )) ms"
}

# check NAME ADDON: the consumer checks in $work/NAME, whose process must
# load node_modules/halrt/ADDON.
check() {
  local name=$1 addon=$2 dir=$work/$1
  cp test/consumer/consumer.cjs test/consumer/consumer.mjs test/consumer/consumer.ts "$dir/"
  (cd "$dir" && HALRT_CONSUMER_ADDON="node_modules/halrt/$addon" node consumer.cjs) || fail "$name: require (consumer.cjs)"
  (cd "$dir" && node consumer.mjs) || fail "$name: import (consumer.mjs)"
  local out
  out=$(cd "$dir" && npx --offline halrt devices) || fail "$name: npx halrt devices"
  grep -q local-sync <<< "$out" || fail "$name: npx halrt devices printed no local-sync: $out"
  out=$(cd "$dir" && npx --offline halrt --version) || fail "$name: npx halrt --version"
  [ "$out" = "$version" ] || fail "$name: npx halrt --version printed '$out', not $version"
  (cd "$dir" && node "$root/node_modules/typescript/bin/tsc" --strict --module nodenext --target es2022 \
    --typeRoots "$root/node_modules/@types" --types node --outDir dist consumer.ts) ||
    fail "$name: tsc --strict of consumer.ts against the installed index.d.ts"
  (cd "$dir" && node dist/consumer.js) || fail "$name: the compiled consumer.ts"
  echo "test/consumer/run.sh: $name: ok"
}

install prebuilt "$tarball" PATH="$tools" CC="$work/no-compiler" CXX="$work/no-compiler"
[ ! -e "$work/compiler-ran" ] || fail "prebuilt: a compiler ran: $(cat "$work/compiler-ran")"
[ ! -e "$work/prebuilt/node_modules/halrt/build" ] || fail 'prebuilt: the install made node_modules/halrt/build'
check prebuilt "$prebuild"
# The examples, copied into a CommonJS folder of the project, run as they
# are: they require('halrt') and nothing private. onnx-debug.js reads the
# cls model from the project (fetched as the ONNX tests fetch it; the
# example is skipped, saying so, when it cannot be).
mkdir "$work/prebuilt/examples"
cp "$work/prebuilt/node_modules/halrt/examples/"* "$work/prebuilt/examples/"
echo '{"type": "commonjs"}' > "$work/prebuilt/examples/package.json"
cls=$(node -e "const m = require('./test/support/onnx/oracle').model('cls'); if (m.path) console.log(m.path)" 2>/dev/null || true)
if [ -n "$cls" ]; then
  cp "$cls" "$work/prebuilt/"
else
  [ -z "${CI:-}" ] || fail 'prebuilt: the cls model of examples/onnx-debug.js could not be fetched (needed under CI)'
  echo "test/consumer/run.sh: prebuilt: examples/onnx-debug.js skipped: the cls model could not be fetched"
  rm "$work/prebuilt/examples/onnx-debug.js"
fi
for example in "$work/prebuilt/examples/"*.js; do
  (cd "$work/prebuilt" && node "examples/$(basename "$example")" > "$work/example.log" 2>&1) ||
    { cat "$work/example.log" >&2; fail "prebuilt: examples/$(basename "$example") copied into the project"; }
done
echo "test/consumer/run.sh: prebuilt: the examples run copied into the project"
# Every js block of README.md and docs/ runs verbatim, saved as a .mjs file
# in the project; the needs=cuda ones on the driver test double when it is
# built (npm test builds it), else they are skipped and say so.
fake_cuda=$root/build/ctest/libfakecuda.so
[ -f "$fake_cuda" ] || fake_cuda=
# The needs=model blocks read hello_deepa.onnx from the project (fetched as
# the ONNX tests fetch it; skipped, saying so, when it cannot be).
model=$(node -e "const m = require('./test/support/onnx/oracle').model('hello_deepa'); if (m.path) console.log(m.path)" 2>/dev/null || true)
[ -n "$model" ] && cp "$model" "$work/prebuilt/hello_deepa.onnx"
node test/support/doc_blocks.js "$work/prebuilt" $fake_cuda > "$work/doc-blocks.log" 2>&1 ||
  { cat "$work/doc-blocks.log" >&2; fail 'prebuilt: a block of README.md or docs/ run verbatim in the project'; }
grep -v '^ok' "$work/doc-blocks.log" || true
echo "test/consumer/run.sh: prebuilt: the README and docs blocks run verbatim in the project ($(grep -c '^ok' "$work/doc-blocks.log") blocks)"
# index.d.ts needs nothing but TypeScript: no @types/node, default options.
cp test/consumer/fresh.ts "$work/prebuilt/"
[ ! -e "$work/prebuilt/node_modules/@types" ] || fail 'prebuilt: the install brought @types'
(cd "$work/prebuilt" && node "$root/node_modules/typescript/bin/tsc" --strict --noEmit fresh.ts) ||
  fail 'prebuilt: tsc --strict --noEmit fresh.ts with only TypeScript (no @types/node)'
echo "test/consumer/run.sh: prebuilt: index.d.ts compiles with only TypeScript"

install source "$tarball" -- --build-from-source
[ -f "$work/source/node_modules/halrt/build/Release/halrt.node" ] || fail 'source: no build/Release/halrt.node'
check source build/Release/halrt.node

install wrong-arch "$wrong_arch"
[ -f "$work/wrong-arch/node_modules/halrt/build/Release/halrt.node" ] ||
  fail 'wrong-arch: the install did not compile build/Release/halrt.node'
out=$(cd "$work/wrong-arch" && HALRT_ADDON="node_modules/halrt/$prebuild" node -e "
  try { require('halrt'); console.log('loaded'); } catch (error) { console.log(error.code); }")
[ "$out" = FAILED_PRECONDITION ] || fail "wrong-arch: loading the aarch64-marked prebuild gave '$out', not FAILED_PRECONDITION"
check wrong-arch build/Release/halrt.node

echo "test/consumer/run.sh: all consumer checks passed"
