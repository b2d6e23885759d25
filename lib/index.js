'use strict';
// Public entry point: the list of what halrt exports. The native classes come
// from lib/binding.js; the files that add JavaScript to them (objects.js:
// close, host data for tensor(), inspection; flight_recorder.js; invoke.js;
// module.js: Module.load/fromObject) are loaded here, before anything is
// exported.

const binding = require('./binding');
const { HalrtError } = require('./errors');
require('./objects');
require('./flight_recorder');
require('./invoke');
const { ModuleBuilder } = require('./module');
const { load, LoadedModule } = require('./load');
const { compare } = require('./compare');
const half = require('./half');
const { format, formatNumber } = require('./format');
const sinks = require('./sinks');
const npy = require('./npy');
const onnx = require('./onnx');
const nvrtc = require('./nvrtc');
const { cudaKernel } = require('./cuda_kernel');
const { HostModule } = require('./host_module');

module.exports = {
  Instance: binding.Instance,
  Device: binding.Device,
  BufferView: binding.BufferView,
  HalModule: binding.HalModule,
  HostModule,
  Module: binding.Module,
  ModuleBuilder,
  Context: binding.Context,
  Function: binding.Function,
  PreparedCall: binding.PreparedCall,
  HalrtError,
  LoadedModule,
  load,
  compare,
  cudaKernel,
  nvrtc: Object.freeze({ compile: nvrtc.compile }),
  toF16Bits: half.toF16Bits,
  fromF16Bits: half.fromF16Bits,
  toBF16Bits: half.toBF16Bits,
  fromBF16Bits: half.fromBF16Bits,
  format,
  formatNumber,
  npy: Object.freeze({ read: npy.read, write: npy.write }),
  onnx: Object.freeze({ convert: onnx.convert }),
  sinks: Object.freeze({
    stdio: sinks.stdio,
    npy: sinks.npy,
    stats: sinks.stats,
    tee: sinks.tee,
    chromeTrace: sinks.chromeTrace,
  }),
  dtypes: binding.dtypes,
  drivers: binding.drivers,
  liveObjects: binding.liveObjects,
};
