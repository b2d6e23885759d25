'use strict';
// Module descriptions for the module property (test/property.test.js):
// valid base modules, mutations of them, a partial model of what
// docs/module-format.md says must be rejected, and the size budget under
// which an accepted module is run.

const DTYPES = ['f16', 'bf16', 'f32', 'f64', 'i8', 'u8', 'i16', 'u16', 'i32', 'u32', 'i64', 'u64', 'bool'];
const SIZE = { f16: 2, bf16: 2, f32: 4, f64: 8, i8: 1, u8: 1, i16: 2, u16: 2, i32: 4, u32: 4, i64: 8, u64: 8, bool: 1 };
const FORMAT = 'halrt.module/1';
const BUILTIN = { local: { builtin: true }, cuda: { builtin: true } };

const value = (name, dtype, shape) => ({ name, dtype, shape });

/** Valid modules, and what their functions return for zero-filled inputs. */
const BASES = [
  {
    description: {
      format: FORMAT,
      name: 'fz',
      executables: { k: BUILTIN },
      functions: {
        main: {
          inputs: [value('x', 'f32', [2, 3]), value('w', 'f32', [3, 4])],
          outputs: [value('y', 'f32', [2, 4]), value('s', 'f32', [2])],
          locals: [value('h', 'f32', [2, 4]), value('b', 'f32', [2, 4])],
          body: [
            { op: 'fill', target: 'b', value: 0.5 },
            { op: 'dispatch', kernel: 'k.matmul_f32', workgroups: [2, 1, 1], bindings: ['x', 'w', 'h'], constants: [2, 3, 4] },
            { op: 'dispatch', kernel: 'k.axpy_f32', workgroups: [2], bindings: ['h', 'b', 'h'], constants: [8, { f32: 2 }], workgroupSize: [32] },
            { op: 'trace', key: 'pre', values: ['h'] },
            { op: 'barrier' },
            { op: 'dispatch', kernel: 'k.relu_f32', workgroups: [1], bindings: ['h', 'y'], constants: [8] },
            { op: 'dispatch', kernel: 'k.reduce_sum_f32', workgroups: [1], bindings: ['y', 's'], constants: [2, 4] },
          ],
        },
        side: {
          inputs: [value('a', 'i32', [4])],
          outputs: [value('c', 'i32', [4]), value('m', 'f32', [2, 2]), value('z', 'u32', [4])],
          locals: [],
          body: [
            { op: 'dispatch', kernel: 'k.add_i32', workgroups: [2], bindings: ['a', 'a', 'c'], constants: [4] },
            { op: 'dispatch', kernel: 'k.softmax_rows_f32', workgroups: [1], bindings: ['m', 'm'], constants: [2, 2] },
            { op: 'dispatch', kernel: 'k.fill_u32', workgroups: [1], bindings: ['z'], constants: [4, 9] },
            { op: 'trace', key: 'side', values: ['c', 'm'] },
          ],
        },
      },
    },
    // main: relu(2*(0*0) + 0.5) = 0.5 everywhere, rows sum to 2; side: c = 0 + 0, m = softmax of zeros, z = 9.
    outputs: {
      main: [new Float32Array(8).fill(0.5), Float32Array.of(2, 2)],
      side: [new Int32Array(4), new Float32Array(4).fill(0.5), Uint32Array.of(9, 9, 9, 9)],
    },
  },
  {
    description: {
      format: FORMAT,
      name: 'dt',
      functions: {
        f: {
          inputs: [value('p', 'i64', [2])],
          outputs: [value('q', 'u64', [2]), value('r', 'bool', []), value('h', 'f16', [3]), value('g', 'bf16', [1, 3])],
          locals: [value('t', 'i8', [2, 2, 2, 2]), value('u', 'u8', [16])],
          body: [
            { op: 'copy', source: 'p', target: 'q' },
            { op: 'fill', target: 'r', value: true },
            { op: 'fill', target: 'h', value: 1.5 },
            { op: 'fill', target: 'g', value: -2 },
            { op: 'fill', target: 't', value: -7 },
            { op: 'copy', source: 't', target: 'u' },
            { op: 'trace', key: 'all', values: ['p', 'q', 'r', 'h', 'g', 't', 'u'] },
          ],
        },
      },
    },
    outputs: {
      f: [new BigUint64Array(2), Uint8Array.of(1), new Uint16Array(3).fill(0x3e00), new Uint16Array(3).fill(0xc000)],
    },
  },
  {
    description: {
      format: FORMAT,
      name: 'ex',
      executables: { k: { local: { builtin: true } }, lib: { local: { library: 'libhalrt_missing.so' }, cuda: { ptx: { text: '.version 7.0' } } } },
      functions: {
        g: {
          inputs: [value('v', 'f32', [3])],
          outputs: [value('w', 'f32', [3])],
          body: [
            { op: 'copy', source: 'v', target: 'w' },
            { op: 'dispatch', kernel: 'lib.scale', workgroups: [1], bindings: ['v', 'w'], constants: [3, 1.5] },
          ],
        },
      },
    },
    outputs: null, // the library does not exist: linking fails
  },
  {
    description: {
      format: FORMAT,
      name: 'ty',
      executables: {
        t: {
          cuda: {
            ptx: { text: '.version 7.0' },
            entries: {
              scale: ['buffer', 'i64', 'f64', 'buffer'],
              mix: { params: ['u32', 'buffer', 'i32', 'f32', 'u64'] },
              any: {},
            },
          },
        },
      },
      functions: {
        h: {
          inputs: [value('x', 'f64', [4])],
          outputs: [value('y', 'f64', [4])],
          body: [
            { op: 'dispatch', kernel: 't.scale', workgroups: [1], bindings: ['x', 'y'], constants: [4, -1.5] },
            { op: 'dispatch', kernel: 't.mix', workgroups: [1], bindings: ['y'], constants: [7, -7, { f32: 2 }, '18446744073709551615'] },
            { op: 'dispatch', kernel: 't.any', workgroups: [1], bindings: ['x'], constants: [1, 2.5] },
          ],
        },
      },
    },
    outputs: null, // no local kind: linking on a CPU device fails
  },
];

