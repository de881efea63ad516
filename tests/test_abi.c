// test_abi.c — checks fat5.h's mirrors of the CUDA driver, NVRTC and cuBLAS declarations against
// the real headers. Built only where the toolkit headers exist:
//     cc -std=c99 -I/usr/local/cuda/include tests/test_abi.c -ldl && ./a.out
// Compile-time checks (a mismatch does not compile):
//   - every mirrored constant equals the header's (negative array size otherwise);
//   - every mirrored type has the header type's size;
//   - every entry point fat5 loads is assigned, as the header declares it, to a variable of fat5's
//     function-pointer type (miniaudio style), with incompatible pointer types made an error, so
//     the whole prototype is checked — through the header's renaming macros, so cuMemAlloc is
//     checked as the cuMemAlloc_v2 it stands for.
// Run-time checks: the symbol name fat5 passes to dlsym equals the name the header maps the API to
// (two-level stringification of the macro), and, where a library can be opened here, it exports it.
// Prints one line per group and "abi: N constants, M prototypes checked"; returns 0 when all pass.

// fat5's opaque handle tags become the vendor's, so that handle parameters compare exactly (the
// tags carry no ABI: all are pointers to incomplete structs).
#define fat5__CUctx_st CUctx_st
#define fat5__CUmod_st CUmod_st
#define fat5__CUfunc_st CUfunc_st
#define fat5__CUstream_st CUstream_st
#define fat5__CUgraph_st CUgraph_st
#define fat5__CUgraphExec_st CUgraphExec_st
#define fat5__CUevent_st CUevent_st
#define fat5__nvrtcProgram_st _nvrtcProgram
#define fat5__cublasContext cublasContext
#define fat5__cublasLtContext cublasLtContext
#define fat5__ncclComm ncclComm

#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"  // the vendor headers use C11 anonymous unions
#endif
#include <cuda.h>
#include <nvrtc.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#ifdef FAT5_ABI_NCCL   // the Makefile defines it where nccl.h is installed
#include <nccl.h>
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#endif
#if defined(__clang__)
#pragma clang diagnostic error "-Wincompatible-function-pointer-types"
#endif

#define ABI_STR2(x) #x
#define ABI_STR(x) ABI_STR2(x)
#define ABI_ASSERT(tag, cond) typedef char abi_assert_##tag[(cond) ? 1 : -1]

// ---- constants: compile time, and counted / printed at run time ----
#define ABI_CONSTANTS(X)                                                                           \
    X(CUDA_SUCCESS)                                                                                \
    X(CUDA_ERROR_OUT_OF_MEMORY)                                                                    \
    X(CUDA_ERROR_STUB_LIBRARY)                                                                     \
    X(CUDA_ERROR_NOT_FOUND)                                                                        \
    X(CUDA_ERROR_NOT_READY)                                                                        \
    X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)                                                    \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)                                                \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)                                                \
    X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)                                       \
    X(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)                                                     \
    X(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)                                             \
    X(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)                                       \
    X(CU_STREAM_NON_BLOCKING)                                                                      \
    X(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)                                                         \
    X(CU_JIT_ERROR_LOG_BUFFER)                                                                     \
    X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)                                                          \
    X(NVRTC_SUCCESS)                                                                               \
    X(CUBLAS_STATUS_SUCCESS)                                                                       \
    X(CUBLAS_STATUS_INVALID_VALUE)                                                                 \
    X(CUBLAS_STATUS_ARCH_MISMATCH)                                                                 \
    X(CUBLAS_STATUS_NOT_SUPPORTED)                                                                 \
    X(CUBLAS_OP_N)                                                                                 \
    X(CUBLAS_OP_T)                                                                                 \
    X(CUDA_R_32F)                                                                                  \
    X(CUDA_R_16BF)                                                                                 \
    X(CUBLAS_COMPUTE_32F)                                                                          \
    X(CUBLAS_GEMM_DEFAULT)                                                                         \
    X(CUBLAS_DEFAULT_MATH)                                                                         \
    X(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)                                              \
    X(CUBLASLT_MATMUL_DESC_TRANSA)                                                                 \
    X(CUBLASLT_MATMUL_DESC_TRANSB)                                                                 \
    X(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)                                                    \
    X(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK)                                                  \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES)                                                  \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES)                                                  \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES)                                                  \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)                                                  \
    X(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)                                                          \
    X(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)                                                 \
    X(CUBLASLT_REDUCTION_SCHEME_INPLACE)                                                           \
    X(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)

