// Calls between modules on the CPU devices: a program calling a callback
// module's function (modules/callback_module.h), which a "host" thread of
// the test finishes later, as the JS thread does for a HostModule; and a
// program calling another program module.
#include <stdatomic.h>
#include <string.h>

#include "base/threads.h"
#include "modules/callback_module.h"
#include "modules/hal_module.h"
#include "modules/program/program_module.h"
#include "test.h"
#include "test_submit.h"
#include "vm/context.h"

// The host: calls queued by the callback module, finished by its thread.
typedef struct {
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  hrt_host_call_t* queue[16];
  float inputs[16][4];
  int queued;
  bool stop;
  bool fail;  // finish every call with ABORTED
  atomic_int calls;
  atomic_int releases;
  hrt_thread_t thread;
} host_t;

// cb.double(a: f32[4]) -> (b: f32[4]), b = 2a: the callback keeps the call
// (and a copy of its input, valid until the call is finished anyway) for
// the host thread.
static void host_call(void* user_data, hrt_host_call_t* call,
                      const hrt_host_call_info_t* info, uint32_t count,
                      const hrt_trace_tensor_t* inputs) {
  host_t* host = user_data;
  (void)info;
  hrt_mutex_lock(&host->mutex);
  if (count == 1 && inputs[0].byte_length == 16 && host->queued < 16) {
    memcpy(host->inputs[host->queued], inputs[0].data, 16);
    host->queue[host->queued++] = call;
    hrt_cond_signal(&host->cond);
    call = NULL;
  }
  hrt_mutex_unlock(&host->mutex);
  if (call) {
    hrt_host_call_finish(
        call, hrt_status_make(HRT_STATUS_INTERNAL, "unexpected call"), NULL);
  }
}

static void host_release(void* user_data) {
  atomic_fetch_add(&((host_t*)user_data)->releases, 1);
}

static void* host_main(void* arg) {
  host_t* host = arg;
  hrt_mutex_lock(&host->mutex);
  for (;;) {
    while (!host->queued && !host->stop) hrt_cond_wait(&host->cond, &host->mutex);
    if (!host->queued) break;
    hrt_host_call_t* call = host->queue[0];
    float out[4];
    for (int i = 0; i < 4; ++i) out[i] = 2 * host->inputs[0][i];
    memmove(host->queue, host->queue + 1, (size_t)--host->queued * sizeof(void*));
    memmove(host->inputs, host->inputs + 1, (size_t)host->queued * 16);
    const bool fail = host->fail;
    hrt_mutex_unlock(&host->mutex);
    atomic_fetch_add(&host->calls, 1);
    const void* outputs[1] = {out};
    hrt_host_call_finish(call,
                         fail ? hrt_status_make(HRT_STATUS_ABORTED, "host failed")
                              : HRT_OK,
                         outputs);
    hrt_mutex_lock(&host->mutex);
  }
  hrt_mutex_unlock(&host->mutex);
  return NULL;
}

static hrt_status_t host_module(host_t* host, hrt_vm_module_t** out) {
  static const hrt_vm_tensor_type_t a = {"a", HRT_HAL_ELEMENT_TYPE_F32, 1, {4}};
  static const hrt_vm_tensor_type_t b = {"b", HRT_HAL_ELEMENT_TYPE_F32, 1, {4}};
  static const hrt_vm_function_def_t doubled = {"double", 1, 1, &a, &b};
  hrt_callback_module_callbacks_t callbacks = {
      .call = {host_call, host},
      .release = {host_release, host},
  };
  return hrt_callback_module_create("cb", 1, &doubled, callbacks, out);
}

static const char kApp[] =
    "{\"format\": \"halrt.module/1\", \"name\": \"app\","
    " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
    " \"functions\": {"
    "  \"main\": {\"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"locals\": [{\"name\": \"h\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"body\": ["
    "    {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
    "     \"bindings\": [\"x\", \"x\", \"h\"], \"constants\": [4]},"
    "    {\"op\": \"call\", \"callee\": \"cb.double\", \"args\": [\"h\"], \"results\": [\"h\"]},"
    "    {\"op\": \"call\", \"callee\": \"lib.twice\", \"args\": [\"h\"], \"results\": [\"y\"]}]}}}";

// lib.twice(a) -> b: two cb.double calls, through a local.
static const char kLib[] =
    "{\"format\": \"halrt.module/1\", \"name\": \"lib\", \"functions\": {"
    "  \"twice\": {\"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"outputs\": [{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"locals\": [{\"name\": \"t\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"body\": ["
    "    {\"op\": \"call\", \"callee\": \"cb.double\", \"args\": [\"a\"], \"results\": [\"t\"]},"
    "    {\"op\": \"call\", \"callee\": \"cb.double\", \"args\": [\"t\"], \"results\": [\"b\"]}]}}}";

typedef struct {
  hrt_notification_t done;
  hrt_status_t status;
  hrt_hal_buffer_view_t* output;
} result_t;

static void on_done(void* user_data, hrt_status_t status,
                    hrt_hal_buffer_view_t* const* outputs, uint32_t count) {
  result_t* result = user_data;
  result->status = status;
  result->output = count ? outputs[0] : NULL;
  hrt_notification_set(&result->done);
}

static void release_context(void* context) { hrt_vm_context_release(context); }
static void release_module(void* module) { hrt_vm_module_release(module); }
static void release_device(void* device) { hrt_hal_device_release(device); }
static void release_instance(void* instance) {
  hrt_vm_instance_release(instance);
}