//===----------------------------------------------------------------------===//
// Mutations
//===----------------------------------------------------------------------===//

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function defineOwn(object, key, v) {
  Object.defineProperty(object, key, { value: v, enumerable: true, writable: true, configurable: true });
}

// Every path below the root, depth first, down to `maxDepth` (deeply
// nested mutants are not walked to the bottom).
function paths(node, prefix = [], out = [], maxDepth = 80) {
  if (node === null || typeof node !== 'object' || prefix.length >= maxDepth) return out;
  for (const key of Array.isArray(node) ? node.keys() : Object.keys(node)) {
    const path = [...prefix, key];
    out.push(path);
    paths(node[key], path, out, maxDepth);
  }
  return out;
}

// A deep copy; a value nested too deeply to copy is shared instead.
function clone(v) {
  try {
    return v === undefined ? undefined : structuredClone(v);
  } catch {
    return v;
  }
}

function nest(v, depth) {
  let out = v;
  for (let i = 0; i < depth; ++i) out = i % 2 ? { n: out } : [out];
  return out;
}

/** Applies one mutation spec ({select, action, value, key, depth, factor}) in place. */
function mutate(root, m) {
  const all = paths(root);
  if (all.length === 0) return;
  const path = all[m.select % all.length];
  let parent = root;
  for (const key of path.slice(0, -1)) parent = parent[key];
  const key = path[path.length - 1];
  const current = parent[key];
  switch (m.action) {
    case 'delete':
      if (Array.isArray(parent)) parent.splice(key, 1);
      else delete parent[key];
      break;
    case 'replace':
      parent[key] = clone(m.value);
      break;
    case 'rename':
      if (Array.isArray(parent)) {
        parent.push(clone(current));
      } else {
        delete parent[key];
        defineOwn(parent, m.key, current);
      }
      break;
    case 'addKey':
      if (isObject(current)) defineOwn(current, m.key, clone(m.value));
      else if (Array.isArray(current)) current.push(clone(m.value));
      else if (isObject(parent)) defineOwn(parent, m.key, clone(m.value));
      else parent.push(clone(m.value));
      break;
    case 'wrapDeep':
      parent[key] = nest(current, m.depth);
      break;
    case 'duplicate':
      if (Array.isArray(current) && current.length > 0) current.push(clone(current[m.select % current.length]));
      else if (Array.isArray(parent)) parent.push(clone(current));
      else parent[key] = [clone(current), clone(current)];
      break;
    case 'scale':
      parent[key] = typeof current === 'number' ? current * m.factor : clone(m.value);
      break;
    default:
      throw new Error(`unknown mutation ${m.action}`);
  }
}

