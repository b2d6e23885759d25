#include "base/copy.h"

#include <stdint.h>
#include <string.h>

void hrt_copy(void* dst, const void* src, size_t length, bool streaming) {
  if (streaming) {
    hrt_copy_streaming(dst, src, length);
  } else if (length) {
    memcpy(dst, src, length);
  }
}

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>

void hrt_copy_streaming(void* dst, const void* src, size_t length) {
  if (length < HRT_COPY_STREAMING_MIN_BYTES) {
    memcpy(dst, src, length);
    return;
  }
  char* d = dst;
  const char* s = src;
  // Ordinary stores up to the first 64-byte boundary of the destination,
  // then whole lines, then the tail.
  size_t head = (size_t)(-(uintptr_t)d & 63);
  memcpy(d, s, head);
  d += head;
  s += head;
  length -= head;
  for (; length >= 64; length -= 64, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)s);
    __m128i b = _mm_loadu_si128((const __m128i*)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i*)(s + 48));
    _mm_stream_si128((__m128i*)d, a);
    _mm_stream_si128((__m128i*)(d + 16), b);
    _mm_stream_si128((__m128i*)(d + 32), c);
    _mm_stream_si128((__m128i*)(d + 48), e);
  }
  memcpy(d, s, length);
  // Streaming stores are weakly ordered: fence them before whoever
  // synchronizes with this thread reads the destination.
  _mm_sfence();
}

#else

void hrt_copy_streaming(void* dst, const void* src, size_t length) {
  memcpy(dst, src, length);
}

#endif
