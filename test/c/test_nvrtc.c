// CUDA source kernels: the kernel cache (src/hal/cuda/cuda_kernel_cache.h),
// NVRTC (src/hal/cuda/cuda_nvrtc.h), and source executables on the CUDA
// device test double. Cases that compile need NVRTC (found as halrt finds
// it); where it is missing they print why and pass without checking.
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal/cuda/cuda_driver.h"
#include "hal/cuda/cuda_includes.h"
#include "hal/cuda/cuda_kernel_cache.h"
#include "hal/cuda/cuda_nvrtc.h"
#include "hal/device.h"
#include "hal/executable.h"
#include "test.h"
#include "test_submit.h"

static int remove_entry(const char* path, const struct stat* info, int type,
                        struct FTW* ftw) {
  (void)info;
  (void)type;
  (void)ftw;
  remove(path);
  return 0;
}

// Removes `path`, a folder of case_folder, with everything in it.
static void remove_folder(void* path) {
  nftw(path, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  free(path);
}

// A fresh folder under /tmp, removed with its contents when the case ends;
// NULL when it cannot be made.
static const char* case_folder(void) {
  char* path = strdup("/tmp/halrt-test-nvrtc-XXXXXX");
  if (path && !mkdtemp(path)) {
    free(path);
    path = NULL;
  }
  if (path) TEST_DEFER(remove_folder, path);
  return path;
}

static int count_files(const char* path) {
  DIR* dir = opendir(path);
  if (!dir) return -1;
  int count = 0;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

static const char* const kOptions[] = {"-DN=4", "--use_fast_math"};
static const char* const kExpressions[] = {"f<int>"};
static const char kCompiler[] =
    "NVRTC 13.0 /lib/libnvrtc.so.13 100 bytes, modified 1.000000000";

// A source that includes nothing.
static const hrt_cuda_includes_t kNoIncludes = {.cacheable = true};

static hrt_status_t make_key(const char* source, const char* target,
                             hrt_cuda_kernel_cache_key_t* key) {
  return hrt_cuda_kernel_cache_key_initialize(
      "k.cu", source, strlen(source), 2, kOptions, 1, kExpressions, kCompiler,
      target, &kNoIncludes, key);
}

// An output as NVRTC would give it: "PTX" text and one lowered name.
static hrt_status_t make_output(const char* text, hrt_nvrtc_output_t** out) {
  const char* lowered[] = {"_Z1fIiEvv"};
  HRT_RETURN_IF_ERROR(
      hrt_nvrtc_output_allocate(false, strlen(text) + 1, 1, lowered, out));
  memcpy((char*)(*out)->image, text, strlen(text) + 1);
  return HRT_OK;
}

static void cache_hit_returns_what_was_stored(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  hrt_nvrtc_output_t* stored = NULL;
  hrt_nvrtc_output_t* loaded = NULL;
  CHECK_OK(make_output(".version 9.0 // A", &stored));
  TEST_DEFER(free, stored);
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK_OK(hrt_cuda_kernel_cache_store(dir, &key, stored));
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK(!loaded->cubin);
  CHECK_EQ_INT(loaded->image_length, stored->image_length);
  CHECK(memcmp(loaded->image, stored->image, stored->image_length) == 0);
  CHECK_EQ_INT(loaded->lowered_count, 1);
  CHECK(strcmp(loaded->lowered_names[0], "_Z1fIiEvv") == 0);
  CHECK_EQ_INT((uintptr_t)loaded->image % 16, 0);
  // Each input of the key makes a different key.
  hrt_cuda_kernel_cache_key_t other;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_80", &other));
  CHECK(other.hash != key.hash);
  hrt_cuda_kernel_cache_key_deinitialize(&other);
  CHECK_OK(make_key("source B", "--gpu-architecture=sm_90", &other));
  CHECK(other.hash != key.hash);
  hrt_cuda_kernel_cache_key_deinitialize(&other);
  // Another build of the same NVRTC version (a patch release).
  CHECK_OK(hrt_cuda_kernel_cache_key_initialize(
      "k.cu", "source A", 8, 2, kOptions, 1, kExpressions,
      "NVRTC 13.0 /lib/libnvrtc.so.13 101 bytes, modified 2.000000000",
      "--gpu-architecture=sm_90", &kNoIncludes, &other));
  CHECK(other.hash != key.hash);
  hrt_cuda_kernel_cache_key_deinitialize(&other);
  CHECK_OK(hrt_cuda_kernel_cache_key_initialize(
      "k.cu", "source A", 8, 1, kOptions, 1, kExpressions, kCompiler,
      "--gpu-architecture=sm_90", &kNoIncludes, &other));
  CHECK(other.hash != key.hash);
  hrt_cuda_kernel_cache_key_deinitialize(&other);
  free(loaded);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

// Two keys that share a hash (a collision) share the file: each misses the
// other's entry, since the full material is compared.
static void cache_key_material_mismatch_is_a_miss(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key, colliding;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  CHECK_OK(make_key("source Z", "--gpu-architecture=sm_90", &colliding));
  colliding.hash = key.hash;
  hrt_nvrtc_output_t* stored = NULL;
  hrt_nvrtc_output_t* loaded = NULL;
  CHECK_OK(make_output(".version 9.0 // A", &stored));
  TEST_DEFER(free, stored);
  CHECK_OK(hrt_cuda_kernel_cache_store(dir, &key, stored));
  CHECK(!hrt_cuda_kernel_cache_load(dir, &colliding, &loaded));
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  free(loaded);
  hrt_cuda_kernel_cache_key_deinitialize(&colliding);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

static bool read_whole(const char* path, char** data, size_t* length) {
  FILE* file = fopen(path, "rb");
  if (!file) return false;
  fseek(file, 0, SEEK_END);
  *length = (size_t)ftell(file);
  fseek(file, 0, SEEK_SET);
  *data = malloc(*length + 1);
  bool ok = *data && fread(*data, 1, *length, file) == *length;
  fclose(file);
  return ok;
}

static bool write_whole(const char* path, const char* data, size_t length) {
  FILE* file = fopen(path, "wb");
  if (!file) return false;
  bool ok = fwrite(data, 1, length, file) == length;
  return fclose(file) == 0 && ok;
}

// Every shorter prefix of an entry, and the entry with any one byte
// flipped, is a miss.
static void cache_truncated_or_corrupt_entry_is_a_miss(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  hrt_nvrtc_output_t* stored = NULL;
  hrt_nvrtc_output_t* loaded = NULL;
  CHECK_OK(make_output(".version 9.0 // A", &stored));
  TEST_DEFER(free, stored);
  CHECK_OK(hrt_cuda_kernel_cache_store(dir, &key, stored));
  char* path = NULL;
  CHECK_OK(hrt_cuda_kernel_cache_entry_path(dir, &key, &path));
  TEST_DEFER(free, path);
  char* whole = NULL;
  size_t length = 0;
  CHECK(read_whole(path, &whole, &length));
  TEST_DEFER(free, whole);
  int hits = 0;
  for (size_t cut = 0; cut < length; ++cut) {
    CHECK(write_whole(path, whole, cut));
    if (hrt_cuda_kernel_cache_load(dir, &key, &loaded)) {
      free(loaded);
      ++hits;
    }
  }
  for (size_t at = 0; at < length; ++at) {
    whole[at] ^= 0x20;
    CHECK(write_whole(path, whole, length));
    whole[at] ^= 0x20;
    if (hrt_cuda_kernel_cache_load(dir, &key, &loaded)) {
      free(loaded);
      ++hits;
    }
  }
  CHECK_EQ_INT(hits, 0);
  // Longer than the entry: a miss too.
  whole[length] = 0;
  CHECK(write_whole(path, whole, length + 1));
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  // The intact bytes hit again.
  CHECK(write_whole(path, whole, length));
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  free(loaded);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

// A store never writes into the entry a reader may have open: the new
// entry is renamed over it, and no temporary file is left behind.
static void cache_store_replaces_entries_atomically(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  hrt_nvrtc_output_t* first = NULL;
  hrt_nvrtc_output_t* second = NULL;
  hrt_nvrtc_output_t* loaded = NULL;
  CHECK_OK(make_output(".version 9.0 // first", &first));
  TEST_DEFER(free, first);
  CHECK_OK(make_output(".version 9.0 // the second, longer", &second));
  TEST_DEFER(free, second);
  CHECK_OK(hrt_cuda_kernel_cache_store(dir, &key, first));
  char* path = NULL;
  CHECK_OK(hrt_cuda_kernel_cache_entry_path(dir, &key, &path));
  TEST_DEFER(free, path);
  char* before = NULL;
  size_t before_length = 0;
  CHECK(read_whole(path, &before, &before_length));
  TEST_DEFER(free, before);
  const int reader = open(path, O_RDONLY);
  CHECK(reader >= 0);
  CHECK_OK(hrt_cuda_kernel_cache_store(dir, &key, second));
  char* seen = malloc(before_length + 64);
  TEST_DEFER(free, seen);
  const ssize_t got = pread(reader, seen, before_length + 64, 0);
  close(reader);
  CHECK_EQ_INT(got, (ssize_t)before_length);
  CHECK(memcmp(seen, before, before_length) == 0);
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK(strcmp(loaded->image, ".version 9.0 // the second, longer") == 0);
  CHECK_EQ_INT(count_files(dir), 1);
  struct stat info;
  CHECK(stat(path, &info) == 0);
  CHECK_EQ_INT(info.st_mode & 0777, 0600);
  free(loaded);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

// Keys are predictable, so an entry is used only when this user wrote it:
// not through a symbolic link, not writable by group or others, not owned
// by another user (checked where the test runs as root and can chown). Nor
// is a FIFO (never opened for long) or a large file that is not an entry.
static void cache_untrusted_entries_are_misses(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  hrt_nvrtc_output_t* stored = NULL;
  hrt_nvrtc_output_t* loaded = NULL;
  CHECK_OK(make_output(".version 9.0 // A", &stored));
  TEST_DEFER(free, stored);
  CHECK_OK(hrt_cuda_kernel_cache_store(dir, &key, stored));
  char* path = NULL;
  CHECK_OK(hrt_cuda_kernel_cache_entry_path(dir, &key, &path));
  TEST_DEFER(free, path);
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  free(loaded);
  CHECK(chmod(path, 0620) == 0);
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK(chmod(path, 0602) == 0);
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK(chmod(path, 0600) == 0);
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  free(loaded);
  if (geteuid() == 0) {
    CHECK(chown(path, 1, 1) == 0);
    CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
    CHECK(chown(path, 0, 0) == 0);
    CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
    free(loaded);
  }
  // The same bytes behind a symbolic link.
  char moved[1200];
  snprintf(moved, sizeof(moved), "%s/elsewhere", dir);
  CHECK(rename(path, moved) == 0);
  CHECK(symlink(moved, path) == 0);
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK(unlink(path) == 0);
  CHECK(unlink(moved) == 0);
  CHECK(mkfifo(path, 0600) == 0);
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  CHECK(unlink(path) == 0);
  CHECK(mkdir(path, 0700) == 0);
  CHECK(!hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  // A store cannot replace a folder; it leaves no temporary file.
  CHECK_STATUS(hrt_cuda_kernel_cache_store(dir, &key, stored),
               HRT_STATUS_UNAVAILABLE, "cannot write kernel cache entry");
  CHECK_EQ_INT(count_files(dir), 1);
  CHECK(rmdir(path) == 0);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

// A write cut short (here by the file size limit, as a full disk would)
// fails, and removes its temporary file.
static void cache_failed_store_leaves_nothing(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  hrt_nvrtc_output_t* big = NULL;
  CHECK_OK(hrt_nvrtc_output_allocate(false, 1 << 20, 0, NULL, &big));
  TEST_DEFER(free, big);
  memset((char*)big->image, 'x', big->image_length);
  struct rlimit saved, limit;
  CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  limit = saved;
  limit.rlim_cur = 4096;
  void (*previous)(int) = signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  hrt_status_t status = hrt_cuda_kernel_cache_store(dir, &key, big);
  CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
  signal(SIGXFSZ, previous);
  CHECK_STATUS(status, HRT_STATUS_UNAVAILABLE,
               "cannot write kernel cache entry");
  CHECK_EQ_INT(count_files(dir), 0);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

// Processes that store the same entry while another reads it: every read is
// a miss or one whole entry, and no temporary file is left.
static void cache_concurrent_writers_in_processes(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  hrt_cuda_kernel_cache_key_t key;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  enum { kWriters = 3, kStores = 40 };
  pid_t writers[kWriters];
  fflush(stdout);  // a child must not print what the parent buffered
  fflush(stderr);
  for (int w = 0; w < kWriters; ++w) {
    writers[w] = fork();
    CHECK(writers[w] >= 0);
    if (writers[w] == 0) {
      char text[64];
      snprintf(text, sizeof(text), ".version 9.0 // writer %d", w);
      hrt_nvrtc_output_t* output = NULL;
      hrt_status_t status = make_output(text, &output);
      for (int i = 0; i < kStores && status == HRT_OK; ++i) {
        status = hrt_cuda_kernel_cache_store(dir, &key, output);
      }
      _exit(status == HRT_OK ? 0 : 1);
    }
  }
  int hits = 0, wrong = 0;
  for (int i = 0; i < 400; ++i) {
    hrt_nvrtc_output_t* loaded = NULL;
    if (!hrt_cuda_kernel_cache_load(dir, &key, &loaded)) continue;
    ++hits;
    wrong += strncmp(loaded->image, ".version 9.0 // writer ", 23) != 0 ||
             loaded->lowered_count != 1;
    free(loaded);
  }
  for (int w = 0; w < kWriters; ++w) {
    int wstatus = 0;
    CHECK(waitpid(writers[w], &wstatus, 0) == writers[w]);
    CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  }
  CHECK_EQ_INT(wrong, 0);
  hrt_nvrtc_output_t* loaded = NULL;
  CHECK(hrt_cuda_kernel_cache_load(dir, &key, &loaded));
  free(loaded);
  CHECK_EQ_INT(count_files(dir), 1);
  (void)hits;
  hrt_cuda_kernel_cache_key_deinitialize(&key);
}

// HALRT_CACHE_DIR, else $XDG_CACHE_HOME/halrt/kernels, else
// $HOME/.cache/halrt/kernels; created with mode 0700. A folder that cannot
// be created is UNAVAILABLE, and a store into it fails without harm.
static void cache_folder_comes_from_the_environment(void) {
  const char* base = case_folder();
  CHECK(base != NULL);
  char expected[256];
  char* directory = NULL;
  struct stat info;
  unsetenv("HALRT_CACHE_DIR");
  setenv("XDG_CACHE_HOME", base, 1);
  CHECK_OK(hrt_cuda_kernel_cache_directory(&directory));
  snprintf(expected, sizeof(expected), "%s/halrt/kernels", base);
  CHECK(strcmp(directory, expected) == 0);
  CHECK(stat(directory, &info) == 0 && S_ISDIR(info.st_mode));
  CHECK_EQ_INT(info.st_mode & 0777, 0700);
  free(directory);
  setenv("XDG_CACHE_HOME", "", 1);
  setenv("HOME", base, 1);
  CHECK_OK(hrt_cuda_kernel_cache_directory(&directory));
  snprintf(expected, sizeof(expected), "%s/.cache/halrt/kernels", base);
  CHECK(strcmp(directory, expected) == 0);
  free(directory);
  snprintf(expected, sizeof(expected), "%s/own", base);
  setenv("HALRT_CACHE_DIR", expected, 1);
  CHECK_OK(hrt_cuda_kernel_cache_directory(&directory));
  CHECK(strcmp(directory, expected) == 0);
  free(directory);
  // Under a regular file nothing can be created.
  setenv("HALRT_CACHE_DIR", "/dev/null/halrt", 1);
  CHECK_STATUS(hrt_cuda_kernel_cache_directory(&directory),
               HRT_STATUS_UNAVAILABLE,
               "cannot create kernel cache folder '/dev/null/halrt': ");
  hrt_cuda_kernel_cache_key_t key;
  hrt_nvrtc_output_t* output = NULL;
  CHECK_OK(make_key("source A", "--gpu-architecture=sm_90", &key));
  CHECK_OK(make_output(".version 9.0", &output));
  CHECK_STATUS(hrt_cuda_kernel_cache_store("/dev/null/halrt", &key, output),
               HRT_STATUS_UNAVAILABLE, "cannot write kernel cache entry");
  free(output);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
  unsetenv("HALRT_CACHE_DIR");
}

// NVRTC as halrt loads it, or NULL after printing why not.
static const hrt_nvrtc_t* nvrtc_or_skip(void) {
  const hrt_nvrtc_t* nvrtc = NULL;
  hrt_status_t status = hrt_nvrtc_load(&nvrtc);
  if (status != HRT_OK) {
    printf("skipped (no NVRTC: %s)\n", hrt_status_message(status));
    hrt_status_free(status);
    return NULL;
  }
  return nvrtc;
}

// Threads that load NVRTC at once (the first load of this process: this
// case runs before any other loads it) and compile and cache concurrently,
// into one folder: each gets the one table and its own whole output.
typedef struct nvrtc_thread_s {
  const char* dir;
  int index;
  const hrt_nvrtc_t* nvrtc;
  hrt_status_t status;
  bool hit;
} nvrtc_thread_t;

static void* nvrtc_thread_main(void* argument) {
  nvrtc_thread_t* thread = argument;
  hrt_status_t status = hrt_nvrtc_load(&thread->nvrtc);
  hrt_nvrtc_target_t target;
  if (status == HRT_OK) {
    status = hrt_nvrtc_pick_target(thread->nvrtc, 9, 0, &target);
  }
  char source[128];
  snprintf(source, sizeof(source),
           "extern \"C\" __global__ void k%d(int* o) { *o = %d; }\n",
           thread->index % 2, thread->index % 2);
  hrt_nvrtc_output_t* output = NULL;
  hrt_nvrtc_output_t* loaded = NULL;
  hrt_cuda_kernel_cache_key_t key = {NULL, 0, 0};
  if (status == HRT_OK) {
    status = hrt_nvrtc_compile(thread->nvrtc, source, "k.cu", 0, NULL, 0, NULL,
                               &target, &output);
  }
  if (status == HRT_OK) {
    status = hrt_cuda_kernel_cache_key_initialize(
        "k.cu", source, strlen(source), 0, NULL, 0, NULL,
        thread->nvrtc->identity, target.option, &kNoIncludes, &key);
  }
  if (status == HRT_OK) {
    status = hrt_cuda_kernel_cache_store(thread->dir, &key, output);
  }
  if (status == HRT_OK) {
    thread->hit =
        hrt_cuda_kernel_cache_load(thread->dir, &key, &loaded) &&
        loaded->image_length == output->image_length &&
        memcmp(loaded->image, output->image, output->image_length) == 0;
  }
  free(loaded);
  free(output);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
  thread->status = status;
  return NULL;
}

static void nvrtc_loads_and_compiles_on_many_threads(void) {
  const char* dir = case_folder();
  CHECK(dir != NULL);
  enum { kThreads = 4 };
  pthread_t threads[kThreads];
  nvrtc_thread_t state[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    state[i] = (nvrtc_thread_t){dir, i, NULL, HRT_OK, false};
    CHECK(pthread_create(&threads[i], NULL, nvrtc_thread_main, &state[i]) == 0);
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  const hrt_nvrtc_t* nvrtc = nvrtc_or_skip();
  for (int i = 0; i < kThreads; ++i) {
    if (!nvrtc) {
      hrt_status_free(state[i].status);
      continue;
    }
    CHECK_OK(state[i].status);
    CHECK(state[i].nvrtc == nvrtc);
    CHECK(state[i].hit);
  }
  if (nvrtc) CHECK_EQ_INT(count_files(dir), 2);
}

static void nvrtc_targets_the_device_architecture(void) {
  const hrt_nvrtc_t* nvrtc = nvrtc_or_skip();
  if (!nvrtc) return;
  CHECK(nvrtc->version_major >= 11);
  hrt_nvrtc_target_t target;
  if (nvrtc->arch_count == 0) {
    CHECK_OK(hrt_nvrtc_pick_target(nvrtc, 9, 0, &target));
    CHECK(strcmp(target.option, "--gpu-architecture=compute_90") == 0);
    return;
  }
  // A listed architecture: a cubin for it (where NVRTC makes cubins).
  const int listed = nvrtc->archs[nvrtc->arch_count - 1];
  char expected[64];
  CHECK_OK(hrt_nvrtc_pick_target(nvrtc, (uint32_t)listed / 10,
                                 (uint32_t)listed % 10, &target));
  CHECK(target.cubin == (nvrtc->nvrtcGetCUBIN != NULL));
  snprintf(expected, sizeof(expected), "--gpu-architecture=%s_%d",
           target.cubin ? "sm" : "compute", listed);
  CHECK(strcmp(target.option, expected) == 0);
  // A device newer than anything listed: PTX for the newest listed.
  CHECK_OK(hrt_nvrtc_pick_target(nvrtc, 99, 9, &target));
  CHECK(!target.cubin);
  snprintf(expected, sizeof(expected), "--gpu-architecture=compute_%d", listed);
  CHECK(strcmp(target.option, expected) == 0);
  // Older than everything listed.
  if (nvrtc->archs[0] > 10) {
    CHECK_STATUS(hrt_nvrtc_pick_target(nvrtc, 1, 0, &target),
                 HRT_STATUS_FAILED_PRECONDITION,
                 "cannot compile for compute capability 1.0");
  }
}

static void nvrtc_rejects_architecture_options(void) {
  const char* const ok[] = {"-DARCH=1", "--use_fast_math", "-architecture"};
  CHECK_OK(hrt_nvrtc_check_options(3, ok));
  const char* const bad[] = {"-DX", "--gpu-architecture=sm_80"};
  CHECK_STATUS(hrt_nvrtc_check_options(2, bad), HRT_STATUS_INVALID_ARGUMENT,
               "options[1] '--gpu-architecture=sm_80'");
  const char* const bad_short[] = {"-arch=compute_80"};
  CHECK_STATUS(hrt_nvrtc_check_options(1, bad_short),
               HRT_STATUS_INVALID_ARGUMENT, "options[0] '-arch=compute_80'");
  const char* const bad_spaced[] = {"--gpu-architecture sm_80"};
  CHECK_STATUS(hrt_nvrtc_check_options(1, bad_spaced),
               HRT_STATUS_INVALID_ARGUMENT,
               "options[0] '--gpu-architecture sm_80'");
  const char* const bad_split[] = {"-arch", "sm_80"};
  CHECK_STATUS(hrt_nvrtc_check_options(2, bad_split),
               HRT_STATUS_INVALID_ARGUMENT, "options[0] '-arch'");
}

static void nvrtc_compile_lowers_names_and_reports_errors(void) {
  const hrt_nvrtc_t* nvrtc = nvrtc_or_skip();
  if (!nvrtc) return;
  hrt_nvrtc_target_t target;
  CHECK_OK(hrt_nvrtc_pick_target(nvrtc, 9, 0, &target));
  const char* source =
      "template <typename T> __global__ void fill(T* out) { *out = N; }\n";
  const char* options[] = {"-DN=7"};
  const char* expressions[] = {"fill<float>", "fill<int>"};
  const uint64_t compiles = hrt_nvrtc_compile_count();
  hrt_nvrtc_output_t* output = NULL;
  CHECK_OK(hrt_nvrtc_compile(nvrtc, source, "fill.cu", 1, options, 2,
                             expressions, &target, &output));
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 1);
  CHECK_EQ_INT(output->lowered_count, 2);
  CHECK(strcmp(output->lowered_names[0], "_Z4fillIfEvPT_") == 0);
  CHECK(strcmp(output->lowered_names[1], "_Z4fillIiEvPT_") == 0);
  CHECK(output->image_length > 4);
  if (target.cubin) {
    CHECK(memcmp(output->image,
                 "\x7f"
                 "ELF",
                 4) == 0);
  } else {
    CHECK(strstr(output->image, ".version") != NULL);
  }
  free(output);
  // Without -DN the source does not compile: the log names the line.
  CHECK_STATUS(
      hrt_nvrtc_compile(nvrtc,
                        "// line 1\n\n"
                        "int x = N;\n",
                        "broken.cu", 0, NULL, 0, NULL, &target, &output),
      HRT_STATUS_INVALID_ARGUMENT, "broken.cu(3): error");
  CHECK_STATUS(hrt_nvrtc_compile(nvrtc, "int x = N;\n", "broken.cu", 0, NULL, 0,
                                 NULL, &target, &output),
               HRT_STATUS_INVALID_ARGUMENT, "compiling broken.cu with NVRTC");
  CHECK_STATUS(
      hrt_nvrtc_compile(nvrtc, source, "fill.cu", 1, options, 1,
                        (const char* const[]){"nofill<int>"}, &target, &output),
      HRT_STATUS_INVALID_ARGUMENT, "identifier \"nofill\" is undefined");
}

// The loaded NVRTC says which file it is, so that the cache tells apart
// builds of one version.
static void nvrtc_identity_names_the_loaded_file(void) {
  const hrt_nvrtc_t* nvrtc = nvrtc_or_skip();
  if (!nvrtc) return;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "NVRTC %d.%d /", nvrtc->version_major,
           nvrtc->version_minor);
  CHECK(strncmp(nvrtc->identity, prefix, strlen(prefix)) == 0);
  CHECK(strstr(nvrtc->identity, "libnvrtc") != NULL);
  CHECK(strstr(nvrtc->identity, " bytes, modified ") != NULL);
  CHECK(strstr(nvrtc->identity, " 0 bytes") == NULL);
}

// Options that expect a value ("-I dir") at the end of the user's list do
// not take the target option as their value; options asking NVRTC for
// other output than PTX or a cubin are a clear error.
static void nvrtc_options_cannot_displace_the_target(void) {
  const hrt_nvrtc_t* nvrtc = nvrtc_or_skip();
  if (!nvrtc) return;
  const char* source = "extern \"C\" __global__ void k(int* o) { *o = 1; }\n";
  const hrt_nvrtc_target_t ptx = {"--gpu-architecture=compute_90", false};
  const char* const trailing[][1] = {{"-I"}, {"--include-path"}};
  hrt_nvrtc_output_t* output = NULL;
  for (int i = 0; i < 2; ++i) {
    CHECK_OK(hrt_nvrtc_compile(nvrtc, source, "k.cu", 1, trailing[i], 0, NULL,
                               &ptx, &output));
    CHECK(strstr(output->image, ".target sm_90") != NULL);
    free(output);
  }
  hrt_nvrtc_target_t target;
  CHECK_OK(hrt_nvrtc_pick_target(nvrtc, 9, 0, &target));
  CHECK_OK(hrt_nvrtc_compile(nvrtc, source, "k.cu", 1, trailing[0], 0, NULL,
                             &target, &output));
  CHECK(output->image_length > 4);
  free(output);
  const char* const lto[] = {"-dlto"};
  CHECK_STATUS(
      hrt_nvrtc_compile(nvrtc, source, "k.cu", 1, lto, 0, NULL, &ptx, &output),
      HRT_STATUS_INVALID_ARGUMENT, "NVRTC made no PTX");
  if (target.cubin) {
    CHECK_STATUS(hrt_nvrtc_compile(nvrtc, source, "k.cu", 1, lto, 0, NULL,
                                   &target, &output),
                 HRT_STATUS_INVALID_ARGUMENT, "NVRTC made no cubin");
  }
}

// A long log is cut at a line end, with a note saying so; its first error
// is kept. A long source name never cuts the log or the note.
static void nvrtc_long_compile_log_is_cut_visibly(void) {
  const hrt_nvrtc_t* nvrtc = nvrtc_or_skip();
  if (!nvrtc) return;
  hrt_nvrtc_target_t target;
  CHECK_OK(hrt_nvrtc_pick_target(nvrtc, 9, 0, &target));
  char source[4096] = "";
  for (int i = 0; i < 60; ++i) {
    char line[64];
    snprintf(line, sizeof(line), "int v%d = undefined_%d;\n", i, i);
    strcat(source, line);
  }
  hrt_nvrtc_output_t* output = NULL;
  hrt_status_t status = hrt_nvrtc_compile(nvrtc, source, "long.cu", 0, NULL, 0,
                                          NULL, &target, &output);
  CHECK_EQ_INT(hrt_status_code(status), HRT_STATUS_INVALID_ARGUMENT);
  const char* message = hrt_status_message(status);
  const bool first = strstr(message, "long.cu(1): error") != NULL;
  const char* cut = strstr(message, "\n[log cut: the first ");
  const bool marked = cut && strstr(cut, " bytes]") && cut[-1] == '\n';
  const size_t length = strlen(message);
  hrt_status_free(status);
  CHECK(first);
  CHECK(marked);
  CHECK(length < 900);
  char name[1500];
  memset(name, 'n', sizeof(name) - 4);
  strcpy(name + sizeof(name) - 4, ".cu");
  status = hrt_nvrtc_compile(nvrtc, source, name, 0, NULL, 0, NULL, &target,
                             &output);
  message = hrt_status_message(status);
  const bool named = strstr(message, name) != NULL;
  const bool still_marked = strstr(message, " bytes]") != NULL &&
                            strstr(message, "\n[log cut: the first ") != NULL;
  hrt_status_free(status);
  CHECK(named);
  CHECK(still_marked);
}

// The CUDA device test double (HRT_TEST_FAKECUDA, or libfakecuda.so beside
// this binary), released when the case ends; or NULL after printing why
// not.
static hrt_hal_device_t* fake_device_or_skip(void) {
  char fake[1100];
  const char* path = getenv("HRT_TEST_FAKECUDA");
  if (!path) {
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return NULL;
    self[n] = 0;
    *strrchr(self, '/') = 0;
    snprintf(fake, sizeof(fake), "%s/libfakecuda.so", self);
    path = fake;
  }
  setenv("HALRT_CUDA_LIBRARY", path, 1);
  hrt_hal_device_t* device = NULL;
  hrt_status_t status = case_device("cuda", &device);
  if (status != HRT_OK) {
    printf("skipped (no CUDA test double: %s)\n", hrt_status_message(status));
    hrt_status_free(status);
    return NULL;
  }
  return device;
}

static hrt_status_t create_source(hrt_hal_device_t* device, const char* text,
                                  uint32_t option_count,
                                  const char* const* options,
                                  hrt_hal_executable_t** out) {
  static const hrt_hal_entry_decl_t decls[] = {
      {"iota", "write_index_u32<unsigned int>", false, 0, NULL},
  };
  const hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = text,
      .data_length = strlen(text),
      .source_name = "iota.cu",
      .option_count = option_count,
      .options = options,
      .entry_decl_count = 1,
      .entry_decls = decls,
  };
  return hrt_hal_device_create_executable(device, &params, out);
}

// The second load of the same source compiles nothing; a changed option is
// a new compile, and so is a corrupt entry (which is then rewritten).
static void source_executables_compile_once(void) {
  if (!nvrtc_or_skip()) return;
  hrt_hal_device_t* device = fake_device_or_skip();
  if (!device) return;
  const char* dir = case_folder();
  CHECK(dir != NULL);
  setenv("HALRT_CACHE_DIR", dir, 1);
  const char* source =
      "template <typename T> __global__ void write_index_u32(T* out, "
      "unsigned n) {\n"
      "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) out[i] = (T)(i * SCALE);\n"
      "}\n";
  const char* one[] = {"-DSCALE=1"};
  const char* two[] = {"-DSCALE=2"};
  hrt_hal_executable_t* executable = NULL;
  const uint64_t compiles = hrt_nvrtc_compile_count();
  CHECK_OK(create_source(device, source, 1, one, &executable));
  CHECK_EQ_INT(executable->entry_count, 1);
  CHECK(strcmp(executable->entries[0].name, "iota") == 0);
  CHECK_EQ_INT(executable->entries[0].binding_count, 1);
  CHECK_EQ_INT(executable->entries[0].constant_count, 1);
  hrt_hal_executable_release(executable);
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 1);
  CHECK_EQ_INT(count_files(dir), 1);
  CHECK_OK(create_source(device, source, 1, one, &executable));
  hrt_hal_executable_release(executable);
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 1);
  CHECK_OK(create_source(device, source, 1, two, &executable));
  hrt_hal_executable_release(executable);
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 2);
  CHECK_EQ_INT(count_files(dir), 2);
  // Corrupt every entry: each load compiles again and rewrites its entry.
  DIR* folder = opendir(dir);
  struct dirent* entry;
  char path[1200];
  while ((entry = readdir(folder)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
    CHECK(truncate(path, 100) == 0);
  }
  closedir(folder);
  CHECK_OK(create_source(device, source, 1, one, &executable));
  hrt_hal_executable_release(executable);
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 3);
  CHECK_OK(create_source(device, source, 1, one, &executable));
  hrt_hal_executable_release(executable);
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 3);
  // A folder that cannot be made: compiled each time, and it works.
  setenv("HALRT_CACHE_DIR", "/dev/null/halrt", 1);
  CHECK_OK(create_source(device, source, 1, one, &executable));
  hrt_hal_executable_release(executable);
  CHECK_OK(create_source(device, source, 1, one, &executable));
  hrt_hal_executable_release(executable);
  CHECK_EQ_INT(hrt_nvrtc_compile_count(), compiles + 5);
  unsetenv("HALRT_CACHE_DIR");
  every_object_is_destroyed();
}

// NVRTC would stop at a NUL in the source and compile only what is before
// it: a source with one is refused, naming where.
static void source_with_a_nul_byte_is_refused(void) {
  if (!nvrtc_or_skip()) return;
  hrt_hal_device_t* device = fake_device_or_skip();
  if (!device) return;
  static const char text[] =
      "extern \"C\" __global__ void k(int* o) { *o = 1; }\n\0garbage";
  const hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = text,
      .data_length = sizeof(text) - 1,
      .source_name = "nul.cu",
  };
  hrt_hal_executable_t* executable = NULL;
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT,
               "CUDA source nul.cu has a NUL byte at offset 49");
  every_object_is_destroyed();
}

static void write_text(const char* folder, const char* name,
                       const char* text) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", folder, name);
  FILE* file = fopen(path, "w");
  if (file) {
    fputs(text, file);
    fclose(file);
  }
}

