'use strict';
// The code blocks of the Markdown docs, made runnable (test/docs.test.js).
//
// A ```js block runs as an ES module in a child process with the repository
// root as cwd: top-level await works, `require` is made with createRequire,
// and `require('halrt')` / `import 'halrt'` reach this checkout through the
// package's self-reference. The block's lines keep their line numbers in the
// Markdown file, so a stack trace's line is the doc's line.
//
// Values claimed in comments are checked: a one-line expression statement
// followed by `//=> TEXT` (lines that hold only `//=> MORE` continue TEXT)
// becomes a call that compares util.inspect(value) (full depth, every
// element) with TEXT. Whitespace is ignored and `...` matches any text, so
// environment-dependent parts (a device's URI, whether CUDA is there) are
// written as `...`.

const fs = require('fs');
const path = require('path');
const util = require('util');

const ROOT = path.join(__dirname, '..', '..');

// [{file, lang, line, code}] for every fenced block of `file` (relative to
// the root); `line` is the fence's own line, `code` the lines inside.
function fencedBlocks(file) {
  const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const blocks = [];
  let open = null;
  lines.forEach((text, i) => {
    const fence = /^\s*```\s*(\S*)/.exec(text);
    if (!fence) {
      if (open) open.body.push(text);
    } else if (open) {
      blocks.push({ file, lang: open.lang, line: open.line, code: open.body.join('\n') });
      open = null;
    } else {
      open = { lang: fence[1], line: i + 1, body: [] };
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
  const prelude =
    "import { createRequire as __createRequire } from 'node:module'; " +
    `const require = __createRequire(${JSON.stringify(`${ROOT}${path.sep}`)}); ` +
    `const { check: __check } = require(${JSON.stringify(__filename)});`;
  return prelude + '\n'.repeat(block.line) + lines.join('\n') + '\n';
}

module.exports = { ROOT, fencedBlocks, matches, check, moduleSource };
