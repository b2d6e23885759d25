#include "napi/js_channel.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/list.h"
#include "base/threads.h"
#include "napi/js_common.h"

// How it works. Posted messages wait in the channel's own FIFO (guarded by
// its mutex). The threadsafe function only carries wake-ups: one is queued
// when the FIFO gets a message while no drain is due; each wake-up delivers
// one message and queues the next while messages remain. Node runs such
// wake-ups back to back within a turn of the event loop, running the
// microtasks (reactions of the promises a message settled) after each.
// create keeps a second reference for the threadsafe function, dropped by
// its finalizer.
//
// Completion batching: a wake-up that delivered a `settles_only` message
// goes on with the settles_only messages right behind it in the FIFO, up to
// HRT_JS_CHANNEL_MAX_BATCH, so that many invocations completing together
// settle in one JS-thread call. Their promises settle in FIFO order and
// their reactions then run in that order, after the last of them. A message
// that runs a user callback (a trace batch, an invocation event) is never
// batched. How many are batched is bounded by time as well (below).
//
// `tsfn` is guarded by the mutex and becomes NULL when the threadsafe
// function is released or finalized. post, begin_work and end_work use it
// under the mutex only while it is set, so no thread touches the threadsafe
// function after it was released or its finalizer has begun (Node forbids
// any use past that point).
//
// Time slices. Once the turn's budget is spent, a channel about to drain
// joins the env's turn list instead; a setImmediate (lib/'s setScheduler
// hook) starts the next turn with a fresh budget and wakes the list's head.
// A delivery that would take longer than the budget left delivers part of
// its work and defers itself; it is delivered again, before anything posted
// after it, in a later turn. The turn's budget counts each drain's
// deliveries, and the time from a drain that queued the channel's next
// wake-up to that wake-up (the reactions of the promises it settled, so that
// many invocations settling at once with slow reactions are sliced too). A
// batch of settles_only messages stops once its deliveries plus the
// reactions it would add (the last wake-up's reaction time per message)
// would pass the budget left; the first wake-up after the FIFO was empty
// delivers one message, since no reaction time is known yet. Turns in which
// no channel waited do not reset the budget: at worst a channel waits once
// more than needed. Channels on the turn list are dormant (their drain is
// due, no wake-up queued) until the turn wakes them, one at a time from the
// head, so a channel keeps its place until it is served; the head woken by
// a new turn is granted one delivery even if channels not on the list spent
// the budget first, which keeps every waiting channel moving.