// Runs app.main on `uri` with the host failing or not: x = [1, 2, 3, 4]
// gives y = 16x through one host call, then lib.twice's two.
static void run_on(const char* uri, bool fail, host_t* host) {
  hrt_vm_instance_t* instance = NULL;
  hrt_hal_device_t* device = NULL;
  hrt_vm_module_t *hal = NULL, *cb = NULL, *lib = NULL, *app = NULL;
  hrt_vm_context_t* context = NULL;
  CHECK_OK(hrt_vm_instance_create(&instance));
  TEST_DEFER(release_instance, instance);
  CHECK_OK(hrt_vm_instance_create_device(instance, uri, &device));
  TEST_DEFER(release_device, device);
  CHECK_OK(hrt_hal_module_create(device, NULL, NULL, &hal));
  TEST_DEFER(release_module, hal);
  CHECK_OK(host_module(host, &cb));
  TEST_DEFER(release_module, cb);
  CHECK_OK(hrt_program_module_create(kLib, strlen(kLib), NULL, &lib));
  TEST_DEFER(release_module, lib);
  CHECK_OK(hrt_program_module_create(kApp, strlen(kApp), NULL, &app));
  TEST_DEFER(release_module, app);
  hrt_vm_module_t* modules[4] = {hal, cb, lib, app};
  CHECK_OK(hrt_vm_context_create(instance, modules, 4, &context));
  TEST_DEFER(release_context, context);
  hrt_vm_function_t main_fn;
  CHECK_OK(hrt_vm_context_lookup_function(context, "app.main", &main_fn));
  const float x[4] = {1, 2, 3, 4};
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, x, &buffer));
  hrt_hal_buffer_view_t* input = NULL;
  const int64_t shape[1] = {4};
  hrt_status_t made = hrt_hal_buffer_view_create(
      buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 1, shape, &input);
  hrt_hal_buffer_release(buffer);
  CHECK_OK(made);
  hrt_mutex_lock(&host->mutex);
  host->fail = fail;
  hrt_mutex_unlock(&host->mutex);
  result_t result = {0};
  hrt_notification_init(&result.done);
  hrt_status_t started =
      hrt_vm_invoke_async(context, &main_fn, &input, 1, NULL,
                          (hrt_vm_invocation_done_t){on_done, &result}, NULL);
  hrt_hal_buffer_view_release(input);
  if (started != HRT_OK) hrt_notification_set(&result.done);
  CHECK_OK(started);
  WAIT_OR_EXIT(&result.done, "the invocation's completion");
  hrt_notification_deinit(&result.done);
  if (fail) {
    CHECK_STATUS(result.status, HRT_STATUS_ABORTED,
                 "functions.main.body[1]: call 'cb.double': host failed");
    return;
  }
  CHECK_OK(result.status);
  float y[4] = {0};
  hrt_status_t read = read_back(device, hrt_hal_buffer_view_buffer(result.output), y);
  hrt_hal_buffer_view_release(result.output);
  CHECK_OK(read);
  for (int i = 0; i < 4; ++i) CHECK(y[i] == 16 * x[i]);
}

static void program_calls_run_through_a_host_thread(void) {
  static host_t host;
  memset(&host, 0, sizeof(host));
  hrt_mutex_init(&host.mutex);
  hrt_cond_init(&host.cond);
  CHECK_OK(hrt_thread_create("host", host_main, &host, &host.thread));
  const char* const uris[] = {"local-sync", "local-task?workers=2"};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    for (int fail = 0; fail < 2; ++fail) {
      run_on(uris[i], fail, &host);
      test_run_deferred();
      if (hrt_test_failed_) break;
      // The run's module goes with its context's last reference, which the
      // invocation drops just after its completion: soon after, once.
      ++runs;
      POLL_OR_EXIT(atomic_load(&host.releases) >= runs,
                   "the callback module's release");
    }
  }
  hrt_mutex_lock(&host.mutex);
  host.stop = true;
  hrt_cond_signal(&host.cond);
  hrt_mutex_unlock(&host.mutex);
  hrt_thread_join(&host.thread);
  hrt_cond_deinit(&host.cond);
  hrt_mutex_deinit(&host.mutex);
  CHECK_EQ_INT(atomic_load(&host.calls), 2 * (3 + 1));
  CHECK_EQ_INT(atomic_load(&host.releases), runs);
}

static void callback_module_names_are_checked(void) {
  host_t host;
  memset(&host, 0, sizeof(host));
  hrt_vm_module_t* module = NULL;
  static const hrt_vm_tensor_type_t a = {"a", HRT_HAL_ELEMENT_TYPE_F32, 1, {4}};
  const hrt_vm_function_def_t twice[2] = {{"f", 1, 0, &a, NULL},
                                          {"f", 1, 0, &a, NULL}};
  hrt_callback_module_callbacks_t callbacks = {{host_call, &host},
                                               {host_release, &host}};
  CHECK_STATUS(hrt_callback_module_create("hal", 0, NULL, callbacks, &module),
               HRT_STATUS_INVALID_ARGUMENT, "module name 'hal'");
  CHECK_STATUS(hrt_callback_module_create("cb", 2, twice, callbacks, &module),
               HRT_STATUS_INVALID_ARGUMENT, "function 'f' is declared twice");
  // Creation failed: release is not called.
  CHECK_EQ_INT(atomic_load(&host.releases), 0);
}

TEST_MAIN(TEST_CASE(program_calls_run_through_a_host_thread),
          TEST_CASE(callback_module_names_are_checked),
          TEST_CASE(every_object_is_destroyed))
