/* strset.c: open addressing with linear probing, kept at most half full (strset.h). */
#include "io/strset.h"

#include <stdlib.h>
#include <string.h>

static size_t hash(const char *s) { /* FNV-1a */
  uint64_t h = 14695981039346656037u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return (size_t)h;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t probe(const ms_strset *set, const char *const *keys, const char *key) {
  size_t mask = set->cap - 1, at = hash(key) & mask;
  while (set->slots[at] && strcmp(keys[set->slots[at] - 1], key) != 0) at = (at + 1) & mask;
  return at;
}

static int grow(ms_strset *set, const char *const *keys) {
  size_t cap = set->cap ? set->cap * 2 : 16;
  ms_strset bigger = {calloc(cap, sizeof *bigger.slots), cap, set->count};
  if (!bigger.slots) return -1;
  for (size_t i = 0; i < set->cap; i++)
    if (set->slots[i]) bigger.slots[probe(&bigger, keys, keys[set->slots[i] - 1])] = set->slots[i];
  free(set->slots);
  *set = bigger;
  return 0;
}

int64_t ms_strset_add(ms_strset *set, const char *const *keys, uint32_t i) {
  if ((set->count + 1) * 2 > set->cap && grow(set, keys) != 0) return -2;
  size_t at = probe(set, keys, keys[i]);
  if (set->slots[at]) return (int64_t)set->slots[at] - 1;
  set->slots[at] = i + 1;
  set->count++;
  return -1;
}

int64_t ms_strset_find(const ms_strset *set, const char *const *keys, const char *key) {
  if (!set->cap) return -1;
  size_t at = probe(set, keys, key);
  return set->slots[at] ? (int64_t)set->slots[at] - 1 : -1;
}

void ms_strset_free(ms_strset *set) {
  free(set->slots);
  *set = (ms_strset){0};
}
