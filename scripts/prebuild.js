'use strict';
// Builds the prebuilt addon that the npm package ships, with prebuildify
// (N-API, stripped, tagged with the C library it links):
// prebuilds/<platform>-<arch>/halrt.<libc>.node, which node-gyp-build loads
// when there is no source build (lib/index.js). Run by `npm run prebuild` and
// by `prepack`, so `npm pack` and `npm publish` always ship one built from the
// tree as it is.
//
// It builds in a temporary copy of the files the package ships ("files" in
// package.json): the same build a source install does (only the halrt target,
// no benchmarks), and the checkout's build/ is left as it was. The build log
// goes to stderr, so that `npm pack --json` prints only its JSON on stdout.
// Needs what a source build needs (a C compiler, make, Python 3) and npm's
// node-gyp (npm_config_node_gyp, which npm sets for its scripts).
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const ROOT = path.join(__dirname, '..');

function main() {
  const nodeGyp = process.env.npm_config_node_gyp;
  if (!nodeGyp) {
    console.error('scripts/prebuild.js: run it through npm (npm run prebuild), which names its node-gyp');
    return 2;
  }
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const out = path.join(ROOT, 'prebuilds', `${os.platform()}-${os.arch()}`);
  fs.rmSync(out, { recursive: true, force: true });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-prebuild-'));
  try {
    for (const entry of ['package.json', ...pkg.files.filter((file) => !file.startsWith('prebuilds'))]) {
      const from = path.join(ROOT, entry);
      if (fs.existsSync(from)) fs.cpSync(from, path.join(work, entry), { recursive: true });
    }
    const args = [
      require.resolve('prebuildify/bin.js'), '--napi', '--strip', '--tag-libc',
      // The running Node's headers (binding.gyp fixes the N-API version), not
      // those of the newest Node that prebuildify knows.
      `--target=${process.versions.node}`,
      `--node-gyp=${nodeGyp}`, `--out=${ROOT}`, work,
    ];
    const result = spawnSync(process.execPath, args, { stdio: ['ignore', 2, 2] });
    if (result.status !== 0) {
      console.error(`scripts/prebuild.js: prebuildify failed (${result.error ? result.error.message : `exit status ${result.status ?? result.signal}`})`);
      return 1;
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  for (const file of fs.readdirSync(out)) console.error(`scripts/prebuild.js: built ${path.relative(ROOT, path.join(out, file))}`);
  return 0;
}

process.exitCode = main();
