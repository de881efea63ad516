// =============================================================================================
// ==[1.2] base: RNG ==
// Philox4x32-10 (Salmon et al., SC'11). Block i of stream `seed` is philox(key = seed,
// counter = i); each block gives four 32-bit words. The state is (seed, counter in words).

// One Philox4x32-10 block: the 128-bit counter ctr[0..3] under the 64-bit key (k0, k1) -> four
// 32-bit words. kernels/00_common.cu's fat5_philox4x32 is the same function on the device.
static void fat5__philox4x32(uint32_t k0, uint32_t k1, const uint32_t ctr[4], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    int r;
    for (r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// the block of key key64 at counter (ctr64, 0): the stream of fat5_rng and of sampling
static void fat5__philox(uint64_t key64, uint64_t ctr64, uint32_t out[4]) {
    uint32_t c[4];
    c[0] = (uint32_t)ctr64, c[1] = (uint32_t)(ctr64 >> 32), c[2] = 0, c[3] = 0;
    fat5__philox4x32((uint32_t)key64, (uint32_t)(key64 >> 32), c, out);
}

FAT5_API fat5_rng fat5_rng_init(uint64_t seed) {
    fat5_rng r;
    r.seed = seed;
    r.counter = 0;
    return r;
}
FAT5_API uint32_t fat5_rng_u32(fat5_rng *r) {
    uint32_t b[4];
    fat5__philox(r->seed, r->counter >> 2, b);
    return b[r->counter++ & 3];
}
FAT5_API uint64_t fat5_rng_u64(fat5_rng *r) {
    uint64_t hi = fat5_rng_u32(r);
    return (hi << 32) | fat5_rng_u32(r);
}
FAT5_API double fat5_rng_uniform(fat5_rng *r) {
    return (double)(fat5_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}
FAT5_API uint64_t fat5_rng_below(fat5_rng *r, uint64_t n) {
    uint64_t lim, x;
    if (n <= 1) return 0;
    lim = UINT64_MAX - UINT64_MAX % n;  // reject the top partial range
    do x = fat5_rng_u64(r); while (x >= lim);
    return x % n;
}
FAT5_API double fat5_rng_normal(fat5_rng *r) {
    // Box-Muller; one draw per call keeps the state a pure counter
    double u1 = 1.0 - fat5_rng_uniform(r), u2 = fat5_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
FAT5_API void fat5_rng_to_string(const fat5_rng *r, char buf[48]) {
    snprintf(buf, 48, "%llu:%llu", (unsigned long long)r->seed, (unsigned long long)r->counter);
}
static int fat5__parse_u64(const char *s, size_t n, uint64_t *out) {
    uint64_t v = 0;
    size_t i;
    if (n == 0 || n > 20) return 0;
    for (i = 0; i < n; i++) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9') return 0;
        d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (n > 1 && s[0] == '0') return 0;
    *out = v;
    return 1;
}
FAT5_API fat5_status fat5_rng_from_string(const char *s, fat5_rng *out) {
    const char *colon = s ? strchr(s, ':') : NULL;
    fat5_rng r;
    if (!colon || !fat5__parse_u64(s, (size_t)(colon - s), &r.seed) ||
        !fat5__parse_u64(colon + 1, strlen(colon + 1), &r.counter))
        return FAT5_ERR_FORMAT;
    *out = r;
    return FAT5_OK;
}

// ---- dropout masks ----
// A dropout mask is a pure function of (seed, stream, index), so that a backward regenerates the
// masks of its forward instead of storing them, and the CPU and the GPU drop the same elements:
//   draw(seed, stream, index) = the 16-bit lane l = index & 7 of the Philox4x32-10 block with key
//       seed and counter (index >> 3: low word, high word; stream: low word, high word); lane l is
//       bits 16 (l & 1) .. 16 (l & 1) + 15 of word l >> 1. Eight consecutive indices share a block.
//   keep(seed, stream, index) = draw >= thresh, thresh = round(p 65536), at most 65535.
// The rate applied is p rounded to a multiple of 2^-16: an element is kept with probability exactly
// 1 - thresh / 65536 (p = 0.1: thresh 6554, kept with probability 0.899993896484375), and a kept
// element is multiplied by scale = 65536 / (65536 - thresh) rounded to fp32 (1/(1-p) of the rounded
// p), so that the expectation is kept. A rate below 2^-17 rounds to thresh 0: no dropout.
// kernels/00_common.cu's fat5_drop_block / fat5_drop_lane are the same function on the device
// (tests/test_dropout.c compares the two bit for bit, and Philox against its published vectors).
// index: the element's position in a layout of the model's that no backend changes: at an
// elementwise site, the flat index t C + c in its row-major [rows, C] buffer; for the attention
// probabilities, query row i and key row j of the packed batch (keys: the k buffer's rows),
// index = i << 32 | j, with head h in the stream (stream + h: the model leaves the stream's low
// 12 bits to the heads).
typedef struct fat5__drop {
    uint64_t seed;     // the Philox key
    uint64_t stream;   // which mask: the model's code of (forward, stack, layer, site)
    uint32_t thresh;   // an element whose draw is below it is dropped; 0: no dropout at all
    float scale;       // a kept element is multiplied by it: 65536 / (65536 - thresh)
} fat5__drop;

// no dropout: what every op gets outside a training forward with dropout on
static fat5__drop fat5__drop_none(void) {
    fat5__drop d;
    memset(&d, 0, sizeof d);
    d.scale = 1.0f;
    return d;
}

// The dropout of rate p (0 <= p < 1) for (seed, stream): thresh and scale as above
static fat5__drop fat5__drop_make(uint64_t seed, uint64_t stream, double p) {
    fat5__drop d = fat5__drop_none();
    double t = floor(p * 65536.0 + 0.5);
    d.seed = seed;
    d.stream = stream;
    d.thresh = !(t > 0) ? 0u : t >= 65535.0 ? 65535u : (uint32_t)t;
    d.scale = d.thresh ? (float)(65536.0 / (double)(65536u - d.thresh)) : 1.0f;
    return d;
}

// The eight 16-bit draws of block blk (indices 8 blk .. 8 blk + 7), lane l in out[l]
static void fat5__drop_block(uint64_t seed, uint64_t stream, uint64_t blk, uint32_t out[8]) {
    uint32_t c[4], w[4];
    int l;
    c[0] = (uint32_t)blk, c[1] = (uint32_t)(blk >> 32), c[2] = (uint32_t)stream, c[3] = (uint32_t)(stream >> 32);
    fat5__philox4x32((uint32_t)seed, (uint32_t)(seed >> 32), c, w);
    for (l = 0; l < 8; l++) out[l] = (w[l >> 1] >> (16 * (l & 1))) & 0xFFFFu;
}

// draw(seed, stream, index): the 16-bit value compared with thresh
static FAT5__UNUSED uint32_t fat5__drop_draw(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t d[8];
    fat5__drop_block(seed, stream, index >> 3, d);
    return d[index & 7];
}

// The multipliers of indices 8 blk .. 8 blk + 7 under d (d->thresh > 0): scale where kept, else 0
static void fat5__drop_mul8(const fat5__drop *d, uint64_t blk, float m[8]) {
    uint32_t r[8];
    int l;
    fat5__drop_block(d->seed, d->stream, blk, r);
    for (l = 0; l < 8; l++) m[l] = r[l] >= d->thresh ? d->scale : 0.0f;
}

// The multiplier of one index, through a cursor that keeps the last block's (a loop over
// neighbouring indices draws each block once). Start a cursor with fat5__drop_cursor_init.
typedef struct fat5__drop_cursor {
    uint64_t blk;
    int valid;
    float m[8];
} fat5__drop_cursor;
static void fat5__drop_cursor_init(fat5__drop_cursor *c) { c->valid = 0; c->blk = 0; }
static float fat5__drop_at(const fat5__drop *d, fat5__drop_cursor *c, uint64_t index) {
    if (!c->valid || c->blk != index >> 3) {
        c->blk = index >> 3;
        c->valid = 1;
        fat5__drop_mul8(d, c->blk, c->m);
    }
    return c->m[index & 7];
}

// ---- 128-bit hash (two independent 64-bit lanes: FNV-1a and a multiply-xorshift): the kernel
// cache's keys, the ranks' settings -------------------------------------------------------------

typedef struct fat5__h128 { uint64_t a, b; } fat5__h128;

static void fat5__h128_init(fat5__h128 *h) {
    h->a = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
    h->b = 0x6a09e667f3bcc909ULL;
}
static void fat5__h128_bytes(fat5__h128 *h, const void *data, size_t n) {
    const unsigned char *p = FAT5__CAST(const unsigned char *, data);
    uint64_t a = h->a, b = h->b;
    size_t i;
    for (i = 0; i < n; i++) {
        a = (a ^ p[i]) * 0x100000001b3ULL;                // FNV-1a 64
        b = (b + p[i] + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
        b ^= b >> 31;
    }
    h->a = a;
    h->b = b;
}
// a length-prefixed field, so that ("ab","c") and ("a","bc") differ
static void fat5__h128_field(fat5__h128 *h, const void *data, size_t n) {
    unsigned char len[8];
    int i;
    for (i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    fat5__h128_bytes(h, len, 8);
    fat5__h128_bytes(h, data, n);
}
static uint64_t fat5__h128_mix(uint64_t x) {  // murmur3 fmix64
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
static fat5__h128 fat5__h128_final(const fat5__h128 *h) {
    fat5__h128 r;
    r.a = fat5__h128_mix(h->a);
    r.b = fat5__h128_mix(h->b ^ (h->a >> 1));
    return r;
}
static fat5__h128 fat5__h128_of(const void *data, size_t n) {
    fat5__h128 h;
    fat5__h128_init(&h);
    fat5__h128_field(&h, data, n);
    return fat5__h128_final(&h);
}

