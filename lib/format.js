'use strict';
// halrt.format and halrt.formatNumber: the one text of numbers and tensors.
// The stdio sink writes the same, character for character
// (src/hal/element_format.h has the rules; test/fixtures/number-format.json
// pins both sides).

const { invalid } = require('./errors');
const { readOptions } = require('./args');
const half = require('./half');
const { ARRAY_OF, MAX_RANK, carries, prepare, shapeText } = require('./host_data');

// Entries shown at each end of a summarised dimension (HRT_HAL_FORMAT_EDGE).
const EDGE = 3;
// halrt.sinks.stdio's and the CLI's default: more elements are summarised.
const DEFAULT_MAX_ELEMENTS = 16;
const MAX_MAX_ELEMENTS = 2 ** 30;
// A TypedArray's own element count, which no `length` property changes.
const typedArrayLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array).prototype, 'length').get;

// A magnitude rounded to each float dtype (to nearest, ties to even).
const ROUND = {
  f64: (x) => x,
  f32: Math.fround,
  f16: (x) => half.decode(half.F16, half.encode(half.F16, x)),
  bf16: (x) => half.decode(half.BF16, half.encode(half.BF16, x)),
};

// `digits` (significant, a string) with the first at 10^exponent, laid out
// as Number#toString does: positional from 1e-6 to below 1e21.
function layout(digits, exponent) {
  const count = digits.length;
  const point = exponent + 1;
  if (count <= point && point <= 21) return digits + '0'.repeat(point - count);
  if (point > 0 && point <= 21) return `${digits.slice(0, point)}.${digits.slice(point)}`;
  if (point > -6 && point <= 0) return `0.${'0'.repeat(-point)}${digits}`;
  const mantissa = count > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  return `${mantissa}e${exponent < 0 ? '-' : '+'}${Math.abs(exponent)}`;
}

// The fewest significant digits (ties away from zero, as toExponential
// rounds) that read back, rounded to the dtype, as the value.
function floatText(value, dtype) {
  if (Number.isNaN(value)) return 'NaN';
  const sign = value < 0 || Object.is(value, -0) ? '-' : '';
  const magnitude = Math.abs(value);
  if (magnitude === 0) return `${sign}0`;
  if (magnitude === Infinity) return `${sign}Infinity`;
  const round = ROUND[dtype];
  let text;
  for (let digits = 1; digits <= 17; ++digits) {
    text = magnitude.toExponential(digits - 1);
    if (round(Number(text)) === magnitude) break;
  }
  const [mantissa, exponent] = text.split('e');
  return sign + layout(mantissa.replace('.', ''), Number(exponent));
}

// The text of element `index` of `data`, a dtype's array.
function elementText(data, dtype, index) {
  const element = data[index];
  switch (dtype) {
    case 'f16':
    case 'bf16':
      return floatText(half.decode(dtype === 'f16' ? half.F16 : half.BF16, element), dtype);
    case 'f32':
    case 'f64':
      return floatText(element, dtype);
    case 'bool':
      return element ? 'true' : 'false';
    default:
      return String(element);
  }
}

function checkDtype(caller, dtype) {
  if (typeof dtype !== 'string' || ARRAY_OF[dtype] === undefined) {
    throw invalid(`${caller}: unknown dtype ${half.describe(dtype)} (expected one of ${Object.keys(ARRAY_OF).join(', ')})`);
  }
}

// Whether more than `maxElements` innermost entries would be written: the
// product of the dimensions before the first 0 (all of them when none is),
// which is the element count of a tensor that is not empty and the count of
// innermost `[]` of one that is (hrt_hal_tensor_format decides alike).
function summarised(shape, maxElements) {
  let entries = 1;
  for (const d of shape) {
    if (d === 0) break;
    entries *= d;
  }
  return entries > maxElements;
}