struct hrt_js_channel_s {
  atomic_int_fast32_t ref_count;
  hrt_mutex_t mutex;
  // Guarded by `mutex`. hrt_js_channel_finish and the drain may release the
  // threadsafe function, so every access (the JS thread's too) takes the
  // mutex.
  napi_threadsafe_function tsfn;
  hrt_js_message_t* head;  // the FIFO of posted messages
  hrt_js_message_t* tail;
  // A drain is due: a wake-up is queued on `tsfn`, a drain is running, or
  // the channel waits for the next turn. The FIFO is empty while it is
  // false.
  bool due;
  bool finishing;  // finish was called: no more posts
  // JS thread only.
  bool deferred;  // the message being delivered deferred
  bool waiting;   // on the env's turn list (which holds a reference)
  bool granted;   // woken at a new turn: delivers whatever the budget says
  // When the last drain queued the next wake-up (0: it did not): the time
  // from then to the next drain, the reactions of the promises the messages
  // settled, counts against the turn's budget.
  int64_t queued_ns;
  uint32_t queued_count;  // the messages that drain delivered (at least 1)
  // The time those reactions took per message, as the next drain measured
  // it; -1 (unknown) until then and once the FIFO has emptied: it bounds
  // how many settles_only messages a drain delivers together.
  int64_t reaction_ns;
  hrt_js_channel_t* next_waiting;  // on the env's turn list
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

//===----------------------------------------------------------------------===//
// JS thread: draining in time slices
//===----------------------------------------------------------------------===//

// Takes `channel` off the env's turn list (normally its head) and drops the
// list's reference.
static void hrt_js_channel_turn_remove(hrt_js_channel_turn_t* turn,
                                       hrt_js_channel_t* channel) {
  hrt_js_channel_t** link = &turn->waiting_head;
  hrt_js_channel_t* previous = NULL;
  while (*link != channel) {
    previous = *link;
    link = &previous->next_waiting;
  }
  *link = channel->next_waiting;
  if (turn->waiting_tail == channel) turn->waiting_tail = previous;
  channel->next_waiting = NULL;
  channel->waiting = false;
  if (turn->woken == channel) turn->woken = NULL;
  hrt_js_channel_release(channel);
}

// Wakes the head of the turn list through its threadsafe function, so that
// it drains as on any wake-up: from the event loop, with no JavaScript on
// the stack (a worker terminated during a delivery then unwinds as it would
// without time slices). A channel that can no longer be woken (closed, or
// the env going away) leaves the list, and the next is woken instead.
static void hrt_js_channel_wake_head(hrt_js_channel_turn_t* turn,
                                     bool granted) {
  while (turn->waiting_head != NULL && turn->woken == NULL) {
    hrt_js_channel_t* channel = turn->waiting_head;
    hrt_mutex_lock(&channel->mutex);
    bool woken = channel->tsfn != NULL &&
                 napi_call_threadsafe_function(
                     channel->tsfn, NULL, napi_tsfn_nonblocking) == napi_ok;
    hrt_mutex_unlock(&channel->mutex);
    if (woken) {
      channel->granted = granted;
      turn->woken = channel;
    } else {
      hrt_js_channel_turn_remove(turn, channel);
    }
  }
}

// setImmediate's callback: the event loop has turned. The budget starts
// afresh and the channel first on the turn list is woken, granted one
// delivery even if channels not on the list spend the budget before it
// drains, so that every waiting channel is served in its turn.
static napi_value hrt_js_channel_resume(napi_env env, napi_callback_info info) {
  (void)info;
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return NULL;
  hrt_js_channel_turn_t* turn = &state->turn;
  turn->scheduled = false;
  turn->spent_ns = 0;
  // A channel woken in the last turn that never drained (closed meanwhile)
  // must not hold the list: the head is woken again.
  turn->woken = NULL;
  hrt_js_channel_wake_head(turn, true);
  return NULL;
}

// Calls setImmediate(resume) unless it is scheduled. False when it cannot
// (the call threw: a terminating worker); the exception is dropped.
static bool hrt_js_channel_schedule(napi_env env, hrt_js_channel_turn_t* turn) {
  if (turn->scheduled) return true;
  napi_value set_immediate = NULL, resume = NULL, global = NULL, ignored = NULL;
  if (napi_get_reference_value(env, turn->set_immediate, &set_immediate) !=
          napi_ok ||
      set_immediate == NULL) {
    return false;
  }
  if (turn->resume == NULL) {
    if (napi_create_function(env, "resumeChannels", NAPI_AUTO_LENGTH,
                             hrt_js_channel_resume, NULL, &resume) != napi_ok ||
        napi_create_reference(env, resume, 1, &turn->resume) != napi_ok) {
      hrt_js_take_pending(env);
      return false;
    }
  } else if (napi_get_reference_value(env, turn->resume, &resume) != napi_ok) {
    return false;
  }
  if (napi_get_global(env, &global) != napi_ok ||
      napi_call_function(env, global, set_immediate, 1, &resume, &ignored) !=
          napi_ok) {
    hrt_js_take_pending(env);
    return false;
  }
  turn->scheduled = true;
  return true;
}

// `channel` (its drain due) waits for a later turn: on the turn list, at the
// end unless it is on it already (then it keeps its place). False when no
// turn can be waited for (no hook, or setImmediate failed): the caller goes
// on draining.
static bool hrt_js_channel_wait_for_turn(napi_env env,
                                         hrt_js_channel_turn_t* turn,
                                         hrt_js_channel_t* channel) {
  if (turn->set_immediate == NULL || !hrt_js_channel_schedule(env, turn)) {
    return false;
  }
  if (turn->woken == channel) turn->woken = NULL;
  if (channel->waiting) return true;
  hrt_js_channel_retain(channel);
  channel->waiting = true;
  HRT_LIST_APPEND(turn->waiting_head, turn->waiting_tail, channel,
                  next_waiting);
  return true;
}

// After a drain: while budget is left, the next channel on the turn list
// may drain in this turn too; once it is spent, a later turn wakes it.
static void hrt_js_channel_turn_next(napi_env env,
                                     hrt_js_channel_turn_t* turn) {
  if (turn->waiting_head == NULL || turn->woken != NULL) return;
  if (turn->spent_ns < HRT_JS_CHANNEL_TURN_BUDGET_NS) {
    hrt_js_channel_wake_head(turn, false);
  } else if (!hrt_js_channel_schedule(env, turn)) {
    hrt_js_channel_wake_head(turn, true);  // no turn to wait for
  }
}

// The first queued message, taken off the FIFO; with `settles_only` only if
// it is one. NULL when there is none.
static hrt_js_message_t* hrt_js_channel_pop(hrt_js_channel_t* channel,
                                            bool settles_only) {
  hrt_mutex_lock(&channel->mutex);
  hrt_js_message_t* message = channel->head;
  if (message != NULL && (!settles_only || message->settles_only)) {
    channel->head = message->next;
    if (channel->head == NULL) channel->tail = NULL;
    message->next = NULL;
  } else {
    message = NULL;
  }
  hrt_mutex_unlock(&channel->mutex);
  return message;
}

// Delivers the first queued message (and, when it settles_only, the
// settles_only messages behind it that fit the budget: completion batching)
// and, while more are queued, asks for the next call through the threadsafe
// function, so that the reactions of the promises settled run (Node runs
// the microtasks after each call) before the next message is delivered.
// Node makes that call at once, in the same turn, so once the turn's budget
// is spent the channel, its drain still due, waits for the next turn
// instead. A finishing channel releases its threadsafe function once empty.
static void hrt_js_channel_drain(napi_env env, hrt_js_channel_t* channel) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  hrt_js_channel_turn_t* turn = state != NULL ? &state->turn : NULL;
  if (channel->queued_ns != 0) {
    int64_t reactions = hrt_time_now_ns() - channel->queued_ns;
    channel->reaction_ns = reactions / channel->queued_count;
    if (turn != NULL) turn->spent_ns += reactions;
  }
  channel->queued_ns = 0;
  if (turn != NULL && turn->spent_ns >= HRT_JS_CHANNEL_TURN_BUDGET_NS &&
      !channel->granted && hrt_js_channel_wait_for_turn(env, turn, channel)) {
    return;
  }
  channel->granted = false;
  // Its turn came (it was woken as the list's head). The drain's caller
  // holds the threadsafe function's reference.
  if (channel->waiting && turn != NULL) {
    hrt_js_channel_turn_remove(turn, channel);
  }
  uint32_t delivered = 0;
  hrt_js_message_t* message = hrt_js_channel_pop(channel, false);
  if (message != NULL) {
    int64_t start = hrt_time_now_ns();
    int64_t time_left = hrt_js_channel_time_left_ns(env);
    bool batch = message->settles_only;
    message->deliver(env, channel, message);
    delivered = 1;
    while (batch && delivered < HRT_JS_CHANNEL_MAX_BATCH &&
           channel->reaction_ns >= 0 &&
           hrt_time_now_ns() - start +
                   (int64_t)(delivered + 1) * channel->reaction_ns <
               time_left &&
           (message = hrt_js_channel_pop(channel, true)) != NULL) {
      message->deliver(env, channel, message);
      ++delivered;
    }
    if (turn != NULL) turn->spent_ns += hrt_time_now_ns() - start;
    if (channel->deferred) {
      channel->deferred = false;
      // Unless no turn can be waited for: then it is delivered again now.
      if (turn != NULL && hrt_js_channel_wait_for_turn(env, turn, channel)) {
        hrt_js_channel_turn_next(env, turn);
        return;
      }
    }
  }
  napi_threadsafe_function released = NULL;
  hrt_mutex_lock(&channel->mutex);
  if (channel->head != NULL) {
    // The drain is still due, so `tsfn` is not released; the call fails
    // only when the env is going away, which frees the queue.
    if (channel->tsfn != NULL) {
      napi_call_threadsafe_function(channel->tsfn, NULL, napi_tsfn_nonblocking);
      channel->queued_ns = hrt_time_now_ns();
      channel->queued_count = delivered > 0 ? delivered : 1;
    }
  } else {
    channel->due = false;
    channel->reaction_ns = -1;  // the next burst measures its own
    if (channel->finishing) {
      released = channel->tsfn;
      channel->tsfn = NULL;
    }
  }
  hrt_mutex_unlock(&channel->mutex);
  if (released != NULL) {
    napi_release_threadsafe_function(released, napi_tsfn_release);
  }
  if (turn != NULL) hrt_js_channel_turn_next(env, turn);
}

