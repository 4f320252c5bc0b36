/*
 * Counts the calls to memcmp and bcmp with a length of zero, and where they come from.
 *
 * Preloaded into a hookscope process by benches/empty-memcmp.sh. Rust compares empty slices
 * through memcmp/bcmp with a dangling pointer, and glibc's AVX-512 variants read such an operand
 * with a masked load whose fault suppression costs ~75 ns (docs/benchmarks.md, session 31). A
 * zero-length call returns 0 here without reading memory; every other call goes to the C
 * library. At exit the counts and the return addresses (relative to the executable) are written
 * to $EMPTY_MEMCMP_OUT.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 4096

static uintptr_t sites[SLOTS];
static unsigned long hits[SLOTS];
static unsigned long calls, empty;
static int (*real_memcmp)(const void *, const void *, size_t);
static int (*real_bcmp)(const void *, const void *, size_t);

static void record(uintptr_t site) {
    unsigned start = (unsigned)((site >> 2) % SLOTS);
    for (unsigned i = 0; i < SLOTS; i++) {
        unsigned j = (start + i) % SLOTS;
        uintptr_t seen = __atomic_load_n(&sites[j], __ATOMIC_ACQUIRE);
        if (seen == 0) {
            uintptr_t expected = 0;
            if (!__atomic_compare_exchange_n(&sites[j], &expected, site, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                seen = expected;
            else
                seen = site;
        }
        if (seen == site) {
            __atomic_add_fetch(&hits[j], 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

#define COUNTED(name, real)                                                        \
    int name(const void *a, const void *b, size_t n) {                             \
        __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);                           \
        if (n == 0) {                                                              \
            __atomic_add_fetch(&empty, 1, __ATOMIC_RELAXED);                       \
            record((uintptr_t)__builtin_return_address(0));                        \
            return 0;                                                              \
        }                                                                          \
        if (!real)                                                                 \
            real = (int (*)(const void *, const void *, size_t))dlsym(RTLD_NEXT, #name); \
        return real(a, b, n);                                                      \
    }

COUNTED(memcmp, real_memcmp)
COUNTED(bcmp, real_bcmp)

static int executable_base(struct dl_phdr_info *info, size_t size, void *base) {
    (void)size;
    if (info->dlpi_name[0] == '\0') {
        *(uintptr_t *)base = info->dlpi_addr;
        return 1;
    }
    return 0;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("EMPTY_MEMCMP_OUT");
    FILE *out = fopen(path ? path : "empty-memcmp.out", "w");
    if (!out)
        return;
    uintptr_t base = 0;
    dl_iterate_phdr(executable_base, &base);
    fprintf(out, "calls %lu empty %lu\n", calls, empty);
    for (unsigned i = 0; i < SLOTS; i++)
        if (sites[i])
            fprintf(out, "%lu %lx\n", hits[i], (unsigned long)(sites[i] - base));
    fclose(out);
}
