/* strset.c: open addressing with linear probing, kept at most half full (strset.h). */
#include "io/strset.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t hash(uint64_t seed, const char *s) { /* FNV-1a from a seeded basis */
  uint64_t h = 14695981039346656037u ^ seed;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return (size_t)(h ^ h >> 32);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t probe(const ms_strset *set, const char *const *keys, const char *key) {
  size_t mask = set->cap - 1, at = hash(set->seed, key) & mask;
  while (set->slots[at] && strcmp(keys[set->slots[at] - 1], key) != 0) at = (at + 1) & mask;
  return at;
}

/* Addresses (randomised by ASLR) and the time, mixed (splitmix64's finaliser). */
static uint64_t new_seed(const void *p) {
  uint64_t z = (uint64_t)(uintptr_t)p ^ (uint64_t)(uintptr_t)&new_seed ^ (uint64_t)time(NULL) << 32;
  z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9u;
  z = (z ^ z >> 27) * 0x94d049bb133111ebu;
  return z ^ z >> 31;
}

static int grow(ms_strset *set, const char *const *keys) {
  size_t cap = set->cap ? set->cap * 2 : 16;
  ms_strset bigger = {calloc(cap, sizeof *bigger.slots), cap, set->count, set->cap ? set->seed : new_seed(set)};
  if (!bigger.slots) return -1;
  for (size_t i = 0; i < set->cap; i++)
    if (set->slots[i]) bigger.slots[probe(&bigger, keys, keys[set->slots[i] - 1])] = set->slots[i];
  free(set->slots);
  *set = bigger;
  return 0;
}

int64_t strset_add(ms_strset *set, const char *const *keys, uint32_t i) {
  if ((set->count + 1) * 2 > set->cap && grow(set, keys) != 0) return -2;
  size_t at = probe(set, keys, keys[i]);
  if (set->slots[at]) return (int64_t)set->slots[at] - 1;
  set->slots[at] = i + 1;
  set->count++;
  return -1;
}

int64_t strset_find(const ms_strset *set, const char *const *keys, const char *key) {
  if (!set->cap) return -1;
  size_t at = probe(set, keys, key);
  return set->slots[at] ? (int64_t)set->slots[at] - 1 : -1;
}

void strset_free(ms_strset *set) {
  free(set->slots);
  *set = (ms_strset){0};
}
