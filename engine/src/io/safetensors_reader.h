/* safetensors_reader.h (private): the reader's state, shared by safetensors_load.c (the file,
 * the data, the API) and safetensors_header.c (the header's JSON, walked and checked). */
#ifndef MS_IO_SAFETENSORS_READER_H
#define MS_IO_SAFETENSORS_READER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "io/strset.h"
#include "moonshard/io.h"

/* One tensor's entry in the header, checked. */
typedef struct entry {
  const char *name; /* in the reader's string block */
  ms_dtype dtype;
  int ndim;
  int64_t shape[MS_MAX_DIMS];
  uint64_t begin, end;
} entry;

typedef struct reader {
  const char *path;
  FILE *f;
  uint64_t file_size, header_len, data_len;
  char *strings; /* every name, metadata key and value, decoded, one after the other */
  size_t strings_used, strings_cap;
  entry *entries;
  char **names; /* entries[i].name, for the hash set and, after a load, the caller */
  int count, cap;
  ms_strset by_name;
  bool has_metadata;
  char **meta_keys, **meta_values;
  int meta_count, meta_cap;
  ms_strset meta_set;
  entry **by_offset; /* the entries sorted by data_offsets, for reading them in file order */
  uint64_t pos;      /* where the next fread starts, so reads in file order need no seek */
} reader;

/* An MS_ERR_IO error "safetensors load '<path>': <message>". */
ms_status st_bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ms_status st_out_of_memory(const reader *r);
/* Walks the header's text (header_len bytes, starting with '{') into r's entries, names and
 * metadata, checking every rule, then checks that the byte ranges tile the data section. */
ms_status st_read_header_json(reader *r, const char *text);

#endif
