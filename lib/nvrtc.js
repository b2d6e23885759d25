'use strict';
// halrt.nvrtc.compile(source, {arch, options, name}): CUDA C++ compiled by
// NVRTC to PTX, with its log, on any machine (no GPU needed), so that a
// syntax error shows before the kernel reaches a GPU.

const binding = require('./binding');
const { invalid } = require('./errors');
const { describe } = require('./half');
const { checkOptions } = require('./args');

const METHOD = 'halrt.nvrtc.compile';

/**
 * Returns {ptx, log, arch, version}; a compile error throws INVALID_ARGUMENT
 * whose `log` is NVRTC's whole log; no NVRTC is UNAVAILABLE.
 */
function compile(source, options) {
  if (typeof source !== 'string') throw invalid(`${METHOD}: source must be a string of CUDA C++ (got ${describe(source)})`);
  const nul = source.indexOf('\0');
  if (nul >= 0) throw invalid(`${METHOD}: source has a NUL byte at offset ${nul}; source is text`);
  const { arch, options: flags = [], name = 'kernel.cu' } = checkOptions(options, `${METHOD}: options`, ['arch', 'options', 'name']);
  if (arch !== undefined && typeof arch !== 'string') {
    throw invalid(`${METHOD}: options.arch must be a string such as 'sm_80' or 'compute_80' (got ${describe(arch)})`);
  }
  if (typeof name !== 'string' || name === '' || name.includes('\0')) {
    throw invalid(`${METHOD}: options.name must be a non-empty string, the name logs give the source (got ${describe(name)})`);
  }
  if (!Array.isArray(flags)) throw invalid(`${METHOD}: options.options must be an Array of strings (got ${describe(flags)})`);
  flags.forEach((flag, i) => {
    if (typeof flag !== 'string' || flag === '' || flag.includes('\0')) {
      throw invalid(`${METHOD}: options.options[${i}] must be a non-empty string (got ${describe(flag)})`);
    }
  });
  return binding.nvrtcCompile(source, name, flags, arch);
}

module.exports = { compile };
