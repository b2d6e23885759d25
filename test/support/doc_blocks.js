'use strict';
// The code blocks of the Markdown docs, made runnable (test/docs.test.js,
// and test/consumer/run.sh through this file's command line).
//
// A ```js block is a complete ES module that imports 'halrt': it runs in a
// project folder where node_modules/halrt is the package (a link to this
// checkout, or the installed tarball), with that folder as cwd. A block
// whose fence says `js needs=cuda` (or `needs=nvrtc`, or `needs=model`:
// hello_deepa.onnx in the project folder) runs only where that is
// usable.
//
// Two ways to run one: verbatim (the text a reader copies, saved as a .mjs
// file), and checked: a one-line expression statement followed by
// `//=> TEXT` (lines that hold only `//=> MORE` continue TEXT) becomes a call
// that compares util.inspect(value) (full depth, every element) with TEXT.
// Whitespace is ignored and `...` matches any text, so environment-dependent
// parts (a device's URI, whether CUDA is there) are written as `...`. The
// checked file keeps the block's lines at their line numbers in the
// Markdown file, so a stack trace's line is the doc's line.
//
//   node test/support/doc_blocks.js PROJECT [CUDA_LIBRARY]
//     runs every block verbatim in PROJECT (the needs=cuda ones with
//     HALRT_CUDA_LIBRARY=CUDA_LIBRARY, skipped without it); exit status 1
//     and the failures on stderr when one fails.

const fs = require('fs');
const path = require('path');
const util = require('util');
const { spawnSync } = require('child_process');
const { pathToFileURL } = require('url');

const ROOT = path.join(__dirname, '..', '..');

// [{file, lang, needs, line, code}] for every fenced block of `file`
// (relative to the root); `line` is the fence's own line, `code` the lines
// inside, `needs` what the fence's needs= names (null: nothing).
function fencedBlocks(file) {
  const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const blocks = [];
  let open = null;
  lines.forEach((text, i) => {
    const fence = /^\s*```\s*(\S*)(.*)$/.exec(text);
    if (!fence) {
      if (open) open.body.push(text);
    } else if (open) {
      blocks.push({ file, lang: open.lang, needs: open.needs, line: open.line, code: open.body.join('\n') });
      open = null;
    } else {
      open = { lang: fence[1], needs: /\bneeds=(\w+)/.exec(fence[2])?.[1] ?? null, line: i + 1, body: [] };
    }
  });
  if (open) throw new Error(`${file}:${open.line}: the code block is never closed`);
  return blocks;
}

// Whether util.inspect's text `actual` is what `expected` says.
function matches(actual, expected) {
  const squash = (text) => text.replace(/\s+/g, '');
  const pattern = squash(expected)
    .split('...')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^]*?');
  return new RegExp(`^${pattern}$`).test(squash(actual));
}

// Called by a block where it claims `expected` for `value`.
function check(where, value, expected) {
  const actual = util.inspect(value, { depth: Infinity, maxArrayLength: Infinity, maxStringLength: Infinity, breakLength: Infinity });
  if (!matches(actual, expected)) {
    throw new Error(`${where}: the value is not what the doc says\n  doc:    ${expected}\n  actual: ${actual}`);
  }
}

// The ES module source that runs `block` (from fencedBlocks).
function moduleSource(block) {
  const claims = [];
  let last = null; // the claim that a `//=>`-only line continues
  const lines = block.code.split('\n').map((text, i) => {
    const line = block.line + 1 + i;
    const claim = /^(\s*)(.*?)\s*\/\/=>(.*)$/.exec(text);
    if (!claim) {
      last = null;
      return text;
    }
    const [, indent, code, expected] = claim;
    if (code === '') {
      if (!last) throw new Error(`${block.file}:${line}: this //=> follows no expression statement`);
      last.expected += ` ${expected}`;
      return '';
    }
    last = { index: i, indent, code: code.replace(/;$/, ''), expected, where: `${block.file}:${line}` };
    claims.push(last);
    return null;
  });
  for (const { index, indent, code, expected, where } of claims) {
    lines[index] = `${indent}__check(${JSON.stringify(where)}, (${code}), ${JSON.stringify(expected.trim())});`;
  }
  const prelude = `import { check as __check } from ${JSON.stringify(pathToFileURL(__filename).href)};`;
  return prelude + '\n'.repeat(block.line) + lines.join('\n') + '\n';
}

// Every ```js block of README.md and docs/*.md.
function docBlocks() {
  const docs = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];
  return docs.flatMap(fencedBlocks).filter(({ lang }) => lang === 'js');
}

// Runs `source` as PROJECT/<name>.mjs with PROJECT as cwd: {status, output},
// the file's URL in the output replaced by `where`. `env` is added to the
// environment.
function runModule(project, name, source, where, env = {}, timeout = 60000) {
  const file = path.join(project, `${name}.mjs`);
  fs.writeFileSync(file, source);
  const result = spawnSync(process.execPath, [file], {
    cwd: project, env: { ...process.env, ...env }, encoding: 'utf8', timeout, killSignal: 'SIGKILL',
  });
  fs.rmSync(file, { force: true });
  const output = `${result.stdout}${result.stderr}`.split(pathToFileURL(file).href).join(where).split(file).join(where);
  return { status: result.error ? result.error.message : result.status, output };
}

// The command line: every block verbatim in PROJECT.
function main([project, cudaLibrary]) {
  let failed = 0;
  for (const block of docBlocks()) {
    const where = `${block.file}:${block.line}`;
    if (block.needs === 'cuda' && !cudaLibrary) {
      console.log(`skipped ${where} (needs=cuda: no driver library given)`);
      continue;
    }
    if (block.needs === 'model' && !fs.existsSync(path.join(project, 'hello_deepa.onnx'))) {
      console.log(`skipped ${where} (needs=model: no hello_deepa.onnx in the project)`);
      continue;
    }
    // What a block writes to os.tmpdir() stays in the project's tmp/.
    const env = { TMPDIR: fs.mkdtempSync(path.join(path.resolve(project), 'tmp-')) };
    if (block.needs === 'cuda') env.HALRT_CUDA_LIBRARY = path.resolve(cudaLibrary);
    const { status, output } = runModule(path.resolve(project), 'doc-block', block.code, where, env);
    fs.rmSync(env.TMPDIR, { recursive: true, force: true });
    if (status === 0) {
      console.log(`ok      ${where}`);
    } else {
      failed += 1;
      console.error(`FAILED  ${where} (exit ${status}), run verbatim:\n${output}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

if (require.main === module) main(process.argv.slice(2));

module.exports = { ROOT, fencedBlocks, docBlocks, matches, check, moduleSource, runModule };