//===----------------------------------------------------------------------===//
// What must be rejected (a partial model of docs/module-format.md)
//===----------------------------------------------------------------------===//

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const isInt = (v) => typeof v === 'number' && Number.isInteger(v);
const inRange = (v, lo, hi) => isInt(v) && v >= lo && v <= hi;
const extraKey = (object, allowed) => Object.keys(object).find((key) => !allowed.includes(key));

// Built-in kernels: binding dtypes ('any' for copy_u8), constant kinds
// ('u' integer, 'f' any number), and the bytes each binding needs.
const KERNELS = {
  fill_u32: { bindings: ['u32'], constants: 'uu', need: ([n]) => [4n * n] },
  copy_u8: { bindings: ['any', 'any'], constants: 'u', need: ([n]) => [n, n] },
  axpy_f32: { bindings: ['f32', 'f32', 'f32'], constants: 'uf', need: ([n]) => [4n * n, 4n * n, 4n * n] },
  relu_f32: { bindings: ['f32', 'f32'], constants: 'u', need: ([n]) => [4n * n, 4n * n] },
  matmul_f32: { bindings: ['f32', 'f32', 'f32'], constants: 'uuu', need: ([m, k, n]) => [4n * m * k, 4n * k * n, 4n * m * n] },
  softmax_rows_f32: { bindings: ['f32', 'f32'], constants: 'uu', need: ([r, c]) => [4n * r * c, 4n * r * c] },
  reduce_sum_f32: { bindings: ['f32', 'f32'], constants: 'uu', need: ([r, c]) => [4n * r * c, 4n * r] },
};
for (const op of ['add', 'sub', 'mul', 'div', 'max']) {
  for (const type of ['f32', 'i32']) {
    KERNELS[`${op}_${type}`] = { bindings: [type, type, type], constants: 'u', need: ([n]) => [4n * n, 4n * n, 4n * n] };
  }
}

const INTEGER_RANGE = {
  i8: [-128, 127], u8: [0, 255], i16: [-32768, 32767], u16: [0, 65535], i32: [-(2 ** 31), 2 ** 31 - 1],
  u32: [0, 2 ** 32 - 1], i64: [-(2 ** 53 - 1), 2 ** 53 - 1], u64: [0, 2 ** 53 - 1],
};

function bytesOf(v) {
  return v.shape.reduce((a, b) => a * BigInt(b), BigInt(SIZE[v.dtype]));
}

// Declared CUDA parameter types and the constant words each takes.
const PARAM_WORDS = { buffer: 0, u32: 1, i32: 1, f32: 1, u64: 2, i64: 2, f64: 2 };

// An entry's declared parameter types, or null when it declares none
// (`{}`: inferred). Only for entries checkEntries accepted.
function declaredParams(declaration) {
  if (Array.isArray(declaration)) return declaration;
  return declaration.params === undefined ? null : declaration.params;
}