void hrt_js_channel_defer(hrt_js_channel_t* channel,
                          hrt_js_message_t* message) {
  hrt_mutex_lock(&channel->mutex);
  message->next = channel->head;
  channel->head = message;
  if (channel->tail == NULL) channel->tail = message;
  hrt_mutex_unlock(&channel->mutex);
  channel->deferred = true;
}

int64_t hrt_js_channel_time_left_ns(napi_env env) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL || state->turn.set_immediate == NULL) return INT64_MAX;
  return HRT_JS_CHANNEL_TURN_BUDGET_NS - state->turn.spent_ns;
}

void hrt_js_channel_turn_deinit(napi_env env, hrt_js_channel_turn_t* turn) {
  while (turn->waiting_head != NULL) {
    hrt_js_channel_turn_remove(turn, turn->waiting_head);
  }
  if (turn->set_immediate != NULL) {
    napi_delete_reference(env, turn->set_immediate);
  }
  turn->set_immediate = NULL;
  if (turn->resume != NULL) napi_delete_reference(env, turn->resume);
  turn->resume = NULL;
}

//===----------------------------------------------------------------------===//
// The threadsafe function
//===----------------------------------------------------------------------===//

// JS thread: a wake-up. With env == NULL (teardown) `context` may already be
// freed and is not touched: the finalizer frees what is queued.
static void hrt_js_channel_call_js(napi_env env, napi_value js_callback,
                                   void* context, void* data) {
  (void)js_callback;
  (void)data;
  if (env == NULL) return;
  hrt_js_channel_drain(env, (hrt_js_channel_t*)context);
}

