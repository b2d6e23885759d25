// A debug sink that writes every traced tensor to a NumPy .npy file
// (format version 1.0), without entering JavaScript.
//
// Files go to `directory` (created if missing, parents included), named
// "<sequence>_<key>_<index>.npy", where every character of the key outside
// [A-Za-z0-9_.-] becomes '_' and <index> is the tensor's position in the
// trace. Each file is written to "<name>.tmp" and renamed, so a reader never
// sees half a file. dtypes map to NumPy descrs as hrt_npy_descr says; bf16,
// which NumPy lacks, is stored as '<u2' raw bits. A file that cannot be
// written fails the invocation with DATA_LOSS naming the path. An existing
// file of the same name is replaced: keys that differ only in replaced
// characters, or a key traced twice in one invocation, share a name (the
// last trace wins), so give each run its own directory and distinct keys.
// Ownership and threads as every debug sink (modules/debug_sink.h).
#ifndef HRT_MODULES_NPY_SINK_H_
#define HRT_MODULES_NPY_SINK_H_

#include "modules/debug_sink.h"

hrt_status_t hrt_npy_sink_create(const char* directory,
                                 hrt_debug_sink_t* out_sink) HRT_MUST_USE;

// "<f4", "|b1", ... for `type`.
const char* hrt_npy_descr(hrt_hal_element_type_t type);

#endif  // HRT_MODULES_NPY_SINK_H_