function checkEntries(entries, where) {
  if (!isObject(entries)) return `${where}: not an object`;
  const names = Object.keys(entries);
  if (names.length < 1 || names.length > 4096) return `${where}: not 1 to 4096 entries`;
  for (const name of names) {
    if (name === '') return `${where}: an empty entry name`;
    const declaration = entries[name];
    let params = declaration;
    if (isObject(declaration)) {
      const extra = extraKey(declaration, ['params']);
      if (extra !== undefined) return `${where}.${name}: unknown field '${extra}'`;
      if (!('params' in declaration)) continue;
      params = declaration.params;
    }
    if (!Array.isArray(params)) return `${where}.${name}: params not an array`;
    let buffers = 0;
    let words = 0;
    for (const type of params) {
      if (typeof type !== 'string' || !Object.hasOwn(PARAM_WORDS, type)) return `${where}.${name}: unknown type`;
      buffers += type === 'buffer';
      words += PARAM_WORDS[type];
    }
    if (buffers > 32 || words > 64) return `${where}.${name}: too many parameters`;
  }
  return null;
}

// Why constant `c` cannot be given for a declared parameter of `type`.
function checkTypedConstant(c, type, where) {
  const isDecimal = (text, signed) => typeof text === 'string' && (signed ? /^-?[0-9]+$/ : /^[0-9]+$/).test(text);
  switch (type) {
    case 'u32': return inRange(c, 0, 2 ** 32 - 1) ? null : `${where}: not a u32`;
    case 'i32': return inRange(c, -(2 ** 31), 2 ** 31 - 1) ? null : `${where}: not an i32`;
    case 'f32':
      return typeof c === 'number' || (isObject(c) && Object.keys(c).length === 1 && typeof c.f32 === 'number') ? null
        : `${where}: not a number or {f32}`;
    case 'f64': return typeof c === 'number' ? null : `${where}: not a number`;
    case 'u64':
      if (isDecimal(c, false)) return BigInt(c) < 2n ** 64n ? null : `${where}: beyond u64`;
      return inRange(c, 0, 2 ** 53 - 1) ? null : `${where}: not a u64`;
    default: // i64
      if (isDecimal(c, true)) return BigInt(c) >= -(2n ** 63n) && BigInt(c) < 2n ** 63n ? null : `${where}: beyond i64`;
      return inRange(c, -(2 ** 53 - 1), 2 ** 53 - 1) ? null : `${where}: not an i64`;
  }
}

function checkExecutable(name, e) {
  if (!NAME.test(name)) return `executables.${name}: not a name`;
  if (!isObject(e)) return `executables.${name}: not an object`;
  const extra = extraKey(e, ['local', 'cuda']);
  if (extra !== undefined) return `executables.${name}: unknown field '${extra}'`;
  if (Object.keys(e).length === 0) return `executables.${name}: no kind`;
  if ('local' in e) {
    const l = e.local;
    if (!isObject(l) || Object.keys(l).length !== 1) return `executables.${name}.local: not one member`;
    if ('builtin' in l) {
      if (l.builtin !== true) return `executables.${name}.local.builtin: not true`;
    } else if ('library' in l) {
      if (typeof l.library !== 'string' || l.library === '') return `executables.${name}.local.library: not a path`;
    } else {
      return `executables.${name}.local: unknown member`;
    }
  }
  if ('cuda' in e) {
    const c = e.cuda;
    if (!isObject(c)) return `executables.${name}.cuda: not an object`;
    const members = Object.keys(c).filter((key) => key !== 'entries');
    if (members.length !== 1) return `executables.${name}.cuda: not one member (besides entries)`;
    const [member] = members;
    const v = c[member];
    if ('entries' in c) {
      if (member === 'builtin') return `executables.${name}.cuda: entries with builtin`;
      if (e.local && e.local.builtin === true) return `executables.${name}.cuda: entries beside a built-in local kind`;
      const reason = checkEntries(c.entries, `executables.${name}.cuda.entries`);
      if (reason) return reason;
    }
    if (member === 'builtin') {
      if (v !== true) return `executables.${name}.cuda.builtin: not true`;
    } else if (member === 'ptx') {
      const ok = (typeof v === 'string' && v !== '') ||
        (isObject(v) && Object.keys(v).length === 1 && typeof v.text === 'string');
      if (!ok) return `executables.${name}.cuda.ptx: not a path or {text}`;
    } else if (member === 'cubin' || member === 'fatbin') {
      if (typeof v !== 'string' || v === '') return `executables.${name}.cuda.${member}: not a path`;
    } else {
      return `executables.${name}.cuda: unknown member '${member}'`;
    }
  }
  return null;
}