#define ABI_CONST_ASSERT(name) ABI_ASSERT(name, (long long)FAT5__##name == (long long)name);
ABI_CONSTANTS(ABI_CONST_ASSERT)

// ---- types: sizes (compatibility is checked through the prototypes below) ----
ABI_ASSERT(dptr, sizeof(fat5__dptr) == sizeof(CUdeviceptr));
ABI_ASSERT(CUresult, sizeof(fat5__CUresult) == sizeof(CUresult));
ABI_ASSERT(CUdevice, sizeof(fat5__CUdevice) == sizeof(CUdevice));
ABI_ASSERT(CUdevice_attribute, sizeof(fat5__CUdevice_attribute) == sizeof(CUdevice_attribute));
ABI_ASSERT(CUfunction_attribute, sizeof(fat5__CUfunction_attribute) == sizeof(CUfunction_attribute));
ABI_ASSERT(CUjit_option, sizeof(fat5__CUjit_option) == sizeof(CUjit_option));
ABI_ASSERT(nvrtcResult, sizeof(fat5__nvrtcResult) == sizeof(nvrtcResult));
ABI_ASSERT(cublasStatus_t, sizeof(fat5__cublasStatus_t) == sizeof(cublasStatus_t));
ABI_ASSERT(cublasOperation_t, sizeof(fat5__cublasOperation_t) == sizeof(cublasOperation_t));
ABI_ASSERT(cudaDataType, sizeof(fat5__cudaDataType) == sizeof(cudaDataType));
ABI_ASSERT(cublasComputeType_t, sizeof(fat5__cublasComputeType_t) == sizeof(cublasComputeType_t));
ABI_ASSERT(cublasGemmAlgo_t, sizeof(fat5__cublasGemmAlgo_t) == sizeof(cublasGemmAlgo_t));
ABI_ASSERT(CUstreamCaptureMode, sizeof(fat5__CUstreamCaptureMode) == sizeof(CUstreamCaptureMode));
ABI_ASSERT(cublasMath_t, sizeof(fat5__cublasMath_t) == sizeof(cublasMath_t));
// cuLaunchKernelEx (loaded when the driver has it): its two structs, member by member
ABI_ASSERT(CUlaunchConfig, sizeof(fat5__CUlaunchConfig) == sizeof(CUlaunchConfig));
ABI_ASSERT(CUlaunchConfig_stream, offsetof(fat5__CUlaunchConfig, stream) == offsetof(CUlaunchConfig, hStream));
ABI_ASSERT(CUlaunchConfig_attrs, offsetof(fat5__CUlaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs));
ABI_ASSERT(CUlaunchConfig_n, offsetof(fat5__CUlaunchConfig, n_attrs) == offsetof(CUlaunchConfig, numAttrs));
ABI_ASSERT(CUlaunchConfig_smem, offsetof(fat5__CUlaunchConfig, smem) == offsetof(CUlaunchConfig, sharedMemBytes));
ABI_ASSERT(CUlaunchAttribute, sizeof(fat5__CUlaunchAttribute) == sizeof(CUlaunchAttribute));
ABI_ASSERT(CUlaunchAttribute_value, offsetof(fat5__CUlaunchAttribute, value) == offsetof(CUlaunchAttribute, value));

