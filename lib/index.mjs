// The ES module entry point (package.json "exports" → "import"): the
// CommonJS module lib/index.js, its exports named here one by one because
// Node cannot detect them in its `module.exports = {...}` (the object holds
// calls). test/esm.test.mjs checks that this list equals
// Object.keys(require('halrt')); add a name here with each new export.
import halrt from './index.js';

export const {
  Instance,
  Device,
  BufferView,
  HalModule,
  HostModule,
  Module,
  ModuleBuilder,
  Context,
  Function,
  PreparedCall,
  HalrtError,
  LoadedModule,
  load,
  compare,
  cudaKernel,
  nvrtc,
  toF16Bits,
  fromF16Bits,
  toBF16Bits,
  fromBF16Bits,
  format,
  formatNumber,
  npy,
  onnx,
  sinks,
  dtypes,
  drivers,
  liveObjects,
} = halrt;

export default halrt;
