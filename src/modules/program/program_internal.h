// Internal to the program module's files (program_*.c): the parsed module
// that they all read, and the parser state that the parsing files share.
//
// hrt_program_module_create() builds the module on the creating thread;
// after that it is immutable and read on any thread while the module lives.
// Names point into the module's JSON document, everything else parsed into
// its arena; both are freed with the module.
#ifndef HRT_MODULES_PROGRAM_PROGRAM_INTERNAL_H_
#define HRT_MODULES_PROGRAM_PROGRAM_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/json.h"
#include "hal/builtin_signatures.h"
#include "hal/executable.h"
#include "hal/tensor_summary.h"
#include "vm/module.h"

// How one device kind gets an executable.
typedef struct hrt_kind_spec_s {
  bool present;
  hrt_hal_executable_format_t format;
  const char* path;  // resolved against the module's directory, or NULL
  const char* data;  // inline PTX or CUDA source text, or NULL
  // CUDA source: the program's name for compile logs, compiler options.
  const char* source_name;
  uint32_t option_count;
  const char** options;
  // CUDA formats: declared entries (0: all, inferred).
  uint32_t entry_decl_count;
  hrt_hal_entry_decl_t* entry_decls;
} hrt_kind_spec_t;

typedef struct hrt_executable_spec_s {
  const char* name;
  hrt_kind_spec_t local;
  hrt_kind_spec_t cuda;
  bool builtin;  // builtin on some kind: entries are built-in kernels
} hrt_executable_spec_t;

typedef enum hrt_op_kind_e {
  HRT_OP_DISPATCH,
  HRT_OP_FILL,
  HRT_OP_COPY,
  HRT_OP_TRACE,
  HRT_OP_BARRIER,
  HRT_OP_CALL,
} hrt_op_kind_t;

typedef struct hrt_op_s {
  hrt_op_kind_t kind;
  // dispatch
  uint32_t executable;
  const char* entry;
  const char* kernel;                        // "executable.entry"
  const hrt_builtin_signature_t* signature;  // built-in kernels only
  uint32_t workgroup_count[3];
  uint32_t workgroup_size[3];
  uint32_t constant_count;
  uint32_t* constants;
  // dispatch bindings, trace values, [target] / [source, target], or a
  // call's args then its results
  uint32_t operand_count;
  uint32_t* operands;  // value indices
  // call: "module.function", and how many operands are args
  const char* callee;
  uint32_t arg_count;
  // fill
  uint64_t pattern;
  uint32_t pattern_length;
  // trace: its key; dispatch: the key of its traceDispatches trace,
  // "function:op:entry"
  const char* key;
  // trace: its "mode" when given; otherwise the HAL module's trace_mode
  bool has_trace_mode;
  hrt_hal_trace_mode_t trace_mode;
  // trace with "counts" (health from chain_health_f32's counts): per
  // reported value, the counts value and the chain step; NULL otherwise.
  // The reported values themselves are not read.
  uint32_t* counts;
  uint8_t* steps;
} hrt_op_t;

typedef struct hrt_function_s {
  const char* qualified_name;  // "module.function"
  // inputs, then outputs, then locals, then the module's constants (from
  // constant_base on, in the module's order)
  uint32_t value_count;
  uint32_t constant_base;
  hrt_vm_tensor_type_t* types;
  uint64_t* byte_lengths;
  // What one call allocates: the outputs' and used locals' bytes
  // (saturating).
  uint64_t call_bytes;
  uint32_t op_count;
  hrt_op_t* ops;
  // [value_count]: an output or local whose first use writes all of it
  // (program_ops.h), which calls allocate without zeroing.
  bool* overwritten;
  // [value_count]: a local no op uses (it may be reported from counts),
  // which calls do not allocate.
  bool* unused;
} hrt_function_t;

// A module-level constant (program_values.h): read-only, uploaded once per
// context that links the module (program_state.h).
typedef struct hrt_module_constant_s {
  hrt_vm_tensor_type_t type;
  uint64_t byte_length;
  void* data;  // byte_length bytes, owned (malloc; NULL when empty)
} hrt_module_constant_t;

typedef struct hrt_program_module_s {
  hrt_vm_module_t base;
  hrt_json_document_t* document;  // names point into it
  hrt_arena_t arena;              // everything else parsed
  uint32_t executable_count;
  hrt_executable_spec_t* executables;
  uint32_t constant_count;
  hrt_module_constant_t* constants;  // [constant_count]
  hrt_function_t* functions;         // [base.function_count]
  hrt_vm_function_def_t* defs;  // [base.function_count]
  uint32_t dispatch_count;
  const char** dispatch_keys;  // [dispatch_count]: every dispatch's op->key
} hrt_program_module_t;

// One creation's parse: the module being filled in, and the directory that
// file paths are relative to (NULL: none).
typedef struct hrt_program_parser_s {
  hrt_program_module_t* module;
  const char* base_dir;
} hrt_program_parser_t;

// Arena memory of the module being parsed, freed with it.
static inline hrt_status_t hrt_program_alloc(hrt_program_parser_t* parser,
                                             size_t size, void** out) {
  return hrt_arena_allocate(&parser->module->arena, size, "module", out);
}

#endif  // HRT_MODULES_PROGRAM_PROGRAM_INTERNAL_H_
