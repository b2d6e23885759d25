// The text of elements and tensors: the one format the stdio sink prints and
// lib/format.js (halrt.format, halrt.formatNumber) writes, character for
// character (test/fixtures/number-format.json pins both; README "The debug
// sink" documents it).
//
// - f16, bf16, f32, f64: the fewest significant digits p (1..17) such that
//   the value rounded to p digits, ties away from zero, read back as a
//   double and rounded to the element type (nearest, ties to even) is the
//   value again; laid out as JavaScript's Number#toString does: positional
//   when the printed decimal d has 1e-6 <= |d| < 1e21 (`0.1`, `100`,
//   `0.000001`), else `d.ddde-7`, `1e+21`. `NaN`, `Infinity`, `-Infinity`,
//   and `-0` for negative zero.
// - integers: exact decimal; bool: `true` (any nonzero byte) or `false`.
// - tensors: nested brackets with spaces, `[[1 2 3] [4 5 6]]`; a scalar is
//   its element alone. A tensor of more than `max_elements` elements (an
//   empty one: of more than `max_elements` innermost `[]`, the product of its
//   dimensions before the first 0) is summarised: each dimension longer than
//   2 * HRT_HAL_FORMAT_EDGE shows its first and last HRT_HAL_FORMAT_EDGE
//   entries with `...` between.
// Pure functions of their arguments: callable from any thread, the C locale
// or not.
#ifndef HRT_HAL_ELEMENT_FORMAT_H_
#define HRT_HAL_ELEMENT_FORMAT_H_

#include <stdint.h>
#include <stdio.h>

#include "hal/element_type.h"

// Bytes that hold the text of any element, with its NUL.
#define HRT_HAL_ELEMENT_TEXT_CAPACITY 32
// Entries shown at each end of a summarised dimension.
#define HRT_HAL_FORMAT_EDGE 3

// Writes element `index` of the array of `type` at `data` as text.
void hrt_hal_element_format(hrt_hal_element_type_t type, const void* data,
                            uint64_t index,
                            char out[HRT_HAL_ELEMENT_TEXT_CAPACITY]);

// Writes the tensor of `type` and `shape` (`rank` dims) whose row-major
// elements are at `data` to `stream`. The first write that fails ends the
// text there; the caller sees it only in what the stream holds.
void hrt_hal_tensor_format(hrt_hal_element_type_t type, uint32_t rank,
                           const int64_t* shape, const void* data,
                           uint64_t max_elements, FILE* stream);

#endif  // HRT_HAL_ELEMENT_FORMAT_H_
