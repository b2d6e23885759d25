// The block scheduler of the CUDA model (cuda_model.h): a block's threads
// are fibers on the launching thread, switched at barriers.
//
// A fiber is entered the first time through its ucontext and afterwards
// with the compiler's __builtin_setjmp/__builtin_longjmp, which save no
// signal mask (swapcontext makes a system call per switch) and which no
// sanitizer intercepts. Each fiber's entry loops: it runs one
// kernel thread, then hands itself back to the scheduler for the next.
// The switches are announced to AddressSanitizer and ThreadSanitizer,
// which otherwise lose track of the stacks.
//
// Under ThreadSanitizer the model is also a race detector. Fibers switch
// without synchronising, so that it sees a block's threads as CUDA orders
// them: by barriers (each arriving thread releases the barrier's clock,
// each released one acquires it; two clocks take turns, so that a thread
// still to resume from one barrier does not acquire what a faster one did
// before the next) and by the block's start and end (the
// launching thread releases the start clock, which each kernel thread
// acquires when it starts; each releases the end clock when it ends, which
// the launching thread acquires after the block). Memory two threads of a
// block touch between barriers, one of them writing, is a data race
// report, whatever order the fibers ran in. The model's own bookkeeping (HRT_MODEL_UNCHECKED) is not
// instrumented: it is ordered by the switches, which ThreadSanitizer is
// told not to see as synchronisation.
//
// Threads: each host thread has its own fibers (made on its first launch,
// freed when it exits); nothing is shared between host threads.
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "cuda_model.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define HRT_MODEL_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define HRT_MODEL_TSAN 1
#define HRT_MODEL_UNCHECKED __attribute__((no_sanitize_thread))
#else
#define HRT_MODEL_UNCHECKED
#endif