// The include scan finds what NVRTC would read: next to the including file
// (for a file source), then the -I folders; each file once, cycles too.
static void includes_are_found_as_nvrtc_finds_them(void) {
  const char* folder = case_folder();
  const char* other = case_folder();
  CHECK(folder != NULL && other != NULL);
  write_text(folder, "a.h", "#pragma once\n  #  include \"b.h\"\n");
  write_text(folder, "b.h", "#include \"a.h\" // a cycle\n");
  write_text(other, "c.h", "// from -I\n");
  write_text(other, "b.h", "#error the includer's folder comes first\n");
  char source_path[128];
  snprintf(source_path, sizeof(source_path), "%s/k.cu", folder);
  const char* source =
      "#include \"a.h\"\n#include <c.h>\n#include <cuda_fp16.h>\n"
      "// #include \"commented.h\"\n";
  char option[80];
  snprintf(option, sizeof(option), "-I%s", other);
  const char* options[] = {"-DX=1", option};
  hrt_cuda_includes_t* includes = NULL;
  CHECK_OK(hrt_cuda_includes_find(source, source_path, 2, options, &includes));
  if (includes) {
    CHECK(includes->cacheable);
    CHECK_EQ_INT(includes->count, 3);
    const char* ends[] = {"/a.h", "/b.h", "/c.h"};
    for (uint32_t i = 0; i < includes->count && i < 3; ++i) {
      const char* path = includes->files[i].path;
      CHECK(strcmp(path + strlen(path) - 4, ends[i]) == 0);
      CHECK(strncmp(path, i < 2 ? folder : other, strlen(folder)) == 0);
    }
    hrt_cuda_includes_free(includes);
  }
  // Inline text: no includer folder, so "a.h" is looked up in -I only.
  CHECK_OK(hrt_cuda_includes_find(source, NULL, 2, options, &includes));
  if (includes) {
    CHECK(includes->cacheable);
    CHECK_EQ_INT(includes->count, 1);
    hrt_cuda_includes_free(includes);
  }
  // What the scan cannot follow makes the source uncacheable.
  const char* unfollowable[] = {"#include HEADER\n", "#include_next <c.h>\n"};
  for (int i = 0; i < 2; ++i) {
    CHECK_OK(hrt_cuda_includes_find(unfollowable[i], source_path, 2, options,
                                    &includes));
    if (includes) CHECK(!includes->cacheable);
    hrt_cuda_includes_free(includes);
  }
  const char* pre_include[] = {"-include", "a.h"};
  CHECK_OK(hrt_cuda_includes_find("", source_path, 2, pre_include, &includes));
  if (includes) CHECK(!includes->cacheable);
  hrt_cuda_includes_free(includes);
}