// JS thread, once, when the threadsafe function is done (released after the
// FIFO drained, or env teardown). What is still queued (teardown only) is
// freed natively after on_finalize.
static void hrt_js_channel_tsfn_finalize(napi_env env, void* finalize_data,
                                         void* finalize_hint) {
  (void)finalize_hint;
  hrt_js_channel_t* channel = (hrt_js_channel_t*)finalize_data;
  hrt_mutex_lock(&channel->mutex);
  channel->tsfn = NULL;
  hrt_js_message_t* message = channel->head;
  channel->head = NULL;
  channel->tail = NULL;
  hrt_mutex_unlock(&channel->mutex);
  if (channel->on_finalize != NULL) {
    channel->on_finalize(env, channel->finalize_data);
  }
  while (message != NULL) {
    hrt_js_message_t* next = message->next;
    message->deliver(NULL, NULL, message);
    message = next;
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
  channel->reaction_ns = -1;

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
  message->next = NULL;
  hrt_mutex_lock(&channel->mutex);
  if (channel->tsfn != NULL && !channel->finishing) {
    // One wake-up per drain: while one is due, the message just joins the
    // FIFO that drain will deliver.
    posted = channel->due ||
             napi_call_threadsafe_function(channel->tsfn, NULL,
                                           napi_tsfn_nonblocking) == napi_ok;
  }
  if (posted) {
    channel->due = true;
    HRT_LIST_APPEND(channel->head, channel->tail, message, next);
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

void hrt_js_channel_close(hrt_js_channel_t* channel) {
  // Abort: nothing queued is delivered to JavaScript any more; the finalizer
  // still runs (dropping the tsfn's reference) and frees queued messages
  // natively.
  hrt_mutex_lock(&channel->mutex);
  napi_threadsafe_function tsfn = channel->tsfn;
  channel->tsfn = NULL;
  channel->finishing = true;
  hrt_mutex_unlock(&channel->mutex);
  if (tsfn != NULL) napi_release_threadsafe_function(tsfn, napi_tsfn_abort);
  hrt_js_channel_release(channel);
}

void hrt_js_channel_finish(hrt_js_channel_t* channel) {
  // While a drain is due it releases the threadsafe function once the FIFO
  // is empty; otherwise (nothing queued) it is released now.
  hrt_mutex_lock(&channel->mutex);
  channel->finishing = true;
  napi_threadsafe_function tsfn = NULL;
  if (!channel->due) {
    tsfn = channel->tsfn;
    channel->tsfn = NULL;
  }
  hrt_mutex_unlock(&channel->mutex);
  if (tsfn != NULL) napi_release_threadsafe_function(tsfn, napi_tsfn_release);
  hrt_js_channel_release(channel);
}
