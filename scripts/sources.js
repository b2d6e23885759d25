'use strict';
// Lists the C sources of one part of the build, for binding.gyp and the C test
// Makefile, so that the file lists are derived from the tree in one place.
//   node scripts/sources.js runtime   src/base, src/hal (+ drivers), src/vm, src/modules
//   node scripts/sources.js napi      src/napi
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const parts = {
  runtime: ['src/base', 'src/hal', 'src/vm', 'src/modules'],
  napi: ['src/napi'],
};

function walk(dir) {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs.readdirSync(abs, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return walk(rel);
      return entry.name.endsWith('.c') ? [rel] : [];
    });
}

const wanted = process.argv.slice(2);
if (wanted.length === 0 || wanted.some((name) => !parts[name])) {
  console.error(`usage: node scripts/sources.js ${Object.keys(parts).join('|')} ...`);
  process.exit(2);
}
console.log(wanted.flatMap((name) => parts[name].flatMap(walk)).join('\n'));