TEST_MAIN(TEST_CASE(cache_hit_returns_what_was_stored),
          TEST_CASE(cache_key_material_mismatch_is_a_miss),
          TEST_CASE(cache_truncated_or_corrupt_entry_is_a_miss),
          TEST_CASE(cache_store_replaces_entries_atomically),
          TEST_CASE(cache_untrusted_entries_are_misses),
          TEST_CASE(cache_failed_store_leaves_nothing),
          TEST_CASE(cache_concurrent_writers_in_processes),
          TEST_CASE(cache_folder_comes_from_the_environment),
          TEST_CASE(nvrtc_loads_and_compiles_on_many_threads),
          TEST_CASE(nvrtc_targets_the_device_architecture),
          TEST_CASE(nvrtc_rejects_architecture_options),
          TEST_CASE(nvrtc_compile_lowers_names_and_reports_errors),
          TEST_CASE(nvrtc_identity_names_the_loaded_file),
          TEST_CASE(nvrtc_options_cannot_displace_the_target),
          TEST_CASE(nvrtc_long_compile_log_is_cut_visibly),
          TEST_CASE(source_executables_compile_once),
          TEST_CASE(source_with_a_nul_byte_is_refused),
          TEST_CASE(includes_are_found_as_nvrtc_finds_them))