function checkGrid(grid, where, limits, maxProduct) {
  if (!Array.isArray(grid) || grid.length < 1 || grid.length > 3) return `${where}: not 1 to 3 integers`;
  let product = 1n;
  for (let i = 0; i < grid.length; ++i) {
    if (!inRange(grid[i], 1, limits[i])) return `${where}[${i}]: out of range`;
    product *= BigInt(grid[i]);
  }
  if (product > maxProduct) return `${where}: too many in all`;
  return null;
}

function checkDispatch(op, at, values, executables) {
  const extra = extraKey(op, ['op', 'kernel', 'workgroups', 'workgroupSize', 'bindings', 'constants']);
  if (extra !== undefined) return `${at}: unknown field '${extra}'`;
  if (typeof op.kernel !== 'string') return `${at}.kernel: not a string`;
  const dot = op.kernel.indexOf('.');
  if (dot < 0) return `${at}.kernel: no '.'`;
  const executable = executables[op.kernel.slice(0, dot)];
  const entry = op.kernel.slice(dot + 1);
  if (!Object.hasOwn(executables, op.kernel.slice(0, dot))) return `${at}.kernel: executable not declared`;
  if (entry === '') return `${at}.kernel: empty entry`;
  let reason = checkGrid(op.workgroups, `${at}.workgroups`, [2 ** 31 - 1, 65535, 65535], 2n ** 32n);
  if (reason) return reason;
  if (op.workgroupSize !== undefined) {
    reason = checkGrid(op.workgroupSize, `${at}.workgroupSize`, [1024, 1024, 64], 1024n);
    if (reason) return reason;
  }
  if (!Array.isArray(op.bindings) || op.bindings.length < 1 || op.bindings.length > 32) return `${at}.bindings: not 1 to 32 names`;
  for (const name of op.bindings) if (typeof name !== 'string' || !values.has(name)) return `${at}.bindings: unknown value`;
  const entries = executable && executable.cuda && executable.cuda.entries;
  if (entries && !Object.hasOwn(entries, entry)) return `${at}.kernel: entry not declared`;
  const params = entries ? declaredParams(entries[entry]) : null;
  if (params) {
    const scalars = params.filter((type) => type !== 'buffer');
    if (op.constants !== undefined && !Array.isArray(op.constants)) return `${at}.constants: not an array`;
    const given = op.constants || [];
    if (given.length !== scalars.length) return `${at}.constants: count`;
    for (let i = 0; i < given.length; ++i) {
      const reason = checkTypedConstant(given[i], scalars[i], `${at}.constants[${i}]`);
      if (reason) return reason;
    }
    if (op.bindings.length !== params.length - scalars.length) return `${at}.bindings: count`;
    return null;
  }
  if (op.constants !== undefined) {
    if (!Array.isArray(op.constants) || op.constants.length > 64) return `${at}.constants: not at most 64`;
    for (const c of op.constants) {
      const ok = typeof c === 'number' || (isObject(c) && Object.keys(c).length === 1 && typeof c.f32 === 'number');
      if (!ok) return `${at}.constants: not a number or {f32}`;
    }
  }
  const constants = op.constants || [];
  const builtin = executable && ((executable.local && executable.local.builtin === true) ||
    (executable.cuda && executable.cuda.builtin === true));
  if (!builtin) {
    // Integer text is an integer (JSON.stringify writes 1e21 and beyond with an exponent: an f32).
    for (const c of constants) {
      if (isInt(c) && Math.abs(c) < 1e21 && !inRange(c, -(2 ** 31), 2 ** 32 - 1)) return `${at}.constants: integer out of range`;
    }
    return null;
  }
  const kernel = Object.hasOwn(KERNELS, entry) ? KERNELS[entry] : null;
  if (!kernel) return `${at}.kernel: not a built-in kernel`;
  if (op.bindings.length !== kernel.bindings.length) return `${at}.bindings: count`;
  if (constants.length !== kernel.constants.length) return `${at}.constants: count`;
  const integers = [];
  for (let i = 0; i < constants.length; ++i) {
    if (kernel.constants[i] === 'u') {
      if (!isInt(constants[i]) || !inRange(constants[i], -(2 ** 31), 2 ** 32 - 1)) return `${at}.constants[${i}]: not an integer in range`;
      integers.push(BigInt(constants[i] >>> 0));
    }
  }
  const need = kernel.need(integers);
  for (let i = 0; i < op.bindings.length; ++i) {
    const v = values.get(op.bindings[i]);
    if (kernel.bindings[i] !== 'any' && v.dtype !== kernel.bindings[i]) return `${at}.bindings[${i}]: dtype`;
    if (bytesOf(v) < need[i]) return `${at}.bindings[${i}]: too small`;
  }
  return null;
}

