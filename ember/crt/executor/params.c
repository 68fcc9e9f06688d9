/*
 * params.c -- check and read the params byte format (see params.h). Little-endian reads are
 * done byte by byte, so the blob may sit at any alignment (in flash, inside a file).
 */
#include "ember/crt/params.h"

#include "../src/backend/internal.h"
#include "ember/crt/executor.h"

static const uint8_t kMagic[8] = {0x89, 'E', 'M', 'B', 'P', 'R', 'M', '\n'};

uint64_t ember_read_le(const uint8_t* p, int nbytes) {
  uint64_t v = 0;
  int k;
  for (k = nbytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

static tvm_crt_error_t bad(const char* problem, size_t offset) {
  ember_crt_error(kTvmErrorExecutorBadArtifact, "params: ");
  ember_crt_error_append(problem);
  ember_crt_error_append(" at byte offset ");
  ember_crt_error_append_u64(offset);
  return kTvmErrorExecutorBadArtifact;
}

/* Bit by bit, no table, so it costs no flash. */
uint32_t ember_crc32(const uint8_t* d, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  size_t i;
  int k;
  for (i = 0; i < n; ++i) {
    c ^= d[i];
    for (k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

/* Bytes of one element of dtype, 0 if ember cannot hold it. */
static uint64_t element_bytes(uint32_t code, uint32_t bits, uint32_t lanes) {
  if (lanes == 0u || code > 6u || code == 3u || code == 5u) return 0;
  if (code == 6u) return bits == 8u ? lanes : 0; /* bool */
  if (bits != 8u && bits != 16u && bits != 32u && bits != 64u) return 0;
  return (uint64_t)(bits / 8u) * lanes;
}

/* Check the record at *pos and move past it. */
static tvm_crt_error_t check_record(const uint8_t* d, size_t size, size_t* pos) {
  size_t p = *pos;
  uint64_t ndim, elem, count = 1, nbytes, k;
  if (size - p < 8u) return bad("truncated data: a record header needs 8 bytes", p);
  elem = element_bytes(d[p], d[p + 1], (uint32_t)ember_read_le(d + p + 2, 2));
  if (elem == 0) return bad("unsupported dtype", p);
  ndim = ember_read_le(d + p + 4, 4);
  if (ndim > EMBER_CRT_MAX_NDIM) return bad("implausible ndim", p + 4);
  p += 8;
  if ((size - p) / 8u < ndim + 1u) return bad("truncated data: the shape and size", p);
  for (k = 0; k < ndim; ++k, p += 8) {
    int64_t dim = (int64_t)ember_read_le(d + p, 8);
    if (dim < 0) return bad("negative dimension", p);
    if (dim != 0 && count > UINT64_MAX / (uint64_t)dim) return bad("shape overflows", p);
    count *= (uint64_t)dim;
  }
  nbytes = ember_read_le(d + p, 8);
  if (count > UINT64_MAX / elem || nbytes != count * elem) {
    return bad("the data size disagrees with the shape and dtype", p);
  }
  p += 8;
  if (nbytes > size - p) return bad("truncated data: the tensor data", p);
  *pos = p + (size_t)nbytes;
  return 0;
}

tvm_crt_error_t ember_params_open(const void* data, size_t size, EmberParams* out) {
  const uint8_t* d = (const uint8_t*)data;
  size_t p = 24;
  uint64_t i, count, flags;
  int k;
  if (d == NULL) return bad("no data (NULL)", 0);
  if (size < 24u) return bad("truncated data: the header needs 24 bytes", 0);
  for (k = 0; k < 8; ++k) {
    if (d[k] != kMagic[k]) return bad("not an ember params blob (bad magic)", 0);
  }
  if (ember_read_le(d + 8, 4) != 1u) {
    return bad("format version not supported (this runtime reads 1)", 8);
  }
  flags = ember_read_le(d + 12, 4);
  if ((flags & ~1u) != 0u) return bad("unknown flags", 12);
  if (flags & 1u) { /* a CRC-32 of everything before it ends the blob: compared last */
    if (size < 28u) return bad("truncated data: the checksum needs 4 bytes", size);
    size -= 4;
  }
  count = ember_read_le(d + 16, 8);
  if (count > (size - p) / 4u) return bad("tensor count does not fit in the data", 16);
  for (i = 0; i < count; ++i) {
    uint64_t len;
    if (size - p < 4u) return bad("truncated data: a name length", p);
    len = ember_read_le(d + p, 4);
    p += 4;
    if (len > size - p) return bad("truncated data: a name", p);
    p += (size_t)len;
  }
  out->records = p;
  for (i = 0; i < count; ++i) {
    tvm_crt_error_t rc = check_record(d, size, &p);
    if (rc != 0) return rc;
  }
  if (p != size) return bad("unexpected trailing bytes", p);
  if ((flags & 1u) && ember_crc32(d, size) != (uint32_t)ember_read_le(d + size, 4)) {
    return bad("checksum mismatch: the data is corrupt", size);
  }
  out->data = d;
  out->size = size;
  out->count = count;
  out->names = 24;
  return 0;
}

int ember_params_next(const EmberParams* params, uint64_t* index, size_t* name_pos,
                      size_t* record_pos, EmberParam* out) {
  const uint8_t* d = params->data;
  size_t p;
  uint32_t k;
  if (*index >= params->count) return 0;
  if (*index == 0) {
    *name_pos = params->names;
    *record_pos = params->records;
  }
  out->name_len = (uint32_t)ember_read_le(d + *name_pos, 4);
  out->name = (const char*)d + *name_pos + 4;
  *name_pos += 4u + out->name_len;
  p = *record_pos;
  out->dtype.code = d[p];
  out->dtype.bits = d[p + 1];
  out->dtype.lanes = (uint16_t)ember_read_le(d + p + 2, 2);
  out->ndim = (uint32_t)ember_read_le(d + p + 4, 4);
  p += 8;
  for (k = 0; k < out->ndim; ++k, p += 8) out->shape[k] = (int64_t)ember_read_le(d + p, 8);
  out->nbytes = ember_read_le(d + p, 8);
  out->data = d + p + 8;
  *record_pos = p + 8 + (size_t)out->nbytes;
  ++*index;
  return 1;
}
