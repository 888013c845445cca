/* wire.h -- the byte-level pieces of the trace format shared by the
 * in-process writer (src/agent/writer.c) and the reader (src/format/read.c):
 * constants, LEB128 varints, the block checksum. docs/format.md is the
 * specification; this file must agree with it.
 *
 * Header-only, allocation-free, async-signal-safe. */
#ifndef HT_FORMAT_WIRE_H
#define HT_FORMAT_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* File header: 8-byte magic, u32 version, u32 flags (all little-endian). */
#define HT_FILE_MAGIC      "HTRACE\r\n"
#define HT_FILE_HEADER_LEN 16
#define HT_FORMAT_VERSION  3      /* written; readers also read 1 and 2 */

/* Block header: u32 magic, u32 codec, u32 stored_len, u32 raw_len,
 * u32 payload_check, u32 header_check; then stored_len payload bytes. */
#define HT_BLOCK_MAGIC      0x4b425448u      /* "HTBK" */
#define HT_BLOCK_HEADER_LEN 24
#define HT_CODEC_STORED     0
#define HT_CODEC_ZSTD       1
#define HT_BLOCK_MAX_RAW    (16u << 20)      /* readers reject larger blocks */
#define HT_BLOCK_MAX_RATIO  64u              /* raw_len <= 64 * stored_len + 4096 */

/* Record types (u8) inside a block's decoded payload; each record is
 * type, varint body length, body. Unknown types are skipped. */
enum {
    HT_REC_PROCESS = 1,
    HT_REC_MODULE = 2,
    HT_REC_MODULE_UNLOAD = 3,
    HT_REC_NODES = 4,
    HT_REC_SNAP_BEGIN = 5,
    HT_REC_SITES = 6,
    HT_REC_SNAP_END = 7,
    HT_REC_DROPS = 8,
    HT_REC_END = 9,
    HT_REC_JIT = 10,
    HT_REC_JIT_NODE = 11,
    HT_REC_REACH = 12,
    HT_REC_PEAK = 13,
    HT_REC_TEMP = 14,
    HT_REC_POSSIBLE = 15,
    HT_REC_SITE_DELTA = 16,     /* version 2: sites as changes to the last snapshot's */
    HT_REC_PEAK_DELTA = 17      /* version 2: figures at the peak, likewise */
};

/* REACH's trailing flags (after its entries; absent in older files) */
#define HT_REACH_F_CUSTOM 1u      /* custom allocator blocks were judged too */

static inline void ht_wr_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t ht_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Unsigned LEB128; at most 10 bytes. Returns the bytes written. */
static inline size_t ht_put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Decodes a varint from [*pp, end). Returns 0 on success and advances *pp;
 * -1 if the input ends first or the value has more than 64 bits. */
static inline int ht_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && (b & 0x7e))
            return -1;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The block checksum: a 64-bit multiply-xorshift over 8-byte words,
 * folded to 32 bits. Detects damage, not tampering. */
static inline uint32_t ht_checksum(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0x243f6a8885a308d3ull ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        __builtin_memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < len; i++)
        w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w ^ 0x5bd1e995u) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

#endif
