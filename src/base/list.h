// Intrusive singly linked FIFO lists: a head, a tail and a `link` member in
// each item. The caller guards the list (these touch no lock).
#ifndef HRT_BASE_LIST_H_
#define HRT_BASE_LIST_H_

#include <stddef.h>

// Appends `item` to the list (`head`, `tail`), its `link` member cleared.
#define HRT_LIST_APPEND(head, tail, item, link) \
  do {                                          \
    (item)->link = NULL;                        \
    if ((tail) != NULL) {                       \
      (tail)->link = (item);                    \
    } else {                                    \
      (head) = (item);                          \
    }                                           \
    (tail) = (item);                            \
  } while (0)

#endif  // HRT_BASE_LIST_H_
