
// =============================================================================================
// implementation
// =============================================================================================
#if (defined(FAT5_IMPLEMENTATION) || defined(__INTELLISENSE__)) && !defined(FAT5__IMPL_DONE)
#define FAT5__IMPL_DONE

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <errno.h>
#include <limits.h>
#include <float.h>
#include <time.h>
#ifndef _WIN32
#include <unistd.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <dirent.h>
#endif
#ifndef FAT5_NO_THREADS
#include <pthread.h>
#endif
#if !defined(FAT5_NO_THREADS) && !defined(_WIN32)
#define FAT5__THREADS 1
#include <pthread.h>
#else
#define FAT5__THREADS 0
#endif

#if defined(FAT5_MALLOC) && defined(FAT5_REALLOC) && defined(FAT5_FREE)
#elif !defined(FAT5_MALLOC) && !defined(FAT5_REALLOC) && !defined(FAT5_FREE)
#define FAT5_MALLOC(sz) malloc(sz)
#define FAT5_REALLOC(p, sz) realloc(p, sz)
#define FAT5_FREE(p) free(p)
#else
#error "fat5.h: define all of FAT5_MALLOC, FAT5_REALLOC and FAT5_FREE, or none"
#endif
#ifndef FAT5_ASSERT
#include <assert.h>
#define FAT5_ASSERT(x) assert(x)
#endif

#ifdef __cplusplus
#define FAT5__CAST(T, x) static_cast<T>(x)
#else
#define FAT5__CAST(T, x) ((T)(x))
#endif
#if defined(__GNUC__) || defined(__clang__)
#define FAT5__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define FAT5__UNUSED __attribute__((unused))  // helpers some configurations do not call
#else
#define FAT5__PRINTF(a, b)
#define FAT5__UNUSED
#endif

#ifdef __cplusplus
extern "C" {
#endif

