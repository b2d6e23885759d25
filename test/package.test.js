'use strict';
// What `npm pack` ships and what package.json promises: the docs and
// examples the README links, the LICENSE, every entry point, the linux-x64
// prebuild, no tests or build outputs, and no runtime dependency but the
// addon loader (test/consumer/run.sh installs the packed tarball).
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const ROOT = path.join(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

const PREBUILD = 'prebuilds/linux-x64/halrt.glibc.node';

describe('the npm package', function () {
  this.timeout(180000);
  let packed; // Set of the paths `npm pack` would put in the tarball
  let size; // the tarball's size in bytes

  before(() => {
    // With its scripts: prepack builds the prebuild (scripts/prebuild.js).
    fs.rmSync(path.join(ROOT, 'prebuilds'), { recursive: true, force: true });
    const result = spawnSync('npm', ['pack', '--dry-run', '--json'], { cwd: ROOT, encoding: 'utf8' });
    assert.strictEqual(result.status, 0, result.stderr);
    const [listing] = JSON.parse(result.stdout);
    packed = new Set(listing.files.map((file) => file.path));
    size = listing.size;
  });

  it('ships the linux-x64 prebuild, built by prepack, linking no CUDA library', function () {
    if (`${process.platform}-${process.arch}` !== 'linux-x64') this.skip();
    assert.deepStrictEqual([...packed].filter((file) => file.startsWith('prebuilds/')), [PREBUILD]);
    // libcuda and libnvrtc are opened at run time (dlopen), never linked.
    const result = spawnSync('readelf', ['-d', path.join(ROOT, PREBUILD)], { encoding: 'utf8' });
    assert.strictEqual(result.status, 0, result.stderr);
    const needed = [...result.stdout.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((match) => match[1]);
    assert.ok(needed.includes('libc.so.6'), result.stdout);
    assert.deepStrictEqual(needed.filter((lib) => !/^lib(c|m|dl|pthread)\.so\.\d+$/.test(lib)), []);
  });

  it('stays small', () => {
    assert.ok(size < 1024 * 1024, `the tarball is ${size} bytes`);
  });

  it('ships every file of docs/ and examples/, the LICENSE and the entry points', () => {
    for (const dir of ['docs', 'examples']) {
      const files = fs.readdirSync(path.join(ROOT, dir));
      assert.ok(files.length > 0, dir);
      for (const file of files) assert.ok(packed.has(`${dir}/${file}`), `${dir}/${file} is packed`);
    }
    const entries = [pkg.main, pkg.types, ...Object.values(pkg.bin), './package.json', 'LICENSE', 'README.md',
      ...Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))];
    for (const entry of entries) assert.ok(packed.has(path.posix.normalize(entry)), `${entry} is packed`);
  });

  it('ships no tests, build outputs or dependencies', () => {
    const unwanted = [...packed].filter((file) => /^(test|build|node_modules|bench|\.ci)\//.test(file));
    assert.deepStrictEqual(unwanted, []);
  });

  it('every relative link in the packed Markdown files points to a packed file', () => {
    const markdown = [...packed].filter((file) => file.endsWith('.md'));
    assert.ok(markdown.includes('README.md') && markdown.includes('docs/cuda.md'), markdown.join(' '));
    for (const file of markdown) {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const linked = path.posix.join(path.posix.dirname(file), target);
        assert.ok(packed.has(linked), `${file} links ${target}, which is not packed`);
      }
    }
  });

  it('is MIT licensed with a LICENSE file, names its repository, and has no runtime dependency but node-gyp-build', () => {
    assert.strictEqual(pkg.license, 'MIT');
    const license = fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8');
    assert.match(license, /^MIT License\n\nCopyright \(c\) 2026 the halrt authors\n/);
    assert.strictEqual(pkg.repository.type, 'git');
    assert.match(pkg.repository.url, /^git\+https:\/\/.+\.git$/);
    assert.deepStrictEqual(Object.keys(pkg.dependencies ?? {}), ['node-gyp-build']);
    // It loads the addon (lib/index.js) and, at install, compiles only when no prebuild loads.
    assert.strictEqual(pkg.scripts.install, 'node-gyp-build');
  });

  it('package-lock.json records the dependencies package.json declares', () => {
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
    const root = lock.packages[''];
    assert.deepStrictEqual([lock.name, lock.version], [pkg.name, pkg.version]);
    for (const field of ['dependencies', 'devDependencies', 'engines', 'bin', 'license']) {
      assert.deepStrictEqual(root[field], pkg[field], field);
    }
    // Installing halrt installs nothing else (but the addon loader).
    for (const [name, { dev }] of Object.entries(lock.packages)) {
      if (name === '' || name === 'node_modules/node-gyp-build') continue;
      assert.strictEqual(dev, true, `${name} is only a development dependency`);
    }
  });
});
