// A channel carries messages from any thread (device completion threads,
// debug-sink producers) to the JavaScript thread of one env, through one
// napi_threadsafe_function.
//
// Threads and ownership:
// - create, begin_work, end_work, close, defer and time_left run on the env's
//   JS thread only.
// - post, retain and release may run on any thread. post is the only thing a
//   producer does with the channel; producers never call N-API themselves.
// - The struct is reference counted natively, independently of N-API, so a
//   producer can hold it after the env is gone. create returns the caller's
//   reference (normally the per-env state's, dropped by close).
// - A posted message is owned by the channel until it is delivered: its
//   deliver function runs on the JS thread with a live env, or with
//   env == NULL at teardown, when it must only free native memory. When post
//   returns false the message was not taken and the caller frees it.
// - Messages are delivered in the order posted. Completions that only
//   settle promises (`settles_only`) may settle several in one JS-thread
//   call, in order; a message that runs user code is delivered on its own,
//   after the reactions to everything before it.
// - An idle channel never keeps the event loop alive; begin_work/end_work
//   count the results still to come (promises to settle), which do.
// - Time slices: all channels of an env share one budget of
//   HRT_JS_CHANNEL_TURN_BUDGET_NS of JS-thread time per turn of the event
//   loop, however many there are; channels that find it spent are served
//   round robin in later turns, so timers and I/O run between slices.
//   Without lib/'s setScheduler hook channels never wait.
// How wake-ups, batching and slices work: the top of js_channel.c.
#ifndef HRT_NAPI_JS_CHANNEL_H_
#define HRT_NAPI_JS_CHANNEL_H_

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct hrt_js_channel_s hrt_js_channel_t;
typedef struct hrt_js_message_s hrt_js_message_t;

// JS-thread time an env's channels may spend delivering per turn of the
// event loop: a few milliseconds, so that a 1 ms timer still fires within a
// few ms during a burst, while a turn of the loop (a few µs) stays small
// against the work between turns.
#define HRT_JS_CHANNEL_TURN_BUDGET_NS (2 * 1000 * 1000)

// The most settles_only messages one wake-up delivers.
#define HRT_JS_CHANNEL_MAX_BATCH 64

// Delivers and frees `message`, or hands it back with hrt_js_channel_defer.
// With a live env it runs on the JS thread and may call N-API (and settle
// promises); `channel` is the channel it came through. With env == NULL
// (teardown) `channel` is NULL too and only native memory may be freed.
typedef void (*hrt_js_message_deliver_fn)(napi_env env,
                                          hrt_js_channel_t* channel,
                                          hrt_js_message_t* message);

// Embedded as the first member of every concrete message.
struct hrt_js_message_s {
  hrt_js_message_deliver_fn deliver;
  hrt_js_message_t* next;  // the channel's, while queued
  // Set by the producer before posting: delivering it calls no JavaScript
  // but settles promises (and never defers), so it may share a wake-up with
  // the settles_only messages next to it (completion batching, above).
  bool settles_only;
};

// Per-env state of the time slices (a member of hrt_js_env_t). JS thread
// only.
typedef struct hrt_js_channel_turn_s {
  int64_t spent_ns;  // delivering, since the channels last waited for a turn
  // Channels waiting for a later turn, in order (each holds a reference),
  // and the head when it has been woken to drain.
  hrt_js_channel_t* waiting_head;
  hrt_js_channel_t* waiting_tail;
  hrt_js_channel_t* woken;
  bool scheduled;          // a resume is scheduled with set_immediate
  napi_ref set_immediate;  // lib/'s hook; NULL: never yield
  napi_ref resume;         // the function scheduled; made on first use
} hrt_js_channel_turn_t;

// JS thread, env teardown: drops the waiting channels and the references.
void hrt_js_channel_turn_deinit(napi_env env, hrt_js_channel_turn_t* turn);

// Runs once on the JS thread when the channel's threadsafe function is
// finalized: after hrt_js_channel_finish once every message has been
// delivered, or at env teardown (messages still queued are then freed after
// it returns). `env` may be used to delete references.
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
// Never blocks on the JS thread. Rule for every producer: post a result
// before dropping any reference that keeps the channel open (a module whose
// release finishes its sink's channel), or the post is refused and the
// promise waiting for the result never settles.
bool hrt_js_channel_post(hrt_js_channel_t* channel, hrt_js_message_t* message);

// JS thread, inside `message`'s deliver function only: `message` is not
// done; the channel keeps it and delivers it again, first, in a later turn.
void hrt_js_channel_defer(hrt_js_channel_t* channel, hrt_js_message_t* message);

// JS thread, inside a deliver function: the nanoseconds of the turn's budget
// left (zero or less when spent: a deliver function still does one step of
// its work then, so that every turn makes progress), or INT64_MAX when the
// channel cannot yield to the event loop.
int64_t hrt_js_channel_time_left_ns(napi_env env);

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