function checkOp(op, at, values, executables) {
  if (!isObject(op)) return `${at}: not an object`;
  const fields = { fill: ['op', 'target', 'value'], copy: ['op', 'source', 'target'], trace: ['op', 'key', 'values'], barrier: ['op'] };
  if (op.op === 'dispatch') return checkDispatch(op, at, values, executables);
  if (typeof op.op !== 'string' || !Object.hasOwn(fields, op.op)) return `${at}.op: unknown`;
  const extra = extraKey(op, fields[op.op]);
  if (extra !== undefined) return `${at}: unknown field '${extra}'`;
  if (op.op === 'fill') {
    const target = typeof op.target === 'string' && values.get(op.target);
    if (!target) return `${at}.target: unknown value`;
    const v = op.value;
    if (typeof v !== 'number' && typeof v !== 'boolean') return `${at}.value: not a number or boolean`;
    if (target.dtype === 'bool') {
      if (!(v === true || v === false || v === 0 || v === 1)) return `${at}.value: not a bool`;
    } else if (typeof v === 'boolean') {
      return `${at}.value: a boolean for ${target.dtype}`;
    } else if (INTEGER_RANGE[target.dtype] && !inRange(v, ...INTEGER_RANGE[target.dtype])) {
      return `${at}.value: not an integer in ${target.dtype}'s range`;
    }
  } else if (op.op === 'copy') {
    const source = typeof op.source === 'string' && values.get(op.source);
    const target = typeof op.target === 'string' && values.get(op.target);
    if (!source || !target) return `${at}: unknown value`;
    if (bytesOf(source) !== bytesOf(target)) return `${at}: byte sizes differ`;
  } else if (op.op === 'trace') {
    if (typeof op.key !== 'string' || op.key === '') return `${at}.key: not a non-empty string`;
    if (!Array.isArray(op.values) || op.values.length < 1 || op.values.length > 32) return `${at}.values: not 1 to 32 names`;
    for (const name of op.values) if (typeof name !== 'string' || !values.has(name)) return `${at}.values: unknown value`;
  }
  return null;
}

/**
 * Why docs/module-format.md says `d` (a parsed description) must be
 * rejected, or null when none of the modelled rules applies (the model is
 * partial: null does not mean it must be accepted).
 */