namespace hrt_model {

thread_local uint3 block_index;
thread_local dim3 grid_dim;
thread_local dim3 block_dim;

namespace {

// Kernel threads run small frames; a guard page below each stack turns an
// overflow into a fault rather than a corrupted neighbour.
constexpr size_t kStackBytes = 128 * 1024;

enum class fiber_state { ready, waiting, done };

// A __builtin_setjmp buffer: five words.
typedef void* jump_buffer[5];

struct fiber {
  jump_buffer context;  // where it stopped, once started
  ucontext_t start;   // its entry, while `fresh`
  char* memory;       // guard page, then the stack
  bool fresh;         // enter through `start` next time
  fiber_state state;
  uint3 index;        // its thread in the block
  const char* file;   // the barrier it waits at
  int line;
  void* asan_fake_stack;
  void* tsan_fiber;
};

struct worker {
  fiber** fibers;  // each its own allocation: a fiber's frames point at it
  uint32_t count;
  fiber* current;  // running, or null on the scheduler
  jump_buffer scheduler;
  void* asan_fake_stack;
  const void* scheduler_bottom;
  size_t scheduler_size;
  void* tsan_scheduler;
  void (*body)(void*);
  void* args;
  // ThreadSanitizer's synchronisation objects (see the top); barriers
  // counts the barriers released, whose parity picks the barrier clock.
  char start_clock, barrier_clocks[2], end_clock;
  uint64_t barriers;
};

// The happens-before edges of CUDA's ordering, for ThreadSanitizer.
HRT_MODEL_UNCHECKED void release(char* clock) {
#ifdef HRT_MODEL_TSAN
  __tsan_release(clock);
#else
  (void)clock;
#endif
}

HRT_MODEL_UNCHECKED void acquire(char* clock) {
#ifdef HRT_MODEL_TSAN
  __tsan_acquire(clock);
#else
  (void)clock;
#endif
}

thread_local worker* t_worker;
pthread_key_t g_worker_key;
pthread_once_t g_worker_once = PTHREAD_ONCE_INIT;

size_t page_bytes() { return (size_t)sysconf(_SC_PAGESIZE); }

char* stack_of(const fiber* f) { return f->memory + page_bytes(); }

// Resumes the context saved in `buffer` (never from the function that
// saved it, as __builtin_longjmp requires). Neither it nor its callers may
// look like a call that never returns, which AddressSanitizer precedes by
// unpoisoning the whole stack (15 times the cost of a switch): it is
// uninstrumented, and returns when `buffer` is null. ThreadSanitizer would
// count an entry into it that is never left. The frames a jump leaves are
// resumed later, not abandoned.
__attribute__((noinline, no_sanitize_address, no_sanitize_thread)) void jump(
    jump_buffer buffer) {
  if (buffer) __builtin_longjmp(buffer, 1);
}

HRT_MODEL_UNCHECKED void arrived(worker* w, fiber* self) {
#ifdef HRT_MODEL_ASAN
  __sanitizer_finish_switch_fiber(self->asan_fake_stack, &w->scheduler_bottom,
                                  &w->scheduler_size);
#else
  (void)w;
  (void)self;
#endif
}

// Suspends `self` and resumes the scheduler; returns when resumed.
HRT_MODEL_UNCHECKED void to_scheduler(worker* w, fiber* self) {
  if (__builtin_setjmp(self->context) == 0) {
#ifdef HRT_MODEL_ASAN
    __sanitizer_start_switch_fiber(&self->asan_fake_stack, w->scheduler_bottom,
                                   w->scheduler_size);
#endif
#ifdef HRT_MODEL_TSAN
    __tsan_switch_to_fiber(w->tsan_scheduler, __tsan_switch_to_fiber_no_sync);
#endif
    jump(w->scheduler);
  }
  arrived(w, self);
}

HRT_MODEL_UNCHECKED void fiber_entry() {
  worker* w = t_worker;
  fiber* self = w->current;
  arrived(w, self);
  for (;;) {
    acquire(&w->start_clock);
    w->body(w->args);
    release(&w->end_clock);
    self->state = fiber_state::done;
    to_scheduler(w, self);
  }
}

// Runs `f` until it waits at a barrier or its kernel thread ends.
HRT_MODEL_UNCHECKED void resume(worker* w, fiber* f) {
  w->current = f;
  if (__builtin_setjmp(w->scheduler) == 0) {
#ifdef HRT_MODEL_ASAN
    __sanitizer_start_switch_fiber(&w->asan_fake_stack, stack_of(f),
                                   kStackBytes);
#endif
#ifdef HRT_MODEL_TSAN
    __tsan_switch_to_fiber(f->tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
    if (f->fresh) {
      f->fresh = false;
      setcontext(&f->start);
    }
    jump(f->context);
  }
#ifdef HRT_MODEL_ASAN
  __sanitizer_finish_switch_fiber(w->asan_fake_stack, nullptr, nullptr);
#endif
  w->current = nullptr;
}

// (Re)makes `f`'s entry: a fiber left waiting at a barrier by a failed
// launch starts over, its old frames dropped.
bool make_fresh(fiber* f) {
#ifdef HRT_MODEL_ASAN
  __asan_unpoison_memory_region(stack_of(f), kStackBytes);
#endif
#ifdef HRT_MODEL_TSAN
  if (f->tsan_fiber) __tsan_destroy_fiber(f->tsan_fiber);
  f->tsan_fiber = __tsan_create_fiber(0);
#endif
  if (getcontext(&f->start) != 0) return false;
  f->start.uc_stack.ss_sp = stack_of(f);
  f->start.uc_stack.ss_size = kStackBytes;
  f->start.uc_link = nullptr;
  makecontext(&f->start, fiber_entry, 0);
  f->fresh = true;
  f->asan_fake_stack = nullptr;
  return true;
}

void free_worker(void* p) {
  worker* w = static_cast<worker*>(p);
  for (uint32_t i = 0; i < w->count; ++i) {
    fiber* f = w->fibers[i];
#ifdef HRT_MODEL_ASAN
    __asan_unpoison_memory_region(stack_of(f), kStackBytes);
#endif
#ifdef HRT_MODEL_TSAN
    __tsan_destroy_fiber(f->tsan_fiber);
#endif
    munmap(f->memory, page_bytes() + kStackBytes);
    free(f);
  }
  free(w->fibers);
  free(w);
  t_worker = nullptr;
}

void make_worker_key() { pthread_key_create(&g_worker_key, free_worker); }

// This thread's worker with at least `threads` fibers, or null.
worker* worker_for(uint32_t threads) {
  worker* w = t_worker;
  if (!w) {
    pthread_once(&g_worker_once, make_worker_key);
    w = static_cast<worker*>(calloc(1, sizeof(worker)));
    if (!w) return nullptr;
#ifdef HRT_MODEL_TSAN
    w->tsan_scheduler = __tsan_get_current_fiber();
#endif
    pthread_setspecific(g_worker_key, w);
    t_worker = w;
  }
  if (w->count >= threads) return w;
  fiber** grown =
      static_cast<fiber**>(realloc(w->fibers, threads * sizeof(fiber*)));
  if (!grown) return nullptr;
  w->fibers = grown;
  for (; w->count < threads; ++w->count) {
    fiber* f = static_cast<fiber*>(calloc(1, sizeof(fiber)));
    void* memory = f ? mmap(nullptr, page_bytes() + kStackBytes,
                            PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                     : MAP_FAILED;
    if (memory == MAP_FAILED) {
      free(f);
      return nullptr;
    }
    f->memory = static_cast<char*>(memory);
    if (mprotect(f->memory, page_bytes(), PROT_NONE) != 0 || !make_fresh(f)) {
      munmap(f->memory, page_bytes() + kStackBytes);
      free(f);
      return nullptr;
    }
    w->fibers[w->count] = f;
  }
  return w;
}

void describe_thread(const fiber* f, char* out, size_t size) {
  snprintf(out, size, "thread (%u,%u,%u)", f->index.x, f->index.y, f->index.z);
}

// After a round: 0 when the block ended or its barrier may release, else
// -1 with `message` naming the threads that part ways.
HRT_MODEL_UNCHECKED int check_barrier(fiber* const* fibers, uint32_t threads, uint64_t barrier,
                  bool* ended, char* message, size_t size) {
  const fiber* waiting = nullptr;
  const fiber* done = nullptr;
  const fiber* elsewhere = nullptr;
  for (uint32_t t = 0; t < threads; ++t) {
    const fiber* f = fibers[t];
    if (f->state == fiber_state::done) {
      if (!done) done = f;
    } else if (!waiting) {
      waiting = f;
    } else if (!elsewhere &&
               (f->line != waiting->line || strcmp(f->file, waiting->file))) {
      elsewhere = f;
    }
  }
  *ended = !waiting;
  if (!waiting || (!done && !elsewhere)) return 0;
  char a[48], b[48];
  describe_thread(waiting, a, sizeof(a));
  describe_thread(done ? done : elsewhere, b, sizeof(b));
  const int n = snprintf(
      message, size,
      "block (%u,%u,%u): barrier divergence at the block's barrier %llu: %s "
      "waits at %s:%d while %s ",
      block_index.x, block_index.y, block_index.z,
      (unsigned long long)barrier + 1, a, waiting->file, waiting->line, b);
  if (n >= 0 && (size_t)n < size) {
    if (done) {
      snprintf(message + n, size - n, "has returned");
    } else {
      snprintf(message + n, size - n, "waits at %s:%d", elsewhere->file,
               elsewhere->line);
    }
  }
  return -1;
}

HRT_MODEL_UNCHECKED int run_block(worker* w, uint32_t threads, char* message,
                                  size_t size) {
  const dim3 b = block_dim;
  release(&w->start_clock);
  for (uint32_t t = 0; t < threads; ++t) {
    fiber* f = w->fibers[t];
    f->index = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
    f->state = fiber_state::ready;
  }
  // Blocks alternate which order they start in, so that across a grid
  // every stretch between barriers runs in both orders.
  const uint32_t parity =
      (block_index.x + block_index.y + block_index.z) % 2;
  for (uint64_t barrier = 0;; ++barrier) {
    const bool forward = (barrier + parity) % 2 == 0;
    for (uint32_t i = 0; i < threads; ++i) {
      fiber* f = w->fibers[forward ? i : threads - 1 - i];
      if (f->state == fiber_state::ready) resume(w, f);
    }
    bool ended = false;
    if (check_barrier(w->fibers, threads, barrier, &ended, message, size)) {
      acquire(&w->barrier_clocks[w->barriers % 2]);
      acquire(&w->end_clock);
      for (uint32_t t = 0; t < threads; ++t) {
        fiber* f = w->fibers[t];
        if (f->state == fiber_state::waiting && !make_fresh(f)) abort();
      }
      return -1;
    }
    if (ended) {
      acquire(&w->end_clock);
      return 0;
    }
    for (uint32_t t = 0; t < threads; ++t) {
      w->fibers[t]->state = fiber_state::ready;
    }
    ++w->barriers;
  }
}

}  // namespace

HRT_MODEL_UNCHECKED uint3 thread_index() {
  const worker* w = t_worker;
  return w && w->current ? w->current->index : uint3{0, 0, 0};
}

HRT_MODEL_UNCHECKED void barrier(const char* file, int line) {
  worker* w = t_worker;
  if (!w || !w->current) return;
  fiber* f = w->current;
  f->file = file;
  f->line = line;
  f->state = fiber_state::waiting;
  char* clock = &w->barrier_clocks[w->barriers % 2];
  release(clock);
  to_scheduler(w, f);
  acquire(clock);
}

int run_grid(const hrt_model_shape_t* shape, void (*body)(void*), void* args,
             char* message, size_t message_size) {
  const uint64_t threads =
      (uint64_t)shape->block[0] * shape->block[1] * shape->block[2];
  worker* w = threads && threads <= UINT32_MAX
                  ? worker_for((uint32_t)threads)
                  : nullptr;
  if (!w) {
    snprintf(message, message_size, "cannot make %llu fibers: %s",
             (unsigned long long)threads, strerror(errno));
    return -1;
  }
  grid_dim = dim3{shape->grid[0], shape->grid[1], shape->grid[2]};
  block_dim = dim3{shape->block[0], shape->block[1], shape->block[2]};
  w->body = body;
  w->args = args;
  for (uint32_t z = 0; z < grid_dim.z; ++z) {
    for (uint32_t y = 0; y < grid_dim.y; ++y) {
      for (uint32_t x = 0; x < grid_dim.x; ++x) {
        block_index = uint3{x, y, z};
        if (run_block(w, (uint32_t)threads, message, message_size) != 0) {
          return -1;
        }
      }
    }
  }
  return 0;
}

}  // namespace hrt_model

extern "C" const hrt_model_kernel_t* hrt_model_find(
    const hrt_model_kernel_t* kernels, size_t count, const char* name) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(kernels[i].name, name) == 0) return &kernels[i];
  }
  return nullptr;
}
