// A debug sink that prints traces as text, without entering JavaScript.
//
//   === key (mlp.main op 2, invocation 1) ===
//   logits: 2x3xf32=[[0.25 -1.5 3] [0 0.125 1e-7]]
//   hidden: 1x17xf32=[[2.35 2.325 0 ... 0 0.5 0.075]]
//
// Summary and health traces print each tensor's summary instead:
//   logits: 2x3xf32 summary: count=6 nan=0 +inf=0 -inf=0 zero=1 min=-1.5
//     max=3 mean=0.3125 l2=3.5 (on one line)
//   logits: 2x3xf32 health: count=6 nan=0 +inf=0 -inf=0
// min and max written as elements of the tensor's dtype (integers and bool
// as numbers), mean and l2 as f64.
//
// A trace a flight recorder delivers says so: "(..., invocation 1,
// recorded)".
//
// Values and tensors are written as hal/element_format.h says, summarised
// beyond `max_elements` elements (the first and last 3 entries of each
// dimension longer than 6). Lines are written with one
// fwrite per trace under the sink's mutex, so traces from several devices
// never interleave.
// Ownership and threads as every debug sink (modules/debug_sink.h): the
// returned sink owns its state until its release runs; `stream` is borrowed
// and must outlive the sink.
#ifndef HRT_MODULES_SINKS_STDIO_SINK_H_
#define HRT_MODULES_SINKS_STDIO_SINK_H_

#include <stdint.h>
#include <stdio.h>

#include "modules/debug_sink.h"

hrt_status_t hrt_stdio_sink_create(FILE* stream, uint32_t max_elements,
                                   hrt_debug_sink_t* out_sink) HRT_MUST_USE;

#endif  // HRT_MODULES_SINKS_STDIO_SINK_H_
