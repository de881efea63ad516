// =============================================================================================
// ==[1.2] base: RNG ==
// Philox4x32-10 (Salmon et al., SC'11). Block i of stream `seed` is philox(key = seed,
// counter = i); each block gives four 32-bit words. The state is (seed, counter in words).

static void fat5__philox(uint64_t key64, uint64_t ctr64, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)ctr64, c1 = (uint32_t)(ctr64 >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key64, k1 = (uint32_t)(key64 >> 32);
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

