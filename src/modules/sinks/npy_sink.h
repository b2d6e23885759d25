// A debug sink that writes every traced tensor to a NumPy .npy file
// (format version 1.0), without entering JavaScript.
//
// Folder: `directory` is created if missing (parents included) and opened
// once, at creation; every file is made relative to that open folder, so a
// folder renamed, removed or replaced by a symlink afterwards never receives
// files meant for the original (traces then fail with DATA_LOSS).
//
// File names: "<sequence>_<prefix>-<hash>_<index>.npy", where <sequence> is
// the invocation's number in its context (hrt_trace_info_t), <prefix> the first
// HRT_NPY_KEY_PREFIX bytes of the key with every byte outside [A-Za-z0-9_.-]
// replaced by '_', <hash> the 32-bit FNV-1a hash of the key's exact bytes as 8
// lowercase hex digits, and <index> the tensor's position in the trace. If that
// name is taken (the same key traced twice in an invocation, contexts sharing
// the sink, a second run into the same folder, a hash collision), the file is
// "<same>.<n>.npy" with the smallest free n in 1..HRT_NPY_MAX_RENAMES; when all
// are taken the trace fails with DATA_LOSS. Names never exceed 120 bytes,
// whatever the key.
//
// No file is ever overwritten and nothing is written outside the folder:
// each tensor is written to a new hidden temporary file (".halrt-*.tmp",
// created with O_CREAT|O_EXCL|O_NOFOLLOW, so a planted file or symlink is
// never opened) and then hard-linked to its final name with linkat(), which
// fails rather than replace an existing name and never follows a symlink
// there; the temporary name is then removed. A reader never sees half a
// file. The folder's filesystem must support hard links.
//
// Index: every file written adds one line to "index.jsonl" in the folder
// (opened at creation with O_APPEND|O_NOFOLLOW; it must be a regular file),
// after the file is complete, so that files map back to keys:
//   {"file":"7_after_matmul-2c3d1e0f_0.npy","key":"after/matmul",
//    "sequence":7,"function":"mlp.main","op":3,"tensor":0,"name":"x",
//    "dtype":"f64","shape":[2,3]}
// (one line per file, fields in this order). Strings are JSON strings;
// bytes that are not valid UTF-8 are written as the escapes \udc80-\udcff
// (Python's "surrogateescape" convention), so the exact bytes of every key
// can be recovered. "dtype" is the halrt dtype (bf16 files hold '<u2' raw
// bits). Lines of earlier runs into the same folder are kept.
//
// Summary and health traces (hrt_trace_info_t.mode) carry no tensor data:
// the sink writes nothing for them (no file, no index line).
//
// dtypes map to NumPy descrs as hrt_npy_descr says. A file that cannot be
// written fails the invocation with DATA_LOSS naming the path.
//
// Ownership and threads: as every debug sink (modules/debug_sink.h): the
// returned sink owns the folder's and the index's descriptors until its
// release runs (on any thread). Its trace callback keeps no state between
// calls beyond those descriptors and an atomic counter: names are claimed
// by the filesystem (O_EXCL, linkat) and each index line is appended with
// one write(), so calls from several threads at once, and several sinks or
// processes sharing a folder, never overwrite each other's files.
#ifndef HRT_MODULES_SINKS_NPY_SINK_H_
#define HRT_MODULES_SINKS_NPY_SINK_H_

#include "modules/debug_sink.h"

// How many bytes of the key appear in a file name.
#define HRT_NPY_KEY_PREFIX 64
// The largest <n> of a "<name>.<n>.npy" file (see above).
#define HRT_NPY_MAX_RENAMES 9999

hrt_status_t hrt_npy_sink_create(const char* directory,
                                 hrt_debug_sink_t* out_sink) HRT_MUST_USE;

// "<f4", "|b1", ... for `type`.
const char* hrt_npy_descr(hrt_hal_element_type_t type);

#endif  // HRT_MODULES_SINKS_NPY_SINK_H_
