// A debug sink that prints traces as text, without entering JavaScript.
//
//   === key (mlp.main op 2, invocation 1) ===
//   hidden: 4x16xf32=[2.35 2.325 ... (64 elements) ... 0 0.075]
//
// Tensors of more than `max_elements` elements show the first and last
// max_elements/2 elements. Lines are written with one fwrite per trace under
// the sink's mutex, so traces from several devices never interleave.
// Ownership and threads as every debug sink (modules/debug_sink.h): the
// returned sink owns its state until its release runs; `stream` is borrowed
// and must outlive the sink.
#ifndef HRT_MODULES_STDIO_SINK_H_
#define HRT_MODULES_STDIO_SINK_H_

#include <stdint.h>
#include <stdio.h>

#include "modules/debug_sink.h"

hrt_status_t hrt_stdio_sink_create(FILE* stream, uint32_t max_elements,
                                   hrt_debug_sink_t* out_sink) HRT_MUST_USE;

#endif  // HRT_MODULES_STDIO_SINK_H_
