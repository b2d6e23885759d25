#include "napi/js_channel.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/threads.h"
#include "napi/js_common.h"

struct hrt_js_channel_s {
  atomic_int_fast32_t ref_count;
  hrt_mutex_t mutex;
  // Guarded by `mutex`. hrt_js_channel_finish may set it to NULL from any
  // thread, so every access (the JS thread's too) takes the mutex.
  napi_threadsafe_function tsfn;
  // JS thread only.
  uint32_t pending_work;
  hrt_js_channel_finalize_fn on_finalize;
  void* finalize_data;
};

void hrt_js_channel_retain(hrt_js_channel_t* channel) {
  atomic_fetch_add_explicit(&channel->ref_count, 1, memory_order_relaxed);
}

void hrt_js_channel_release(hrt_js_channel_t* channel) {
  if (atomic_fetch_sub_explicit(&channel->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  hrt_mutex_deinit(&channel->mutex);
  free(channel);
}

// JS thread; with env == NULL at teardown, when `context` may already be
// freed and is not touched.
static void hrt_js_channel_call_js(napi_env env, napi_value js_callback,
                                   void* context, void* data) {
  (void)js_callback;
  hrt_js_message_t* message = (hrt_js_message_t*)data;
  if (message == NULL) return;
  if (env == NULL) {
    message->deliver(NULL, NULL, message);
    return;
  }
  message->deliver(env, (hrt_js_channel_t*)context, message);
}

// JS thread, once, when the threadsafe function is done (queue drained, or
// env teardown). Items still queued are passed to call_js with env == NULL
// after this returns.
static void hrt_js_channel_tsfn_finalize(napi_env env, void* finalize_data,
                                         void* finalize_hint) {
  (void)env;
  (void)finalize_hint;
  hrt_js_channel_t* channel = (hrt_js_channel_t*)finalize_data;
  hrt_mutex_lock(&channel->mutex);
  channel->tsfn = NULL;
  hrt_mutex_unlock(&channel->mutex);
  if (channel->on_finalize != NULL) {
    channel->on_finalize(env, channel->finalize_data);
  }
  hrt_js_channel_release(channel);
}

napi_status hrt_js_channel_create(napi_env env, const char* name,
                                  hrt_js_channel_finalize_fn on_finalize,
                                  void* finalize_data,
                                  hrt_js_channel_t** out_channel) {
  hrt_js_channel_t* channel = calloc(1, sizeof(*channel));
  if (channel == NULL) {
    napi_throw_error(env, "RESOURCE_EXHAUSTED",
                     "out of host memory creating a completion channel");
    return napi_generic_failure;
  }
  atomic_init(&channel->ref_count, 2);  // the caller's + the tsfn's
  hrt_mutex_init(&channel->mutex);

  napi_value resource_name = NULL;
  napi_status status =
      napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource_name);
  if (status == napi_ok) {
    status = napi_create_threadsafe_function(
        env, /*func=*/NULL, /*async_resource=*/NULL, resource_name,
        /*max_queue_size=*/0, /*initial_thread_count=*/1,
        /*thread_finalize_data=*/channel, hrt_js_channel_tsfn_finalize,
        /*context=*/channel, hrt_js_channel_call_js, &channel->tsfn);
  }
  if (status != napi_ok) {
    hrt_js_throw_napi_failure(env, status, "napi_create_threadsafe_function");
    hrt_mutex_deinit(&channel->mutex);
    free(channel);
    return status;
  }
  // Idle channels must not keep the process alive.
  status = napi_unref_threadsafe_function(env, channel->tsfn);
  if (status != napi_ok) {
    hrt_js_throw_napi_failure(env, status, "napi_unref_threadsafe_function");
    hrt_js_channel_close(channel);
    return status;
  }
  // Set only now: a failed create never calls on_finalize.
  channel->on_finalize = on_finalize;
  channel->finalize_data = finalize_data;
  *out_channel = channel;
  return napi_ok;
}

bool hrt_js_channel_post(hrt_js_channel_t* channel, hrt_js_message_t* message) {
  bool posted = false;
  hrt_mutex_lock(&channel->mutex);
  if (channel->tsfn != NULL) {
    posted = napi_call_threadsafe_function(channel->tsfn, message,
                                           napi_tsfn_nonblocking) == napi_ok;
  }
  hrt_mutex_unlock(&channel->mutex);
  return posted;
}

// JS thread. Refs (`keep_alive`) or unrefs the threadsafe function unless
// it has been released. Under the mutex: a finish on another thread may be
// releasing it right now; once released (thread count 0) Node closes it as
// soon as its queue is empty, whatever its ref state, so skipping is safe.
static void hrt_js_channel_keep_alive(napi_env env, hrt_js_channel_t* channel,
                                      bool keep_alive) {
  hrt_mutex_lock(&channel->mutex);
  if (channel->tsfn != NULL) {
    if (keep_alive) {
      napi_ref_threadsafe_function(env, channel->tsfn);
    } else {
      napi_unref_threadsafe_function(env, channel->tsfn);
    }
  }
  hrt_mutex_unlock(&channel->mutex);
}

void hrt_js_channel_begin_work(napi_env env, hrt_js_channel_t* channel) {
  if (channel->pending_work++ == 0) {
    hrt_js_channel_keep_alive(env, channel, true);
  }
}

void hrt_js_channel_end_work(napi_env env, hrt_js_channel_t* channel) {
  if (channel->pending_work == 0) return;
  if (--channel->pending_work == 0) {
    hrt_js_channel_keep_alive(env, channel, false);
  }
}

// Takes the threadsafe function from the gate (so no producer posts again)
// and releases it with `mode`.
static void hrt_js_channel_stop(hrt_js_channel_t* channel,
                                napi_threadsafe_function_release_mode mode) {
  hrt_mutex_lock(&channel->mutex);
  napi_threadsafe_function tsfn = channel->tsfn;
  channel->tsfn = NULL;
  hrt_mutex_unlock(&channel->mutex);
  if (tsfn != NULL) napi_release_threadsafe_function(tsfn, mode);
  hrt_js_channel_release(channel);
}

void hrt_js_channel_close(hrt_js_channel_t* channel) {
  // Abort: nothing queued is delivered to JavaScript any more; the finalizer
  // still runs (dropping the tsfn's reference) and frees queued messages
  // through call_js with env == NULL.
  hrt_js_channel_stop(channel, napi_tsfn_abort);
}

void hrt_js_channel_finish(hrt_js_channel_t* channel) {
  hrt_js_channel_stop(channel, napi_tsfn_release);
}
