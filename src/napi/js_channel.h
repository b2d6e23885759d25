// A channel carries messages from any thread (device completion threads, and
// later debug-sink producers) to the JavaScript thread of one env, through
// one napi_threadsafe_function.
//
// Threads and ownership:
// - create, begin_work, end_work and close run on the env's JS thread only.
// - post, retain and release may run on any thread. post is the only thing a
//   producer does with the channel; producers never call N-API themselves.
// - The channel struct is reference counted natively, independently of N-API,
//   so a producer can hold it after the env is gone. create returns one
//   reference (the caller's, normally the per-env state, dropped by close) and
//   keeps a second one for the threadsafe function, dropped by its finalizer.
// - `tsfn` is guarded by the mutex and becomes NULL when the threadsafe
//   function's finalizer runs or the channel is closed or finished (finish
//   may run on any thread). post, begin_work and end_work use it under the
//   mutex only while it is set, so no thread touches the threadsafe function
//   after it was released or its finalizer has begun (Node forbids any use
//   past that point).
// - A posted message is owned by the channel until it is delivered: its
//   deliver function runs once, on the JS thread with a live env, or with
//   env == NULL at teardown, when it must only free native memory. When post
//   returns false the message was not taken and the caller frees it.
// - An idle channel never keeps the event loop alive: the threadsafe function
//   is unreferenced while no work is pending. begin_work/end_work count the
//   operations whose results are still to come (promises to settle); while
//   the count is above zero the loop stays alive.
#ifndef HRT_NAPI_JS_CHANNEL_H_
#define HRT_NAPI_JS_CHANNEL_H_

#include <node_api.h>
#include <stdbool.h>

typedef struct hrt_js_channel_s hrt_js_channel_t;
typedef struct hrt_js_message_s hrt_js_message_t;

// Delivers and frees `message`. With a live env it runs on the JS thread and
// may call N-API (and settle promises); `channel` is the channel it came
// through. With env == NULL (teardown) `channel` is NULL too and only native
// memory may be freed.
typedef void (*hrt_js_message_deliver_fn)(napi_env env,
                                          hrt_js_channel_t* channel,
                                          hrt_js_message_t* message);

// Embedded as the first member of every concrete message.
struct hrt_js_message_s {
  hrt_js_message_deliver_fn deliver;
};

// Runs once on the JS thread when the channel's threadsafe function is
// finalized: after hrt_js_channel_finish once the queue has drained, or at
// env teardown. `env` may be used to delete references.
typedef void (*hrt_js_channel_finalize_fn)(napi_env env, void* data);

// JS thread. Creates the channel with its threadsafe function (unreferenced).
// `name` names the async resource; `on_finalize` (may be NULL) is called with
// `finalize_data` as described above. On failure returns a napi status with
// a pending exception and creates nothing (`on_finalize` is not called).
napi_status hrt_js_channel_create(napi_env env, const char* name,
                                  hrt_js_channel_finalize_fn on_finalize,
                                  void* finalize_data,
                                  hrt_js_channel_t** out_channel);

// Any thread.
void hrt_js_channel_retain(hrt_js_channel_t* channel);
void hrt_js_channel_release(hrt_js_channel_t* channel);

// Any thread. Queues `message` for delivery on the JS thread. Returns false
// when the channel is closed or closing; the caller keeps ownership then.
// Never blocks on the JS thread.
bool hrt_js_channel_post(hrt_js_channel_t* channel, hrt_js_message_t* message);

// JS thread. One operation whose result will come through the channel was
// started / has been delivered. Calls must pair up.
void hrt_js_channel_begin_work(napi_env env, hrt_js_channel_t* channel);
void hrt_js_channel_end_work(napi_env env, hrt_js_channel_t* channel);

// JS thread (env teardown). Stops accepting messages, releases the
// threadsafe function, and drops the caller's reference. Messages still
// queued are delivered with env == NULL.
void hrt_js_channel_close(hrt_js_channel_t* channel);

// Any thread. Stops accepting messages and drops the caller's reference, but
// messages already queued are still delivered to JavaScript; the channel
// finalizes after the last of them.
void hrt_js_channel_finish(hrt_js_channel_t* channel);

#endif  // HRT_NAPI_JS_CHANNEL_H_
