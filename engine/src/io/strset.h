/* strset.h (private): a hash set of strings held by the caller, for finding duplicate names in
 * files in linear time. The set stores indices into the caller's array of strings (4 bytes a
 * slot), so a header's million keys cost a few MB; the caller passes that array to every call
 * (it may move between calls, as it grows). */
#ifndef MS_IO_STRSET_H
#define MS_IO_STRSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct ms_strset {
  uint32_t *slots; /* index + 1 of a string, 0 for empty */
  size_t cap, count;
  uint64_t seed; /* of the hash, unguessable: a header crafted to collide cannot make it quadratic */
} ms_strset;

/* Adds keys[i]. Returns -1 when it was added, the index j of an earlier keys[j] equal to it
 * (then it is not added), or -2 when out of memory. */
int64_t strset_add(ms_strset *set, const char *const *keys, uint32_t i);
/* The index of the string equal to key, or -1. */
int64_t strset_find(const ms_strset *set, const char *const *keys, const char *key);
void strset_free(ms_strset *set);

#endif
