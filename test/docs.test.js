'use strict';
// Doc tests: every ```js block of README.md and docs/*.md runs as an ES
// module from a project whose node_modules/halrt is this checkout, and the
// values its comments claim are checked. The convention (details in
// test/support/doc_blocks.js): `expression; //=> TEXT` compares
// util.inspect(expression) with TEXT, whitespace ignored, `...` matching any
// text; a following line of only `//=> MORE` continues TEXT. The blocks'
// verbatim text runs in a project that installed the packed tarball
// (test/consumer/run.sh).
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const halrt = require('..');
const { ROOT, docBlocks, fencedBlocks, matches, moduleSource, runModule } = require('./support/doc_blocks');
const oracle = require('./support/onnx/oracle');

const DOCS = [
  'README.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const TIMEOUT_MS = 60000;
const CUDA = halrt.drivers().find((driver) => driver.name === 'cuda');
const USABLE = { cuda: CUDA?.available === true, nvrtc: CUDA?.nvrtc?.available === true, model: true };
// needs=model: openwakeword's hello_deepa.onnx in the project folder,
// fetched as test/onnx.test.js fetches it (skipped where the registry is
// out of reach, except under CI).
const MODEL = 'hello_deepa.onnx';

// A project folder whose node_modules/halrt links to this checkout.
let project = null;

// Runs `block` checked in the project: {status, output} with its paths
// named as the doc's. What it writes to os.tmpdir() is removed after.
function run(block) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-doc-'));
  try {
    return runModule(project, 'block', moduleSource(block), block.file, { TMPDIR: tmp }, TIMEOUT_MS);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

describe('docs', function () {
  this.timeout(TIMEOUT_MS + 10000);

  before(() => {
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-doc-project-'));
    fs.mkdirSync(path.join(project, 'node_modules'));
    fs.symlinkSync(ROOT, path.join(project, 'node_modules', 'halrt'), 'dir');
  });
  after(() => fs.rmSync(project, { recursive: true, force: true }));

  it('every fenced block names its language, and JavaScript is tagged js', () => {
    const bad = DOCS.flatMap(fencedBlocks)
      .filter(({ lang }) => lang === '' || /^(javascript|mjs|cjs|node|jsx)$/i.test(lang))
      .map(({ file, line, lang }) => `${file}:${line} (${lang || 'no language'})`);
    assert.deepStrictEqual(bad, []);
  });

  for (const block of docBlocks()) {
    it(`${block.file}:${block.line} runs as written${block.needs ? ` (needs ${block.needs})` : ''}`, function () {
      if (block.needs && !USABLE[block.needs]) this.skip();
      if (block.needs === 'model' && !fs.existsSync(path.join(project, MODEL))) {
        const model = oracle.model('hello_deepa');
        oracle.need(this, model);
        fs.copyFileSync(model.path, path.join(project, MODEL));
      }
      const { status, output } = run(block);
      assert.strictEqual(status, 0, `${block.file}:${block.line}: the block failed:\n${output}`);
    });
  }

  it('a block needs only what its fence says: cuda, nvrtc or model', () => {
    const bad = docBlocks().filter(({ needs }) => needs !== null && !(needs in USABLE)).map(({ file, line, needs }) => `${file}:${line} needs=${needs}`);
    assert.deepStrictEqual(bad, []);
  });

  it("README's Layout names every folder of src/, and only folders that exist", () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const layout = readme.slice(readme.indexOf('## Layout'));
    const block = layout.slice(layout.indexOf('```text') + 7, layout.indexOf('```', layout.indexOf('```text') + 7));
    const named = [...block.matchAll(/^(src\/\S*\/)/gm)].map((m) => m[1].replace(/\/$/, '')).sort();
    const folders = [];
    const walk = (dir) => {
      folders.push(dir);
      for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
        if (entry.isDirectory()) walk(`${dir}/${entry.name}`);
      }
    };
    for (const entry of fs.readdirSync(path.join(ROOT, 'src'), { withFileTypes: true })) {
      if (entry.isDirectory()) walk(`src/${entry.name}`);
    }
    assert.deepStrictEqual(named, folders.sort());
  });

  it('the README tour opens with a three-line traced run', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const tourLine = readme.split('\n').indexOf('## A tour') + 1;
    const tour = fencedBlocks('README.md').find(({ line, lang }) => line > tourLine && lang === 'js');
    const statements = tour.code.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('//'));
    assert.match(statements[0], /^import halrt from 'halrt';$/);
    assert.match(statements[1], /await halrt\.load\(.*debugSink/);
    assert.match(statements[2], /await m\.\w+\(/);
  });

  describe('the checker', () => {
    it('ignores whitespace and takes ... as any text', () => {
      assert.ok(matches('Float32Array(3) [ 1, 2, 3 ]', 'Float32Array(3) [1, 2, 3]'));
      assert.ok(matches("{ uri: 'cuda://0', kind: 'cuda' }", "{ uri: '...', ... }"));
      assert.ok(matches('[ 1, 2 ]', '[...]'));
      assert.ok(!matches('[ 1, 2 ]', '[1, 3]'));
      assert.ok(!matches('[ 1, 2, 3 ]', '[1, 2]'));
      assert.ok(!matches('(a+b)', '(a b)x'));
    });

    function fake(code) {
      return { file: 'FAKE.md', lang: 'js', line: 10, code };
    }

    it('fails a block whose //=> claim is wrong, naming the doc line', () => {
      const { status, output } = run(fake("const a = [1, 2];\n\na.length; //=> 2\na.map((x) => x * 2); //=> [2, 5]"));
      assert.notStrictEqual(status, 0);
      assert.match(output, /FAKE\.md:14: the value is not what the doc says/);
      assert.match(output, /actual: \[ 2, 4 \]/);
    });

    it('joins //=> continuation lines and runs top-level await and import of halrt from the project', () => {
      const code = [
        "import * as esm from 'halrt';",
        "import halrt from 'halrt';",
        'esm.default === halrt; //=> true',
        `import.meta.url.startsWith('file://'); //=> true`,
        `(await import('node:fs')).realpathSync('node_modules/halrt'); //=> ${JSON.stringify(fs.realpathSync(ROOT)).replace(/"/g, "'")}`,
        'await Promise.resolve({ a: 1, b: [2, 3] }); //=> { a: 1,',
        '                                            //=>   b: [2, 3] }',
      ].join('\n');
      assert.deepStrictEqual(run(fake(code)), { status: 0, output: '' });
      const wrong = code.replace('[2, 3] }', '[2, 4] }');
      assert.match(run(fake(wrong)).output, /FAKE\.md:16: the value is not what the doc says/);
    });

    it('reports an exception at its line in the doc', () => {
      const { status, output } = run(fake("\n\nthrow new Error('boom');"));
      assert.notStrictEqual(status, 0);
      assert.match(output, /FAKE\.md:13/);
      assert.match(output, /boom/);
    });

    it('refuses a //=> that follows no expression', () => {
      assert.throws(() => moduleSource(fake('//=> 1')), /FAKE\.md:11: this \/\/=> follows no expression statement/);
    });
  });
});