function mustReject(d) {
  if (!isObject(d)) return 'not an object';
  let extra = extraKey(d, ['format', 'name', 'executables', 'functions']);
  if (extra !== undefined) return `unknown field '${extra}'`;
  if (d.format !== FORMAT) return 'format';
  if (typeof d.name !== 'string' || !NAME.test(d.name) || d.name === 'hal') return 'name';
  if (!isObject(d.functions)) return 'functions: not an object';
  const executables = d.executables === undefined ? {} : d.executables;
  if (!isObject(executables)) return 'executables: not an object';
  for (const [name, e] of Object.entries(executables)) {
    const reason = checkExecutable(name, e);
    if (reason) return reason;
  }
  for (const [name, f] of Object.entries(d.functions)) {
    const at = `functions.${name}`;
    if (!NAME.test(name)) return `${at}: not a name`;
    if (!isObject(f)) return `${at}: not an object`;
    extra = extraKey(f, ['inputs', 'outputs', 'locals', 'body']);
    if (extra !== undefined) return `${at}: unknown field '${extra}'`;
    if (!Array.isArray(f.inputs) || !Array.isArray(f.outputs) || !Array.isArray(f.body)) return `${at}: inputs, outputs, body`;
    if (f.locals !== undefined && !Array.isArray(f.locals)) return `${at}.locals: not an array`;
    const values = new Map();
    for (const v of [...f.inputs, ...f.outputs, ...(f.locals || [])]) {
      if (!isObject(v)) return `${at}: a value is not an object`;
      extra = extraKey(v, ['name', 'dtype', 'shape']);
      if (extra !== undefined) return `${at}: a value has unknown field '${extra}'`;
      if (typeof v.name !== 'string' || !NAME.test(v.name)) return `${at}: a value name`;
      if (values.has(v.name)) return `${at}: '${v.name}' twice`;
      if (!DTYPES.includes(v.dtype)) return `${at}.${v.name}: dtype`;
      if (!Array.isArray(v.shape) || v.shape.length > 8 || !v.shape.every((dim) => inRange(dim, 0, 2 ** 31 - 1))) {
        return `${at}.${v.name}: shape`;
      }
      if (bytesOf(v) >= 2n ** 64n) return `${at}.${v.name}: byte size`;
      values.set(v.name, v);
    }
    if (values.size > 1024) return `${at}: more than 1024 values`;
    if (f.body.length > 65536) return `${at}: more than 65536 ops`;
    for (let i = 0; i < f.body.length; ++i) {
      const reason = checkOp(f.body[i], `${at}.body[${i}]`, values, executables);
      if (reason) return reason;
    }
  }
  return null;
}

/** The module's `functions` signatures as the description declares them. */
function expectedSignatures(d) {
  const pick = ({ name, dtype, shape }) => ({ name, dtype, shape });
  return Object.entries(d.functions).map(([name, f]) => ({ name, inputs: f.inputs.map(pick), outputs: f.outputs.map(pick) }));
}

/**
 * Whether an accepted module is small enough to run: every function's
 * values together at most `maxBytes`, and at most `maxWorkgroups` per dispatch.
 */
function runnable(d, { maxBytes = 8n << 20n, maxWorkgroups = 1n << 16n } = {}) {
  try {
    for (const f of Object.values(d.functions)) {
      let bytes = 0n;
      for (const v of [...f.inputs, ...f.outputs, ...(f.locals || [])]) bytes += bytesOf(v);
      if (bytes > maxBytes) return false;
      for (const op of f.body) {
        if (op.op !== 'dispatch') continue;
        if (op.workgroups.reduce((a, b) => a * BigInt(b), 1n) > maxWorkgroups) return false;
      }
    }
    return true;
  } catch {
    return false;
  }
}

module.exports = { BASES, DTYPES, mutate, mustReject, expectedSignatures, runnable, defineOwn };