// The text of `data` (the array BufferView.read() returns for `dtype`, or a
// trace tensor's data) as a tensor of `shape`, as the stdio sink prints it
// after `=`.
function format(data, options) {
  const caller = 'halrt.format';
  if (options === null || typeof options !== 'object') {
    throw invalid(`${caller}: options must be an object with dtype and shape (got ${half.describe(options)})`);
  }
  const { dtype, shape: given, maxElements = DEFAULT_MAX_ELEMENTS } = readOptions(options, ['dtype', 'shape', 'maxElements'], caller, 'options');
  checkDtype(`${caller}: options.dtype`, dtype);
  // The shape is read once, before the data's length: no getter or Proxy
  // trap runs after the checks (to change the shape or shrink the data).
  const rank = Array.isArray(given) ? given.length : -1;
  const shape = rank >= 0 && rank <= MAX_RANK ? Array.from({ length: rank }, (_, i) => given[i]) : undefined;
  if (!shape || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    const got = shape ? shapeText(shape) : rank >= 0 ? `an Array of ${rank} elements` : half.describe(given);
    throw invalid(`${caller}: options.shape must be an Array of at most ${MAX_RANK} non-negative integers (got ${got})`);
  }
  if (!Number.isInteger(maxElements) || maxElements < 2 || maxElements > MAX_MAX_ELEMENTS) {
    throw invalid(`${caller}: options.maxElements must be an integer in [2, ${MAX_MAX_ELEMENTS}] (got ${half.describe(maxElements)})`);
  }
  if (!ArrayBuffer.isView(data) || !carries(dtype, data)) {
    throw invalid(`${caller}: data must be ${half.describe(new ARRAY_OF[dtype](0))} for dtype ${dtype} (got ${half.describe(data)})`);
  }
  const count = shape.reduce((a, b) => a * b, 1);
  const length = typedArrayLength.call(data);
  if (length !== count) {
    throw invalid(`${caller}: data has ${length} elements but shape ${shapeText(shape)} has ${count}`);
  }
  if (shape.length === 0) return elementText(data, dtype, 0);
  const summarise = summarised(shape, maxElements);
  const dimension = (dim, offset) => {
    const length = shape[dim];
    const stride = shape.slice(dim + 1).reduce((a, b) => a * b, 1);
    const elide = summarise && length > 2 * EDGE;
    const parts = [];
    for (let i = 0; i < length; ++i) {
      if (elide && i === EDGE) {
        parts.push('...');
        i = length - EDGE;
      }
      parts.push(dim + 1 === shape.length ? elementText(data, dtype, offset + i) : dimension(dim + 1, offset + i * stride));
    }
    return `[${parts.join(' ')}]`;
  };
  return dimension(0, 0);
}

// The text of one value of `dtype`: for a float dtype a number it holds
// exactly (or NaN); for an integer dtype an integer (number or BigInt) in
// its range; for bool true, false, 0 or 1.
function formatNumber(value, dtype) {
  const caller = 'halrt.formatNumber';
  checkDtype(`${caller}: dtype`, dtype);
  const round = ROUND[dtype];
  if (round ? typeof value !== 'number' : !['number', 'bigint', 'boolean'].includes(typeof value)) {
    throw invalid(`${caller}: value must be ${round ? 'a number' : 'a number, BigInt or boolean'} for ${dtype} (got ${half.describe(value)})`);
  }
  if (round && !Number.isNaN(value) && round(value) !== value) {
    throw invalid(`${caller}: value ${value} is not exact in ${dtype} (round it first: Math.fround, fromF16Bits(toF16Bits(x)), ...)`);
  }
  // Only bool takes a boolean here (device.tensor() reads one as 0/1 anywhere).
  if (typeof value === 'boolean' && dtype !== 'bool') {
    throw invalid(`${caller}: value is ${value}, a boolean, for ${dtype} (booleans are bool values; give 1 or 0)`);
  }
  // An integral double is exact, so one beyond 2^53 is its BigInt (prepare()
  // refuses those for device.tensor(), whose elements may have been rounded).
  const exact = (dtype === 'i64' || dtype === 'u64') && Number.isInteger(value) ? BigInt(value) : value;
  // prepare() checks integers and booleans against the dtype.
  return elementText(prepare(caller, 'value', exact, [], dtype).data, dtype, 0);
}

module.exports = { format, formatNumber, DEFAULT_MAX_ELEMENTS };