// cuTensorMapEncodeTiled (loaded when the driver has it): the map, and the enum values passed as ints
ABI_ASSERT(CUtensorMap, sizeof(fat5__CUtensorMap) == sizeof(CUtensorMap));
ABI_ASSERT(tmap_bf16, FAT5__CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
ABI_ASSERT(tmap_interleave, FAT5__CU_TENSOR_MAP_INTERLEAVE_NONE == CU_TENSOR_MAP_INTERLEAVE_NONE);
ABI_ASSERT(tmap_swizzle, FAT5__CU_TENSOR_MAP_SWIZZLE_128B == CU_TENSOR_MAP_SWIZZLE_128B);
ABI_ASSERT(tmap_l2, FAT5__CU_TENSOR_MAP_L2_PROMOTION_L2_128B == CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
ABI_ASSERT(tmap_oob, FAT5__CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
ABI_ASSERT(tmap_enum_size, sizeof(CUtensorMapDataType) == sizeof(int) && sizeof(CUtensorMapSwizzle) == sizeof(int));

// cuBLASLt: the algorithm and the heuristic's result, member by member; the attribute enums
ABI_ASSERT(lt_algo, sizeof(fat5__cublasLtMatmulAlgo_t) == sizeof(cublasLtMatmulAlgo_t));
ABI_ASSERT(lt_result, sizeof(fat5__cublasLtMatmulHeuristicResult_t) == sizeof(cublasLtMatmulHeuristicResult_t));
ABI_ASSERT(lt_result_algo, offsetof(fat5__cublasLtMatmulHeuristicResult_t, algo) ==
                               offsetof(cublasLtMatmulHeuristicResult_t, algo));
ABI_ASSERT(lt_result_ws, offsetof(fat5__cublasLtMatmulHeuristicResult_t, workspaceSize) ==
                             offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
ABI_ASSERT(lt_result_state, offsetof(fat5__cublasLtMatmulHeuristicResult_t, state) ==
                                offsetof(cublasLtMatmulHeuristicResult_t, state));
ABI_ASSERT(lt_result_waves, offsetof(fat5__cublasLtMatmulHeuristicResult_t, wavesCount) ==
                                offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));
ABI_ASSERT(lt_desc_attr, sizeof(fat5__cublasLtMatmulDescAttributes_t) == sizeof(cublasLtMatmulDescAttributes_t));
ABI_ASSERT(lt_layout_attr, sizeof(fat5__cublasLtMatrixLayoutAttribute_t) == sizeof(cublasLtMatrixLayoutAttribute_t));
ABI_ASSERT(lt_pref_attr,
           sizeof(fat5__cublasLtMatmulPreferenceAttributes_t) == sizeof(cublasLtMatmulPreferenceAttributes_t));

// ---- prototypes: the real function, through the header's renaming macro, is assigned to a
// variable of fat5's pointer type. `api` reaches ## unexpanded and the right-hand side expanded.
// The assignment sits in sizeof: type-checked, never evaluated, so nothing needs linking.
#define ABI_PROTO(api, sym)                                                                        \
    static fat5__PFN_##api abi_fp_##api;                                                           \
    ABI_ASSERT(proto_##api, sizeof(abi_fp_##api = &api) == sizeof(fat5__PFN_##api));
FAT5__CU_API(ABI_PROTO)
FAT5__NVRTC_API(ABI_PROTO)
FAT5__CUBLAS_API(ABI_PROTO)
FAT5__CU_EVENT_API(ABI_PROTO)
FAT5__CU_DIST_API(ABI_PROTO)
// cuBLASLt: the two calls on the handle alone are compared whole; the others take cublasLt.h's
// descriptors, pointers to anonymous structs that no type here can name, so they are checked by
// the types above (sizes, members) and their symbol names, like NCCL's two below
ABI_PROTO(cublasLtCreate, "")
ABI_PROTO(cublasLtDestroy, "")
#define ABI_PROTO_LT(api, sym) static fat5__PFN_##api abi_fp_##api;
ABI_PROTO_LT(cublasLtMatmulDescCreate, "")
ABI_PROTO_LT(cublasLtMatmulDescDestroy, "")
ABI_PROTO_LT(cublasLtMatmulDescSetAttribute, "")
ABI_PROTO_LT(cublasLtMatrixLayoutCreate, "")
ABI_PROTO_LT(cublasLtMatrixLayoutDestroy, "")
ABI_PROTO_LT(cublasLtMatrixLayoutSetAttribute, "")
ABI_PROTO_LT(cublasLtMatmulPreferenceCreate, "")
ABI_PROTO_LT(cublasLtMatmulPreferenceDestroy, "")
ABI_PROTO_LT(cublasLtMatmulPreferenceSetAttribute, "")
ABI_PROTO_LT(cublasLtMatmulAlgoGetHeuristic, "")
ABI_PROTO_LT(cublasLtMatmul, "")

#ifdef FAT5_ABI_NCCL
// NCCL: the constants, the id's size, and every prototype but the two that take ncclUniqueId
// (an anonymous struct in nccl.h: no other type is compatible with it in this file, so those two
// are checked by the id's size and their symbol names)
ABI_ASSERT(nccl_success, FAT5__NCCL_SUCCESS == (unsigned)ncclSuccess);
ABI_ASSERT(nccl_in_progress, FAT5__NCCL_IN_PROGRESS == (unsigned)ncclInProgress);
ABI_ASSERT(nccl_sum, FAT5__NCCL_SUM == (unsigned)ncclSum);
ABI_ASSERT(nccl_f32, FAT5__NCCL_FLOAT32 == (unsigned)ncclFloat32);
ABI_ASSERT(nccl_f64, FAT5__NCCL_FLOAT64 == (unsigned)ncclFloat64);
ABI_ASSERT(nccl_id_bytes, FAT5__NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES &&
                              sizeof(fat5__ncclUniqueId) == sizeof(ncclUniqueId));
ABI_ASSERT(ncclResult_t, sizeof(fat5__ncclResult_t) == sizeof(ncclResult_t));
ABI_ASSERT(ncclDataType_t, sizeof(fat5__ncclDataType_t) == sizeof(ncclDataType_t));
ABI_ASSERT(ncclRedOp_t, sizeof(fat5__ncclRedOp_t) == sizeof(ncclRedOp_t));
#define ABI_PROTO_N(api, sym) ABI_PROTO(api, sym)
ABI_PROTO_N(ncclCommDestroy, "")
ABI_PROTO_N(ncclCommAbort, "")
ABI_PROTO_N(ncclCommGetAsyncError, "")
ABI_PROTO_N(ncclGetErrorString, "")
ABI_PROTO_N(ncclAllReduce, "")
ABI_PROTO_N(ncclReduceScatter, "")
ABI_PROTO_N(ncclAllGather, "")
static fat5__PFN_ncclGetUniqueId abi_fp_ncclGetUniqueId;
static fat5__PFN_ncclCommInitRank abi_fp_ncclCommInitRank;
#endif

typedef struct abi_sym {
    const char *api;       // the name in fat5's table
    const char *header;    // what the header maps it to
    const char *fat5;      // what fat5 passes to dlsym
    const void *fp;        // keeps the prototype variable used
} abi_sym;

#define ABI_SYM(api, sym) {#api, ABI_STR(api), sym, &abi_fp_##api},
static const abi_sym abi_cu[] = {FAT5__CU_API(ABI_SYM)};
static const abi_sym abi_nvrtc[] = {FAT5__NVRTC_API(ABI_SYM)};
static const abi_sym abi_cublas[] = {FAT5__CUBLAS_API(ABI_SYM)};
static const abi_sym abi_cublaslt[] = {FAT5__CUBLASLT_API(ABI_SYM)};  // optional: the products' algorithms
static const abi_sym abi_ev[] = {FAT5__CU_EVENT_API(ABI_SYM)};  // optional: the profiler's and several ranks'
static const abi_sym abi_dist[] = {FAT5__CU_DIST_API(ABI_SYM)};  // several ranks' (with the events)
#ifdef FAT5_ABI_NCCL
static const abi_sym abi_nccl[] = {FAT5__NCCL_API(ABI_SYM)};
#endif

typedef struct abi_const { const char *name; long long fat5, header; } abi_const;
#define ABI_CONST(name) {#name, (long long)FAT5__##name, (long long)name},
static const abi_const abi_consts[] = {ABI_CONSTANTS(ABI_CONST)};

// Compares the symbol names and, when one of libs[] opens, looks each symbol up in it.
static int check_group(const char *group, const abi_sym *s, int n, const char *const *libs, int n_libs) {
    int i, bad = 0, found = 0, names_ok = 0;
    void *lib = NULL;
    const char *opened = NULL;
    for (i = 0; i < n_libs && !lib; i++)
        if ((lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL)) != NULL) opened = libs[i];
    for (i = 0; i < n; i++) {
        if (strcmp(s[i].header, s[i].fat5) != 0) {
            printf("  %s: fat5 loads \"%s\" but the header maps %s to \"%s\"\n", group, s[i].fat5,
                   s[i].api, s[i].header);
            bad++;
        } else {
            names_ok++;
        }
        if (lib) {
            if (dlsym(lib, s[i].fat5)) {
                found++;
            } else {
                printf("  %s: %s does not export %s\n", group, opened, s[i].fat5);
                bad++;
            }
        }
    }
    if (lib)
        printf("%s: %d prototypes, %d symbol names match the header, %d/%d exported by %s%s\n", group,
               n, names_ok, found, n, opened, bad ? " - FAILED" : "");
    else
        printf("%s: %d prototypes, %d symbol names match the header (library not loadable here: "
               "exports not checked)%s\n", group, n, names_ok, bad ? " - FAILED" : "");
    return bad;
}

int main(void) {
    // the toolkit's link stub exports the driver's symbol names: enough to check the names exist
    static const char *const cuda_libs[] = {"libcuda.so.1", "/usr/local/cuda/lib64/stubs/libcuda.so"};
    static const char *const nvrtc_libs[] = {"libnvrtc.so.13", "libnvrtc.so.12",
                                             "/usr/local/cuda/lib64/libnvrtc.so.13",
                                             "/usr/local/cuda/lib64/libnvrtc.so.12"};
    static const char *const cublas_libs[] = {"libcublas.so.13", "libcublas.so.12",
                                              "/usr/local/cuda/lib64/libcublas.so.13",
                                              "/usr/local/cuda/lib64/libcublas.so.12"};
    int n_consts = (int)(sizeof abi_consts / sizeof abi_consts[0]);
    int n_cu = (int)(sizeof abi_cu / sizeof abi_cu[0]), n_nvrtc = (int)(sizeof abi_nvrtc / sizeof abi_nvrtc[0]);
    int n_cublas = (int)(sizeof abi_cublas / sizeof abi_cublas[0]), n_ev = (int)(sizeof abi_ev / sizeof abi_ev[0]);
    int i, bad = 0;
    for (i = 0; i < n_consts; i++) {
        if (abi_consts[i].fat5 != abi_consts[i].header) {
            printf("  constant %s: fat5 %lld, header %lld\n", abi_consts[i].name, abi_consts[i].fat5,
                   abi_consts[i].header);
            bad++;
        }
    }
    printf("constants: %d checked against cuda.h, nvrtc.h, cublas_api.h, cublasLt.h, library_types.h%s\n", n_consts,
           bad ? " - FAILED" : "");
    printf("types: 22 sizes and members checked; handle and enum types checked through the prototypes\n");
    bad += check_group("driver", abi_cu, n_cu, cuda_libs, 2);
    bad += check_group("nvrtc", abi_nvrtc, n_nvrtc, nvrtc_libs, 4);
    bad += check_group("cublas", abi_cublas, n_cublas, cublas_libs, 4);
    {
        static const char *const lt_libs[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                               "/usr/local/cuda/lib64/libcublasLt.so.13",
                                               "/usr/local/cuda/lib64/libcublasLt.so.12"};
        int n_lt = (int)(sizeof abi_cublaslt / sizeof abi_cublaslt[0]);
        printf("cublasLt: 2 of %d prototypes compared, the others by their types' sizes and members and by name\n",
               n_lt);
        bad += check_group("cublasLt", abi_cublaslt, n_lt, lt_libs, 4);
        n_cublas += 2;
    }
    bad += check_group("driver events", abi_ev, n_ev, cuda_libs, 2);
    n_ev += (int)(sizeof abi_dist / sizeof abi_dist[0]);
    bad += check_group("driver, several ranks", abi_dist, (int)(sizeof abi_dist / sizeof abi_dist[0]), cuda_libs, 2);
#ifdef FAT5_ABI_NCCL
    {
        static const char *const nccl_libs[] = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                                                "/usr/local/cuda/lib/libnccl.so.2"};
        int n_nccl = (int)(sizeof abi_nccl / sizeof abi_nccl[0]);
        printf("nccl: 5 constants, 4 sizes; %d of %d prototypes compared (ncclGetUniqueId, ncclCommInitRank: by the "
               "id's size and name)\n", n_nccl - 2, n_nccl);
        bad += check_group("nccl", abi_nccl, n_nccl, nccl_libs, 3);
        n_ev += n_nccl - 2;
    }
#else
    printf("nccl: SKIP (no nccl.h here)\n");
#endif
    printf("abi: %d constants, %d prototypes checked%s\n", n_consts, n_cu + n_nvrtc + n_cublas + n_ev,
           bad ? " - FAILED" : "");
    return bad ? 1 : 0;
}
