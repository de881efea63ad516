// =============================================================================================
// ==[2] device: CUDA driver, NVRTC and cuBLAS at run time, kernel cache, memory, launches ==
// The CUDA driver, NVRTC and cuBLAS loaded at run time with dlopen (no CUDA headers or
// libraries at build time); the kernel module compiled by NVRTC and cached on disk; device memory,
// one stream, kernel launches, the cuBLAS handle. Nothing model-specific.
//
// Libraries, each tried bare (LD_LIBRARY_PATH, the ld.so cache), then in $CUDA_HOME/lib64,
// /usr/local/cuda/lib64 and /usr/local/cuda/targets/x86_64-linux/lib:
//     driver  libcuda.so.1, libcuda.so
//     NVRTC   libnvrtc.so.13, libnvrtc.so.12 (12 first when the driver is a 12.x one)
//     cuBLAS  libcublas.so.13, libcublas.so.12 (likewise)
// A missing library or device gives FAT5_ERR_NO_DEVICE with the dlerror() texts; the CPU path is
// untouched. Driver entry points are looked up by their versioned names (cuMemAlloc_v2, ...): the
// plain names are the legacy 32-bit ABI that cuda.h renames away.
//
// Kernels: all kernels/*.cu joined into one program (each file behind `#line 1 "kernels/<file>"`),
// compiled once per context for the device's architecture: a cubin for the newest sm_XY that NVRTC
// lists with the device's major and XY <= the device, else (a device newer than NVRTC knows) PTX
// for the newest listed target, JIT-compiled by the driver. The image is cached on disk in
//     cfg.cache_dir, else $FAT5_CACHE_DIR, else $XDG_CACHE_HOME/fat5, else ~/.cache/fat5
// ("" as cfg.cache_dir or $FAT5_CACHE_DIR turns it off), as fat5-<128-bit key>-<arch>.cubin|.ptx.
// The key hashes the cache format, FAT5_VERSION_STRING, the source, the options, the NVRTC and
// driver versions and the target; the file holds magic, format, kind, the key, the payload size
// and a payload hash, and is verified on every read (a bad file is recompiled and replaced).
// Writes are atomic (temp file + rename), so concurrent processes at worst both compile.
// FAT5_KERNELS_DIR=<dir> compiles <dir>/<file> for every embedded file name instead of the
// embedded copy (kernel development without `make embed`). FAT5_SYNC_LAUNCHES=1 synchronizes
// after every launch so an asynchronous fault is reported with the kernel that caused it.
//
// Streams: all work goes to one non-blocking stream of the device's primary context (which cuBLAS
// shares). A non-blocking stream does not order against the legacy NULL stream, so every copy here
// is the *Async form on that stream: never mix in the synchronous cuMemcpy* calls.
#ifndef FAT5_NO_CUDA
#include "fat5_kernels.cuh"

#ifdef _WIN32
#error "fat5.h: the GPU path needs dlopen (Linux); define FAT5_NO_CUDA to build the CPU path only"
#endif
#include <dlfcn.h>
#include <time.h>

typedef unsigned long long fat5__dptr;  // CUdeviceptr on 64-bit hosts

// ---- vendor mirrors: only what fat5 uses --------------------------------------------------------
// An enum type is mirrored by the integer type that GCC and Clang make compatible with it
// (unsigned int when no enumerator is negative, else int), so tests/test_abi.c can assign every
// real function to its mirrored pointer type and let the compiler check the whole prototype.
typedef unsigned int fat5__CUresult;              // CUresult
typedef int fat5__CUdevice;                       // CUdevice
typedef unsigned int fat5__CUdevice_attribute;    // CUdevice_attribute
typedef unsigned int fat5__CUfunction_attribute;  // CUfunction_attribute
typedef unsigned int fat5__CUjit_option;          // CUjit_option
typedef struct fat5__CUctx_st *fat5__CUcontext;
typedef struct fat5__CUmod_st *fat5__CUmodule;
typedef struct fat5__CUfunc_st *fat5__CUfunction;
typedef struct fat5__CUstream_st *fat5__CUstream;  // also cuBLAS's cudaStream_t
typedef struct fat5__CUgraph_st *fat5__CUgraph;
typedef struct fat5__CUgraphExec_st *fat5__CUgraphExec;
typedef struct fat5__CUevent_st *fat5__CUevent;
typedef unsigned int fat5__CUstreamCaptureMode;   // CUstreamCaptureMode
typedef unsigned int fat5__nvrtcResult;
typedef struct fat5__nvrtcProgram_st *fat5__nvrtcProgram;
typedef unsigned int fat5__cublasStatus_t;
typedef struct fat5__cublasContext *fat5__cublasHandle_t;
typedef unsigned int fat5__cublasOperation_t;
typedef unsigned int fat5__cudaDataType;
typedef unsigned int fat5__cublasComputeType_t;
typedef int fat5__cublasGemmAlgo_t;               // has CUBLAS_GEMM_DEFAULT = -1
typedef unsigned int fat5__cublasMath_t;

enum {
    FAT5__CUDA_SUCCESS = 0,
    FAT5__CUDA_ERROR_OUT_OF_MEMORY = 2,
    FAT5__CUDA_ERROR_STUB_LIBRARY = 34,
    FAT5__CUDA_ERROR_NOT_FOUND = 500,
    FAT5__CUDA_ERROR_NOT_READY = 600,
    FAT5__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    FAT5__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    FAT5__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    FAT5__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    FAT5__CU_STREAM_NON_BLOCKING = 1,
    FAT5__CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    FAT5__CU_JIT_ERROR_LOG_BUFFER = 5,
    FAT5__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    FAT5__NVRTC_SUCCESS = 0,
    FAT5__CUBLAS_STATUS_SUCCESS = 0,
    FAT5__CUBLAS_STATUS_INVALID_VALUE = 7,   // cublasLtMatmul refusing a kept algorithm for a size:
    FAT5__CUBLAS_STATUS_ARCH_MISMATCH = 8,   // ... cuBLAS's own call runs it instead
    FAT5__CUBLAS_STATUS_NOT_SUPPORTED = 15,
    FAT5__CUBLAS_OP_N = 0,
    FAT5__CUBLAS_OP_T = 1,
    FAT5__CUDA_R_32F = 0,
    FAT5__CUDA_R_16BF = 14,
    FAT5__CUBLAS_COMPUTE_32F = 68,  // fp32 compute, no TF32 (that is _FAST_TF32 or a TF32 math mode)
    FAT5__CUBLAS_GEMM_DEFAULT = -1,
    FAT5__CUBLAS_DEFAULT_MATH = 0,
    FAT5__CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,  // split-K sums in fp32 (bf16 C)
    // cuBLASLt (cublasLt.h): descriptor and preference attributes, reduction schemes
    FAT5__CUBLASLT_MATMUL_DESC_TRANSA = 3,
    FAT5__CUBLASLT_MATMUL_DESC_TRANSB = 4,
    FAT5__CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    FAT5__CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
    FAT5__CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
    FAT5__CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
    FAT5__CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,      // split-K sums in the output buffer, in its type
    FAT5__CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2  // ... in a workspace of the compute type (fp32)
};

// driver (cuda.h)
typedef fat5__CUresult (*fat5__PFN_cuGetErrorName)(fat5__CUresult error, const char **str);
typedef fat5__CUresult (*fat5__PFN_cuGetErrorString)(fat5__CUresult error, const char **str);
typedef fat5__CUresult (*fat5__PFN_cuInit)(unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuDriverGetVersion)(int *version);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGetCount)(int *count);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGet)(fat5__CUdevice *dev, int ordinal);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGetName)(char *name, int len, fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGetAttribute)(int *value, fat5__CUdevice_attribute attr,
                                                         fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDeviceTotalMem)(size_t *bytes, fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDevicePrimaryCtxRetain)(fat5__CUcontext *pctx,
                                                             fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDevicePrimaryCtxRelease)(fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuCtxSetCurrent)(fat5__CUcontext c);
typedef fat5__CUresult (*fat5__PFN_cuStreamCreate)(fat5__CUstream *stream, unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuStreamDestroy)(fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuStreamSynchronize)(fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuModuleLoadDataEx)(fat5__CUmodule *module, const void *image,
                                                       unsigned int n_options,
                                                       fat5__CUjit_option *options, void **values);
typedef fat5__CUresult (*fat5__PFN_cuModuleUnload)(fat5__CUmodule module);
typedef fat5__CUresult (*fat5__PFN_cuModuleGetFunction)(fat5__CUfunction *fn, fat5__CUmodule module,
                                                        const char *name);
typedef fat5__CUresult (*fat5__PFN_cuFuncGetAttribute)(int *value, fat5__CUfunction_attribute attr,
                                                       fat5__CUfunction fn);
typedef fat5__CUresult (*fat5__PFN_cuFuncSetAttribute)(fat5__CUfunction fn,
                                                       fat5__CUfunction_attribute attr, int value);
typedef fat5__CUresult (*fat5__PFN_cuLaunchKernel)(fat5__CUfunction fn, unsigned int gx,
                                                   unsigned int gy, unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int smem, fat5__CUstream stream,
                                                   void **params, void **extra);
// cuLaunchKernelEx (CUDA 12; optional): only programmatic dependent launch is used. The two structs
// mirror CUlaunchConfig and CUlaunchAttribute (id, padding, a 64-byte value union).
typedef struct fat5__CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int i;
        long long align_;
    } value;
} fat5__CUlaunchAttribute;
typedef struct fat5__CUlaunchConfig {
    unsigned int gx, gy, gz, bx, by, bz, smem;
    fat5__CUstream stream;
    fat5__CUlaunchAttribute *attrs;
    unsigned int n_attrs;
} fat5__CUlaunchConfig;
#define FAT5__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef fat5__CUresult (*fat5__PFN_cuLaunchKernelEx)(const fat5__CUlaunchConfig *config, fat5__CUfunction fn,
                                                     void **args, void **extra);
// cuTensorMapEncodeTiled (CUDA 12; optional): the TMA descriptors of the sm_90a attention kernels.
// fat5__CUtensorMap mirrors CUtensorMap (128 opaque bytes, 64-byte aligned); the enums are passed
// as their values (tests/test_abi.c checks them against cuda.h).
typedef struct fat5__CUtensorMap {
    unsigned long long w[16];
} fat5__CUtensorMap;
#define FAT5__CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 9
#define FAT5__CU_TENSOR_MAP_INTERLEAVE_NONE 0
#define FAT5__CU_TENSOR_MAP_SWIZZLE_128B 3
#define FAT5__CU_TENSOR_MAP_L2_PROMOTION_L2_128B 2
#define FAT5__CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE 0
typedef fat5__CUresult (*fat5__PFN_cuTensorMapEncodeTiled)(fat5__CUtensorMap *map, int dtype, unsigned rank,
                                                           void *addr, const unsigned long long *dims,
                                                           const unsigned long long *strides, const unsigned *box,
                                                           const unsigned *elem_strides, int interleave, int swizzle,
                                                           int l2_promotion, int oob_fill);
typedef fat5__CUresult (*fat5__PFN_cuMemAlloc)(fat5__dptr *p, size_t bytes);
typedef fat5__CUresult (*fat5__PFN_cuMemFree)(fat5__dptr p);
typedef fat5__CUresult (*fat5__PFN_cuMemGetInfo)(size_t *free_b, size_t *total_b);
typedef fat5__CUresult (*fat5__PFN_cuMemcpyHtoDAsync)(fat5__dptr dst, const void *src, size_t bytes,
                                                      fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuMemcpyDtoHAsync)(void *dst, fat5__dptr src, size_t bytes,
                                                      fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuMemcpyDtoDAsync)(fat5__dptr dst, fat5__dptr src, size_t bytes,
                                                      fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuMemsetD8Async)(fat5__dptr p, unsigned char value, size_t n,
                                                    fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuStreamBeginCapture)(fat5__CUstream stream, fat5__CUstreamCaptureMode mode);
typedef fat5__CUresult (*fat5__PFN_cuStreamEndCapture)(fat5__CUstream stream, fat5__CUgraph *graph);
typedef fat5__CUresult (*fat5__PFN_cuGraphInstantiate)(fat5__CUgraphExec *exec, fat5__CUgraph graph,
                                                       unsigned long long flags);
typedef fat5__CUresult (*fat5__PFN_cuGraphLaunch)(fat5__CUgraphExec exec, fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuGraphExecDestroy)(fat5__CUgraphExec exec);
typedef fat5__CUresult (*fat5__PFN_cuGraphDestroy)(fat5__CUgraph graph);
// events: loaded only to profile and for several ranks (fat5__dev_load_events), from drivers that have them
typedef fat5__CUresult (*fat5__PFN_cuEventCreate)(fat5__CUevent *ev, unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuEventRecord)(fat5__CUevent ev, fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuEventSynchronize)(fat5__CUevent ev);
typedef fat5__CUresult (*fat5__PFN_cuEventDestroy)(fat5__CUevent ev);
typedef fat5__CUresult (*fat5__PFN_cuEventElapsedTime)(float *ms, fat5__CUevent start, fat5__CUevent end);

// NCCL (collectives across GPUs), opened only by a run of several ranks on the GPU (section [3.6]).
// libnccl.so.2 is tried bare (LD_LIBRARY_PATH, the ld.so cache), then in $NCCL_HOME/lib,
// $CUDA_HOME/lib64, $CUDA_HOME/lib, /usr/local/cuda/lib64, /usr/local/cuda/lib, then in the
// nvidia/nccl/lib folder of the Python environment $VIRTUAL_ENV or $CONDA_PREFIX
// (lib/python3.*/site-packages/), where pip's nvidia-nccl wheels put it.
typedef unsigned int fat5__ncclResult_t;    // ncclResult_t
typedef unsigned int fat5__ncclDataType_t;  // ncclDataType_t
typedef unsigned int fat5__ncclRedOp_t;     // ncclRedOp_t
typedef struct fat5__ncclComm *fat5__ncclComm_t;
#define FAT5__NCCL_UNIQUE_ID_BYTES 128
typedef struct fat5__ncclUniqueId { char internal[FAT5__NCCL_UNIQUE_ID_BYTES]; } fat5__ncclUniqueId;
#define FAT5__NCCL_SUCCESS 0u
#define FAT5__NCCL_IN_PROGRESS 7u
#define FAT5__NCCL_SUM 0u
#define FAT5__NCCL_FLOAT32 7u
#define FAT5__NCCL_FLOAT64 8u
typedef fat5__ncclResult_t (*fat5__PFN_ncclGetUniqueId)(fat5__ncclUniqueId *id);
typedef fat5__ncclResult_t (*fat5__PFN_ncclCommInitRank)(fat5__ncclComm_t *comm, int nranks, fat5__ncclUniqueId id,
                                                         int rank);
typedef fat5__ncclResult_t (*fat5__PFN_ncclCommDestroy)(fat5__ncclComm_t comm);
typedef fat5__ncclResult_t (*fat5__PFN_ncclCommAbort)(fat5__ncclComm_t comm);
typedef fat5__ncclResult_t (*fat5__PFN_ncclCommGetAsyncError)(fat5__ncclComm_t comm, fat5__ncclResult_t *error);
typedef const char *(*fat5__PFN_ncclGetErrorString)(fat5__ncclResult_t result);
typedef fat5__ncclResult_t (*fat5__PFN_ncclAllReduce)(const void *send, void *recv, size_t count,
                                                      fat5__ncclDataType_t type, fat5__ncclRedOp_t op,
                                                      fat5__ncclComm_t comm, fat5__CUstream stream);
typedef fat5__ncclResult_t (*fat5__PFN_ncclReduceScatter)(const void *send, void *recv, size_t recv_count,
                                                          fat5__ncclDataType_t type, fat5__ncclRedOp_t op,
                                                          fat5__ncclComm_t comm, fat5__CUstream stream);
typedef fat5__ncclResult_t (*fat5__PFN_ncclAllGather)(const void *send, void *recv, size_t send_count,
                                                      fat5__ncclDataType_t type, fat5__ncclComm_t comm,
                                                      fat5__CUstream stream);
#define FAT5__NCCL_API(X)                                                                          \
    X(ncclGetUniqueId, "ncclGetUniqueId")                                                          \
    X(ncclCommInitRank, "ncclCommInitRank")                                                        \
    X(ncclCommDestroy, "ncclCommDestroy")                                                          \
    X(ncclCommAbort, "ncclCommAbort")                                                              \
    X(ncclCommGetAsyncError, "ncclCommGetAsyncError")                                              \
    X(ncclGetErrorString, "ncclGetErrorString")                                                    \
    X(ncclAllReduce, "ncclAllReduce")                                                              \
    X(ncclReduceScatter, "ncclReduceScatter")                                                      \
    X(ncclAllGather, "ncclAllGather")
// the driver calls a run of several ranks adds to the events (FAT5__CU_EVENT_API): a second stream
// ordered against the first by events
typedef fat5__CUresult (*fat5__PFN_cuStreamWaitEvent)(fat5__CUstream stream, fat5__CUevent ev, unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuEventQuery)(fat5__CUevent ev);
typedef fat5__CUresult (*fat5__PFN_cuCtxGetStreamPriorityRange)(int *least, int *greatest);
typedef fat5__CUresult (*fat5__PFN_cuStreamCreateWithPriority)(fat5__CUstream *stream, unsigned int flags, int priority);
#define FAT5__CU_DIST_API(X)                                                                       \
    X(cuEventQuery, "cuEventQuery")                                                                \
    X(cuStreamWaitEvent, "cuStreamWaitEvent")                                                      \
    X(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange")                                  \
    X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority")

// NVRTC (nvrtc.h, 11.2 or newer)
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcVersion)(int *major, int *minor);
typedef const char *(*fat5__PFN_nvrtcGetErrorString)(fat5__nvrtcResult r);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetNumSupportedArchs)(int *n);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetSupportedArchs)(int *archs);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcCreateProgram)(fat5__nvrtcProgram *prog, const char *src,
                                                          const char *name, int n_headers,
                                                          const char *const *headers,
                                                          const char *const *include_names);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcCompileProgram)(fat5__nvrtcProgram prog, int n_options,
                                                           const char *const *options);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetProgramLogSize)(fat5__nvrtcProgram prog, size_t *size);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetProgramLog)(fat5__nvrtcProgram prog, char *log);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetCUBINSize)(fat5__nvrtcProgram prog, size_t *size);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetCUBIN)(fat5__nvrtcProgram prog, char *cubin);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetPTXSize)(fat5__nvrtcProgram prog, size_t *size);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetPTX)(fat5__nvrtcProgram prog, char *ptx);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcDestroyProgram)(fat5__nvrtcProgram *prog);

// cuBLAS (cublas_api.h / cublas_v2.h)
typedef fat5__cublasStatus_t (*fat5__PFN_cublasCreate)(fat5__cublasHandle_t *handle);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasDestroy)(fat5__cublasHandle_t handle);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasGetVersion)(fat5__cublasHandle_t handle, int *version);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasSetStream)(fat5__cublasHandle_t handle,
                                                          fat5__CUstream stream);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasSetMathMode)(fat5__cublasHandle_t handle,
                                                            fat5__cublasMath_t mode);
typedef const char *(*fat5__PFN_cublasGetStatusName)(fat5__cublasStatus_t status);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasGemmEx)(
    fat5__cublasHandle_t handle, fat5__cublasOperation_t transa, fat5__cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, fat5__cudaDataType a_type, int lda,
    const void *B, fat5__cudaDataType b_type, int ldb, const void *beta, void *C,
    fat5__cudaDataType c_type, int ldc, fat5__cublasComputeType_t compute,
    fat5__cublasGemmAlgo_t algo);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasGemmStridedBatchedEx)(
    fat5__cublasHandle_t handle, fat5__cublasOperation_t transa, fat5__cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, fat5__cudaDataType a_type, int lda,
    long long stride_a, const void *B, fat5__cudaDataType b_type, int ldb, long long stride_b,
    const void *beta, void *C, fat5__cudaDataType c_type, int ldc, long long stride_c, int batch,
    fat5__cublasComputeType_t compute, fat5__cublasGemmAlgo_t algo);

// cuBLASLt (cublasLt.h): products with an algorithm fat5 picks and keeps (fat5__gpu_mm). The
// descriptors are opaque structs reached through pointers; the algorithm and the heuristic's
// result are plain structs of the header's layout.
typedef struct fat5__cublasLtContext *fat5__cublasLtHandle_t;
typedef struct fat5__cublasLtMatmulDescOpaque *fat5__cublasLtMatmulDesc_t;
typedef struct fat5__cublasLtMatrixLayoutOpaque *fat5__cublasLtMatrixLayout_t;
typedef struct fat5__cublasLtMatmulPreferenceOpaque *fat5__cublasLtMatmulPreference_t;
typedef unsigned int fat5__cublasLtMatmulDescAttributes_t;
typedef unsigned int fat5__cublasLtMatmulPreferenceAttributes_t;
typedef unsigned int fat5__cublasLtMatrixLayoutAttribute_t;
typedef struct fat5__cublasLtMatmulAlgo_t {
    uint64_t data[8];
} fat5__cublasLtMatmulAlgo_t;
typedef struct fat5__cublasLtMatmulHeuristicResult_t {
    fat5__cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    fat5__cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} fat5__cublasLtMatmulHeuristicResult_t;
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtCreate)(fat5__cublasLtHandle_t *handle);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtDestroy)(fat5__cublasLtHandle_t handle);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulDescCreate)(fat5__cublasLtMatmulDesc_t *desc,
                                                                   fat5__cublasComputeType_t compute,
                                                                   fat5__cudaDataType scale);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulDescDestroy)(fat5__cublasLtMatmulDesc_t desc);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulDescSetAttribute)(fat5__cublasLtMatmulDesc_t desc,
                                                                         fat5__cublasLtMatmulDescAttributes_t attr,
                                                                         const void *buf, size_t bytes);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatrixLayoutCreate)(fat5__cublasLtMatrixLayout_t *layout,
                                                                     fat5__cudaDataType type, uint64_t rows,
                                                                     uint64_t cols, int64_t ld);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatrixLayoutDestroy)(fat5__cublasLtMatrixLayout_t layout);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatrixLayoutSetAttribute)(fat5__cublasLtMatrixLayout_t layout,
                                                                           fat5__cublasLtMatrixLayoutAttribute_t attr,
                                                                           const void *buf, size_t bytes);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulPreferenceCreate)(fat5__cublasLtMatmulPreference_t *pref);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulPreferenceDestroy)(fat5__cublasLtMatmulPreference_t pref);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulPreferenceSetAttribute)(
    fat5__cublasLtMatmulPreference_t pref, fat5__cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t bytes);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmulAlgoGetHeuristic)(
    fat5__cublasLtHandle_t handle, fat5__cublasLtMatmulDesc_t desc, fat5__cublasLtMatrixLayout_t a,
    fat5__cublasLtMatrixLayout_t b, fat5__cublasLtMatrixLayout_t c, fat5__cublasLtMatrixLayout_t d,
    fat5__cublasLtMatmulPreference_t pref, int requested, fat5__cublasLtMatmulHeuristicResult_t results[],
    int *returned);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasLtMatmul)(
    fat5__cublasLtHandle_t handle, fat5__cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
    fat5__cublasLtMatrixLayout_t a, const void *B, fat5__cublasLtMatrixLayout_t b, const void *beta, const void *C,
    fat5__cublasLtMatrixLayout_t c, void *D, fat5__cublasLtMatrixLayout_t d, const fat5__cublasLtMatmulAlgo_t *algo,
    void *workspace, size_t workspace_bytes, fat5__CUstream stream);

// X(api, "exported symbol"): the field g->cu.<api> has type fat5__PFN_<api>. The symbol is the one
// the vendor header maps <api> to (tests/test_abi.c checks it).
#define FAT5__CU_API(X)                                                                            \
    X(cuGetErrorName, "cuGetErrorName")                                                            \
    X(cuGetErrorString, "cuGetErrorString")                                                        \
    X(cuInit, "cuInit")                                                                            \
    X(cuDriverGetVersion, "cuDriverGetVersion")                                                    \
    X(cuDeviceGetCount, "cuDeviceGetCount")                                                        \
    X(cuDeviceGet, "cuDeviceGet")                                                                  \
    X(cuDeviceGetName, "cuDeviceGetName")                                                          \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute")                                                \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")                                                     \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                                        \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")                                   \
    X(cuCtxSetCurrent, "cuCtxSetCurrent")                                                          \
    X(cuStreamCreate, "cuStreamCreate")                                                            \
    X(cuStreamDestroy, "cuStreamDestroy_v2")                                                       \
    X(cuStreamSynchronize, "cuStreamSynchronize")                                                  \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx")                                                    \
    X(cuModuleUnload, "cuModuleUnload")                                                            \
    X(cuModuleGetFunction, "cuModuleGetFunction")                                                  \
    X(cuFuncGetAttribute, "cuFuncGetAttribute")                                                    \
    X(cuFuncSetAttribute, "cuFuncSetAttribute")                                                    \
    X(cuLaunchKernel, "cuLaunchKernel")                                                            \
    X(cuMemAlloc, "cuMemAlloc_v2")                                                                 \
    X(cuMemFree, "cuMemFree_v2")                                                                   \
    X(cuMemGetInfo, "cuMemGetInfo_v2")                                                             \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                                                   \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")                                                   \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")                                                   \
    X(cuMemsetD8Async, "cuMemsetD8Async")                                                         \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2")                                             \
    X(cuStreamEndCapture, "cuStreamEndCapture")                                                    \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags")                                           \
    X(cuGraphLaunch, "cuGraphLaunch")                                                              \
    X(cuGraphExecDestroy, "cuGraphExecDestroy")                                                    \
    X(cuGraphDestroy, "cuGraphDestroy")

#define FAT5__NVRTC_API(X)                                                                         \
    X(nvrtcVersion, "nvrtcVersion")                                                                \
    X(nvrtcGetErrorString, "nvrtcGetErrorString")                                                  \
    X(nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs")                                      \
    X(nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs")                                            \
    X(nvrtcCreateProgram, "nvrtcCreateProgram")                                                    \
    X(nvrtcCompileProgram, "nvrtcCompileProgram")                                                  \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")                                            \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog")                                                    \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize")                                                      \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN")                                                              \
    X(nvrtcGetPTXSize, "nvrtcGetPTXSize")                                                          \
    X(nvrtcGetPTX, "nvrtcGetPTX")                                                                  \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram")

#define FAT5__CUBLAS_API(X)                                                                        \
    X(cublasCreate, "cublasCreate_v2")                                                             \
    X(cublasDestroy, "cublasDestroy_v2")                                                           \
    X(cublasGetVersion, "cublasGetVersion_v2")                                                     \
    X(cublasSetStream, "cublasSetStream_v2")                                                       \
    X(cublasSetMathMode, "cublasSetMathMode")                                                      \
    X(cublasGetStatusName, "cublasGetStatusName")                                                  \
    X(cublasGemmEx, "cublasGemmEx")                                                                \
    X(cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx")

// cuBLASLt: optional (without it, or with FAT5_CUBLASLT=0, every product goes through cublasGemmEx)
#define FAT5__CUBLASLT_API(X)                                                                      \
    X(cublasLtCreate, "cublasLtCreate")                                                            \
    X(cublasLtDestroy, "cublasLtDestroy")                                                          \
    X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate")                                        \
    X(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy")                                      \
    X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute")                            \
    X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate")                                    \
    X(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy")                                  \
    X(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute")                        \
    X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate")                            \
    X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy")                          \
    X(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute")                \
    X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic")                            \
    X(cublasLtMatmul, "cublasLtMatmul")

// Optional driver entry points, loaded on first use (the profiler); the same X form, checked by
// tests/test_abi.c like the rest. cuEventElapsedTime_v2 (driver 12.8+) falls back to the first
// version, which has the same prototype.
#define FAT5__CU_EVENT_API(X)                                                                      \
    X(cuEventCreate, "cuEventCreate")                                                              \
    X(cuEventRecord, "cuEventRecord")                                                              \
    X(cuEventSynchronize, "cuEventSynchronize")                                                    \
    X(cuEventDestroy, "cuEventDestroy_v2")                                                         \
    X(cuEventElapsedTime, "cuEventElapsedTime_v2")

// ---- kernels ------------------------------------------------------------------------------------
// X(name): kernel id FAT5__K_<name>, CUDA entry point extern "C" __global__ void fat5_<name>(...).
// Every kernel is the GPU side of the op of its name; the attention ops have one kernel per
// position scheme (fat5_<op> for T5 buckets or no bias, fat5_<op>_alibi, fat5_<op>_fire: the same
// arguments, picked by the launcher from the op's kind), and fwd, dq and dkv one more per scheme
// for the encoder's patterns (the same names ending in _pat). The forward has a second family on
// tensor cores for bf16 activations (attn_fwd_tc64... for dk <= 64, attn_fwd_tc128... up to 128:
// the same arguments, attention_tc.cu), and so has the backward (attn_bwd_dq_tc64..., T5, ALiBi and
// no bias; attn_bwd_dkv_tc64..., FIRE too: attention_tc_bwd.cu), and the forward a third on
// Hopper's own instructions (attn_fwd_wg64, _wg128 and their _alibi: sm_90a, self-attention,
// attention_wg.cu), as has dkv (attn_bwd_dkv_wg64..., attention_wg_bwd.cu). The tensor-core kernels
// that drop probabilities (training with attention dropout) are their own instances, _drop (T5 or
// no bias, ALiBi; no pattern), so that the others keep their registers. mm's kernel serves products
// of a few rows (cuBLAS the rest).
#define FAT5__KERNELS(X)                                                                           \
    X(fill_f32) X(scale_f32) X(f32_to_bf16) X(to_act) X(embed_fwd) X(embed_bwd) X(rmsnorm_fwd)     \
    X(rmsnorm_bwd) X(colsum_f32) X(act_fwd) X(act_bwd) X(attn_fwd) X(attn_bwd_delta) X(attn_bwd_dq)  \
    X(attn_bwd_dkv) X(xent_fwd) X(xent_bwd) X(sumsq_seg) X(adamw_seg) X(optim_coef) X(loss_total)  \
    X(adafactor_seg)                                                                               \
    X(attn_decode) X(cache_write) X(cache_gather) X(add_i32) X(rope) X(fire_reduce)               \
    X(block_sum) X(block_sum_bwd)                                                                  \
    X(gen_process) X(gen_select) X(gen_beam)                                                       \
    X(attn_fwd_alibi) X(attn_fwd_fire) X(attn_bwd_dq_alibi) X(attn_bwd_dq_fire)                    \
    X(attn_bwd_dkv_alibi) X(attn_bwd_dkv_fire) X(attn_decode_alibi) X(attn_decode_fire)          \
    X(attn_fwd_pat) X(attn_fwd_alibi_pat) X(attn_fwd_fire_pat) X(attn_bwd_dq_pat)                  \
    X(attn_bwd_dq_alibi_pat) X(attn_bwd_dq_fire_pat) X(attn_bwd_dkv_pat) X(attn_bwd_dkv_alibi_pat) \
    X(attn_bwd_dkv_fire_pat) X(attn_fwd_tc64) X(attn_fwd_tc64_pat) X(attn_fwd_tc64_alibi)           \
    X(attn_fwd_tc64_alibi_pat) X(attn_fwd_tc64_fire) X(attn_fwd_tc64_fire_pat) X(attn_fwd_tc128)   \
    X(attn_fwd_tc128_pat) X(attn_fwd_tc128_alibi) X(attn_fwd_tc128_alibi_pat) X(attn_fwd_tc128_fire) \
    X(attn_fwd_tc128_fire_pat) X(mm) X(norm_mm) X(attn_bwd_dq_tc64) X(attn_bwd_dq_tc64_pat)               \
    X(attn_bwd_dq_tc64_alibi) X(attn_bwd_dq_tc64_alibi_pat) X(attn_bwd_dq_tc128) X(attn_bwd_dq_tc128_pat) \
    X(attn_bwd_dq_tc128_alibi) X(attn_bwd_dq_tc128_alibi_pat) X(attn_bwd_dkv_tc64)                        \
    X(attn_bwd_dkv_tc64_pat) X(attn_bwd_dkv_tc64_alibi) X(attn_bwd_dkv_tc64_alibi_pat)                    \
    X(attn_bwd_dkv_tc64_fire) X(attn_bwd_dkv_tc64_fire_pat) X(attn_bwd_dkv_tc128)                         \
    X(attn_bwd_dkv_tc128_pat) X(attn_bwd_dkv_tc128_alibi) X(attn_bwd_dkv_tc128_alibi_pat)                 \
    X(attn_bwd_dkv_tc128_fire) X(attn_bwd_dkv_tc128_fire_pat) X(attn_fwd_wg64) X(attn_fwd_wg64_alibi)   \
    X(attn_fwd_wg128) X(attn_fwd_wg128_alibi) X(attn_bwd_dkv_wg64) X(attn_bwd_dkv_wg64_alibi)   \
    X(attn_bwd_dkv_wg128) X(attn_bwd_dkv_wg128_alibi)   \
    X(dropout) X(drop_draws)                                                                       \
    X(attn_fwd_tc64_drop) X(attn_fwd_tc64_alibi_drop) X(attn_fwd_tc128_drop) X(attn_fwd_tc128_alibi_drop) \
    X(attn_bwd_dq_tc64_drop) X(attn_bwd_dq_tc64_alibi_drop) X(attn_bwd_dkv_tc64_drop)               \
    X(attn_bwd_dkv_tc64_alibi_drop) X(attn_bwd_dq_tc128_drop) X(attn_bwd_dq_tc128_alibi_drop)       \
    X(attn_bwd_dkv_tc128_drop) X(attn_bwd_dkv_tc128_alibi_drop)

typedef enum fat5__kernel_id {
#define FAT5__KENUM(name) FAT5__K_##name,
    FAT5__KERNELS(FAT5__KENUM)
#undef FAT5__KENUM
    FAT5__K_COUNT
} fat5__kernel_id;

// The kernel program is compiled as FAT5__K_PARTS parts at once, one NVRTC program each
// (kernels/00_common.cu: FAT5_PART; part 0 the light kernels, parts 1 .. 35 one heavy entry each:
// the attention kernels of training and decoding and the fused products, whose template instances
// are most of the minutes a whole compile takes), on the host's cores, and loaded as one module
// each. A CPU test checks that the kernel files name
// exactly parts 0 .. FAT5__K_PARTS - 1.
#define FAT5__K_PARTS 36
static const char *const fat5__kernel_names[FAT5__K_COUNT] = {
#define FAT5__KNAME(name) "fat5_" #name,
    FAT5__KERNELS(FAT5__KNAME)
#undef FAT5__KNAME
};

// ---- the device state, owned by the fat5_ctx ----------------------------------------------------
#define FAT5__MM_ROWS 16  // FAT5_MM_ROWS in kernels/mm.cu: NT products of at most this many rows run fat5_mm
#define FAT5__GPU_FIELD(api, sym) fat5__PFN_##api api;

// The per-kernel profile (fat5__dev_prof_*): each launch, cuBLAS product, copy and fill between
// two events on the stream; their times summed per key (kernel name, or product shape) when
// collected. FAT5__PROF_PENDING pairs wait at most: a full buffer is collected (a synchronisation).
#define FAT5__PROF_PENDING 2048
#define FAT5__PROF_KEY 80
typedef struct fat5__prof_entry {
    char key[FAT5__PROF_KEY];  // "attn_fwd_tc64", "gemm NT 16384x1536x512", "copy", ...
    long long calls;
    double ms;                 // summed over the collected calls
} fat5__prof_entry;
struct fat5__prof {
    fat5__CUevent ev[2 * FAT5__PROF_PENDING];  // start and end of each pending call, made once
    int n_ev;                                   // events created so far
    int pending[FAT5__PROF_PENDING];            // entry of each pending call
    int n_pending;
    fat5__prof_entry *e;
    int n_e, cap_e;
};

// One size class of products on cuBLASLt (fat5__gpu_mm): the key, and the algorithm the heuristic
// chose for the class's largest product. The free dimension (the rows of NT / NN, the inner one of
// TN: the tokens, in the model) is rounded up to its class; the others are exact.
typedef struct fat5__lt_algo {
    int32_t m, n, k, batch;
    uint8_t layout, bf16, c_f32, beta, al_a, al_b, al_c;  // al_*: log2 of the pointers' alignment (<= 8)
    uint8_t shared;                                       // batched: 1, 2, 4 when A's, B's, C's stride is 0
    uint8_t state;                                        // 0 free slot, 1 algo holds one, 2 no algorithm
    fat5__cublasLtMatmulAlgo_t algo;
} fat5__lt_algo;

struct fat5__gpu {
    void *lib_cuda, *lib_nvrtc, *lib_nvrtc_builtins, *lib_cublas, *lib_cublaslt;
    char path_cuda[512], path_nvrtc[512], path_cublas[512], path_cublaslt[512];  // what dlopen opened
    struct { FAT5__CU_API(FAT5__GPU_FIELD) } cu;
    struct { FAT5__NVRTC_API(FAT5__GPU_FIELD) } nvrtc;
    struct { FAT5__CUBLAS_API(FAT5__GPU_FIELD) } cublas;
    struct { FAT5__CUBLASLT_API(FAT5__GPU_FIELD) } lt;
    int driver_version;            // 13000 = 13.0; 0 when compiling without a driver
    int nvrtc_major, nvrtc_minor;
    int cublas_version;            // e.g. 130100

    int ordinal;
    fat5__CUdevice dev;
    int cc_major, cc_minor;        // compute capability
    int sm_count;                  // multiprocessors
    int smem_optin;                // max dynamic shared memory per block after opting in (bytes)
    char name[256];
    size_t total_mem;              // bytes

    fat5__CUcontext cuctx;         // the device's primary context (retained)
    int ctx_retained;
    fat5__CUstream stream;         // the one non-blocking stream all work goes to
    fat5__cublasHandle_t blas;     // on `stream`
    // cuBLASLt products (fat5__gpu_mm); lt_handle NULL: every product on cublasGemmEx, lt_off says why
    fat5__cublasLtHandle_t lt_handle;
    fat5__cublasLtMatmulDesc_t lt_desc[3];     // per layout (NT, NN, TN): the operations
    fat5__cublasLtMatmulPreference_t lt_pref;  // workspace, reductions, alignments (set per query)
    fat5__lt_algo *lt_cache;       // open addressing, FAT5__LT_SLOTS slots
    int lt_n;                      // slots used (at most 3/4 of them)
    fat5__lt_algo lt_spare;        // a class's algorithm when the table is full (asked at every product)
    fat5__dptr lt_ws;              // FAT5__LT_WS bytes
    long long lt_calls, lt_queries, lt_fallbacks;  // products run, heuristic queries, products passed on
    int lt_refusal_logged;         // a kept algorithm refused a size: said once
    char lt_off[640];
    fat5__CUmodule module[FAT5__K_PARTS];   // one per part of the kernel program (FAT5__K_PARTS)
    fat5__CUfunction fn[FAT5__K_COUNT];
    unsigned smem_set[FAT5__K_COUNT];  // dynamic shared memory opted into per kernel
    int max_threads[FAT5__K_COUNT];    // threads a block can have (its registers allow), 0 not asked yet

    char arch[24];                 // "sm_90" (cubin) or "compute_120" (PTX)
    int ptx;                       // 1 when the module is PTX for the driver to JIT
    int cache_hit;                 // 1: the module came from the disk cache
    int cache_rejected;            // 1: a cache file existed but failed verification (recompiled)
    double compile_ms;             // NVRTC time when compiled (0 on a hit)
    char cache_file[1024];         // "" when the cache is off

    int last_kernel;               // most recent launch (names asynchronous faults); -1 none
    int sync_launches;             // fat5_ctx_config.sync_launches / FAT5_SYNC_LAUNCHES=1
    int attn_tc;                   // bf16 attention forward and backward on tensor cores (FAT5_ATTN_TC=0: off)
    int mm_rows;                   // NT products of at most this many rows run fat5_mm (FAT5_MM_ROWS=0: none)
    int attn_wg;                   // bf16 attention forward on sm_90a's wgmma + TMA kernels (FAT5_ATTN_WG=0: off)
    int attn_wg_ok;                // those kernels can run here (the sm_90a program, tensor maps)
    fat5__PFN_cuTensorMapEncodeTiled tmap_encode;  // cuTensorMapEncodeTiled, or NULL (older drivers)
    fat5__PFN_cuLaunchKernelEx launch_ex;  // cuLaunchKernelEx, or NULL (older drivers)
    int pdl;                       // decode-step kernels launch as programmatic dependents (sm_90+; FAT5_PDL=0: off)
    int capturing;                 // between capture_begin and capture_end (the profiler stands aside)
    struct { FAT5__CU_EVENT_API(FAT5__GPU_FIELD) } ev;  // loaded by fat5__dev_load_events
    struct fat5__prof *prof;       // the per-kernel profile, or NULL (off)
};
#undef FAT5__GPU_FIELD

// ---- small helpers ------------------------------------------------------------------------------

// The CUDA libraries stay mapped once opened (dlclose only drops the reference): they keep
// process-wide state (NVRTC's static C++ runtime allocates at load and never frees, cuBLAS registers
// exit handlers) that unloading would leak or break, and a later open is then free.
#ifdef RTLD_NODELETE
#define FAT5__RTLD (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)
#else
#define FAT5__RTLD (RTLD_NOW | RTLD_LOCAL)
#endif

typedef void (*fat5__proc)(void);
typedef char fat5__proc_size_check[sizeof(void *) == sizeof(fat5__proc) ? 1 : -1];

// dlsym without an object-to-function pointer cast (POSIX guarantees the representations match)
static fat5__proc fat5__dev_sym(void *lib, const char *name) {
    void *p = lib ? dlsym(lib, name) : NULL;
    fat5__proc f;
    memcpy(&f, &p, sizeof f);
    return f;
}

static const char *fat5__dev_kname(int k) {
    return k >= 0 && k < FAT5__K_COUNT ? fat5__kernel_names[k] : "(no kernel)";
}

// A CUresult as "CUDA_ERROR_X (description)".
static void fat5__dev_cu_text(const struct fat5__gpu *g, fat5__CUresult r, char *buf, size_t cap) {
    const char *name = NULL, *desc = NULL;
    if (g && g->cu.cuGetErrorName && g->cu.cuGetErrorName(r, &name) != FAT5__CUDA_SUCCESS)
        name = NULL;
    if (g && g->cu.cuGetErrorString && g->cu.cuGetErrorString(r, &desc) != FAT5__CUDA_SUCCESS)
        desc = NULL;
    if (name)
        snprintf(buf, cap, "%s (%s)", name, desc ? desc : "no description");
    else if (r == FAT5__CUDA_ERROR_STUB_LIBRARY)  // the stub cannot name its own errors
        snprintf(buf, cap, "CUDA_ERROR_STUB_LIBRARY (the toolkit's link stub, not the driver)");
    else
        snprintf(buf, cap, "CUDA error %u", r);
}

// Records "what: CUDA_ERROR_X (description)" with status st.
static fat5_status fat5__dev_cu_fail(fat5_ctx *ctx, fat5_status st, fat5__CUresult r,
                                     const char *what) {
    char text[256];
    fat5__dev_cu_text(ctx->gpu, r, text, sizeof text);
    return fat5__err(ctx, st, "%s: %s", what, text);
}

// FAT5_OK for CUDA_SUCCESS, else FAT5_ERR_CUDA naming the call and the driver's error.
static fat5_status fat5__dev_check(fat5_ctx *ctx, fat5__CUresult r, const char *what) {
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    return fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, what);
}

static fat5_status fat5__dev_blas_check(fat5_ctx *ctx, fat5__cublasStatus_t s, const char *what) {
    const struct fat5__gpu *g = ctx->gpu;
    const char *name;
    if (s == FAT5__CUBLAS_STATUS_SUCCESS) return FAT5_OK;
    name = g && g->cublas.cublasGetStatusName ? g->cublas.cublasGetStatusName(s) : NULL;
    return fat5__err(ctx, FAT5_ERR_CUBLAS, "%s: %s (cuBLAS status %u)", what,
                     name ? name : "CUBLAS_STATUS_?", s);
}

static const char *fat5__dev_nvrtc_text(const struct fat5__gpu *g, fat5__nvrtcResult r) {
    const char *s = g->nvrtc.nvrtcGetErrorString ? g->nvrtc.nvrtcGetErrorString(r) : NULL;
    return s ? s : "NVRTC error";
}

// Opens the first of names[] that loads from the first of dirs[] (each "" or ending in '/';
// "" is the bare name: LD_LIBRARY_PATH, the ld.so cache) that has one. path receives what was
// opened. On failure errs holds "not found: <every path tried>" and the dlerror() text of every
// other failure (a wrong ELF class, a missing dependency, ...).
static void *fat5__dev_dlopen_in(fat5__sb *errs, const char *const *dirs, int nd, const char *const *names,
                                 int n_names, char *path, size_t cap) {
    static const char enoent[] = ": cannot open shared object file: No such file or directory";
    fat5__sb other;
    int d, i, n_absent = 0;
    fat5__sb_init(&other, errs->ctx);
    for (d = 0; d < nd; d++) {
        for (i = 0; i < n_names; i++) {
            void *lib;
            const char *e;
            size_t el, pl;
            int n = snprintf(path, cap, "%s%s", dirs[d], names[i]);
            if (n < 0 || (size_t)n >= cap) {
                fat5__sb_printf(&other, "; %s%s: path too long", dirs[d], names[i]);
                continue;
            }
            lib = dlopen(path, FAT5__RTLD);
            if (lib) {
                fat5__sb_free(&other);
                return lib;
            }
            e = dlerror();
            el = e ? strlen(e) : 0;
            pl = strlen(path);
            if (e && el == pl + sizeof enoent - 1 && memcmp(e, path, pl) == 0 &&
                strcmp(e + pl, enoent) == 0) {
                fat5__sb_printf(errs, "%s%s", n_absent++ ? ", " : "not found: ", path);
            } else {
                fat5__sb_printf(&other, "; %s", e ? e : path);
            }
        }
    }
    if (other.buf) fat5__sb_puts(errs, other.buf);
    fat5__sb_free(&other);
    if (cap) path[0] = 0;
    return NULL;
}

// ... a CUDA library: every name bare, then under $CUDA_HOME/lib64/, /usr/local/cuda/lib64/ and
// /usr/local/cuda/targets/x86_64-linux/lib/.
static void *fat5__dev_dlopen(fat5__sb *errs, const char *const *names, int n_names, char *path,
                              size_t cap) {
    char home_lib[512];
    const char *dirs[4];
    const char *home = getenv("CUDA_HOME");
    int nd = 0;
    dirs[nd++] = "";
    if (home && home[0]) {
        int n = snprintf(home_lib, sizeof home_lib, "%s/lib64/", home);
        if (n > 0 && (size_t)n < sizeof home_lib && strcmp(home_lib, "/usr/local/cuda/lib64/") != 0)
            dirs[nd++] = home_lib;
    }
    dirs[nd++] = "/usr/local/cuda/lib64/";
    dirs[nd++] = "/usr/local/cuda/targets/x86_64-linux/lib/";
    return fat5__dev_dlopen_in(errs, dirs, nd, names, n_names, path, cap);
}

// Each library's entry points; returns the first missing symbol, or NULL. (One macro level only:
// `api` must reach ## unexpanded even when a vendor header that renames it is included first.)
#define FAT5__DEV_LOAD_CU(api, sym)                                                                \
    if (!missing && !(g->cu.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cuda, sym))) missing = sym;
#define FAT5__DEV_LOAD_NVRTC(api, sym)                                                             \
    if (!missing && !(g->nvrtc.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_nvrtc, sym)))            \
        missing = sym;
#define FAT5__DEV_LOAD_CUBLAS(api, sym)                                                            \
    if (!missing && !(g->cublas.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cublas, sym)))          \
        missing = sym;

static const char *fat5__dev_load_cu(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__CU_API(FAT5__DEV_LOAD_CU)
    return missing;
}
static const char *fat5__dev_load_nvrtc(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__NVRTC_API(FAT5__DEV_LOAD_NVRTC)
    return missing;
}
static const char *fat5__dev_load_cublas(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__CUBLAS_API(FAT5__DEV_LOAD_CUBLAS)
    return missing;
}
#define FAT5__DEV_LOAD_CUBLASLT(api, sym)                                                          \
    if (!missing && !(g->lt.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cublaslt, sym))) missing = sym;
static const char *fat5__dev_load_cublaslt(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__CUBLASLT_API(FAT5__DEV_LOAD_CUBLASLT)
    return missing;
}
#undef FAT5__DEV_LOAD_CUBLASLT
#undef FAT5__DEV_LOAD_CU
#undef FAT5__DEV_LOAD_NVRTC
#undef FAT5__DEV_LOAD_CUBLAS

// ---- NCCL ---------------------------------------------------------------------------------------

#define FAT5__NCCL_FIELD(api, sym) fat5__PFN_##api api;
typedef struct fat5__nccl {
    void *lib;
    char path[512];                // what dlopen opened
    struct { FAT5__NCCL_API(FAT5__NCCL_FIELD) } f;
    struct { FAT5__CU_DIST_API(FAT5__NCCL_FIELD) } cu;   // from the driver fat5 already opened
} fat5__nccl;
#undef FAT5__NCCL_FIELD

// Adds DIR/lib/python3.*/site-packages/nvidia/nccl/lib/ of a Python environment to dirs.
static int fat5__nccl_python_dirs(const char *env, char (*dirs)[512], int n, int cap) {
    char lib[512];
    DIR *d;
    struct dirent *e;
    if (!env || !env[0] || snprintf(lib, sizeof lib, "%s/lib", env) >= (int)sizeof lib || !(d = opendir(lib))) return n;
    while (n < cap && (e = readdir(d)) != NULL) {
        int k;
        if (strncmp(e->d_name, "python3", 7) != 0) continue;
        k = snprintf(dirs[n], 512, "%s/%s/site-packages/nvidia/nccl/lib/", lib, e->d_name);
        if (k > 0 && k < 512) n++;
    }
    closedir(d);
    return n;
}

static fat5_status fat5__dev_load_events(fat5_ctx *ctx, const char *what);

// Opens libnccl.so.2 and its entry points into n, and the driver's stream and event calls from the
// context's driver. FAT5_ERR_NO_DEVICE, naming every place tried, when it is absent.
static fat5_status fat5__nccl_open(fat5_ctx *ctx, fat5__nccl *n) {
    static const char *const soname[] = {"libnccl.so.2"};
    char dirs[12][512];
    const char *missing = NULL, *v, *dp[12];
    fat5__sb errs;
    int nd = 0, i;
    memset(n, 0, sizeof *n);
    dirs[nd++][0] = 0;
    if ((v = getenv("NCCL_HOME")) && v[0]) snprintf(dirs[nd++], 512, "%s/lib/", v);
    if ((v = getenv("CUDA_HOME")) && v[0]) {
        snprintf(dirs[nd++], 512, "%s/lib64/", v);
        snprintf(dirs[nd++], 512, "%s/lib/", v);
    }
    snprintf(dirs[nd++], 512, "/usr/local/cuda/lib64/");
    snprintf(dirs[nd++], 512, "/usr/local/cuda/lib/");
    nd = fat5__nccl_python_dirs(getenv("VIRTUAL_ENV"), dirs, nd, 12);
    nd = fat5__nccl_python_dirs(getenv("CONDA_PREFIX"), dirs, nd, 12);
    for (i = 0; i < nd; i++) dp[i] = dirs[i];
    fat5__sb_init(&errs, ctx);
    n->lib = fat5__dev_dlopen_in(&errs, dp, nd, soname, 1, n->path, sizeof n->path);
    if (!n->lib) {
        fat5_status st = fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                                   "NCCL not found (libnccl.so.2; set NCCL_HOME, LD_LIBRARY_PATH, or VIRTUAL_ENV to a "
                                   "Python environment with the nvidia-nccl wheel): %s",
                                   errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        n->path[0] = 0;
        return st;
    }
    fat5__sb_free(&errs);
#define FAT5__NCCL_LOAD(api, sym) \
    if (!missing && !(n->f.api = (fat5__PFN_##api)fat5__dev_sym(n->lib, sym))) missing = sym;
    FAT5__NCCL_API(FAT5__NCCL_LOAD)
#undef FAT5__NCCL_LOAD
    if (missing) return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s: no entry point %s (NCCL older than 2.4?)", n->path, missing);
    if (ctx->gpu) {
#define FAT5__NCCL_LOAD_CU(api, sym) \
    if (!missing && !(n->cu.api = (fat5__PFN_##api)fat5__dev_sym(ctx->gpu->lib_cuda, sym))) missing = sym;
        FAT5__CU_DIST_API(FAT5__NCCL_LOAD_CU)
#undef FAT5__NCCL_LOAD_CU
        if (missing) return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s: no entry point %s", ctx->gpu->path_cuda, missing);
        return fat5__dev_load_events(ctx, "several ranks");
    }
    return FAT5_OK;
}

// "what: ncclX (NCCL's last message)" with FAT5_ERR_CUDA
static fat5_status fat5__nccl_fail(fat5_ctx *ctx, const fat5__nccl *n, fat5__ncclResult_t r, const char *what) {
    const char *s = n->f.ncclGetErrorString ? n->f.ncclGetErrorString(r) : NULL;
    return fat5__err(ctx, FAT5_ERR_CUDA, "%s: NCCL error %u (%s)", what, r, s ? s : "?");
}

// Sonames of a versioned CUDA library ("libnvrtc.so.13", "libnvrtc.so.12"): the newest first,
// unless the driver is older than 13, then the 12 first (a CUDA 13 library needs a CUDA 13 driver).
static void fat5__dev_sonames(const char *stem, int driver_version, char buf[2][64],
                              const char *names[2]) {
    int first = driver_version > 0 && driver_version < 13000 ? 12 : 13;
    snprintf(buf[0], 64, "%s.so.%d", stem, first);
    snprintf(buf[1], 64, "%s.so.%d", stem, first == 13 ? 12 : 13);
    names[0] = buf[0];
    names[1] = buf[1];
}

// NVRTC into g (driver not needed): library, entry points, version, and, when it was found by
// full path, libnvrtc-builtins from the same directory (libnvrtc dlopens it by bare name at the
// first compile, which would miss a directory outside the loader's search path).
static fat5_status fat5__dev_open_nvrtc(fat5_ctx *ctx, struct fat5__gpu *g) {
    char buf[2][64];
    const char *names[2], *missing;
    fat5__sb errs;
    fat5__dev_sonames("libnvrtc", g->driver_version, buf, names);
    fat5__sb_init(&errs, ctx);
    g->lib_nvrtc = fat5__dev_dlopen(&errs, names, 2, g->path_nvrtc, sizeof g->path_nvrtc);
    if (!g->lib_nvrtc) {
        fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                  "NVRTC not found (%s or %s; set CUDA_HOME or LD_LIBRARY_PATH): %s", names[0],
                  names[1], errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        return FAT5_ERR_NO_DEVICE;
    }
    fat5__sb_free(&errs);
    if ((missing = fat5__dev_load_nvrtc(g)) != NULL)
        return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s lacks %s (NVRTC 11.2 or newer is needed)",
                         g->path_nvrtc, missing);
    if (g->nvrtc.nvrtcVersion(&g->nvrtc_major, &g->nvrtc_minor) != FAT5__NVRTC_SUCCESS)
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcVersion failed (%s)", g->path_nvrtc);
    if (strchr(g->path_nvrtc, '/')) {
        char builtins[600];
        const char *slash = strrchr(g->path_nvrtc, '/');
        int n = snprintf(builtins, sizeof builtins, "%.*slibnvrtc-builtins.so.%d.%d",
                         (int)(slash + 1 - g->path_nvrtc), g->path_nvrtc, g->nvrtc_major,
                         g->nvrtc_minor);
        if (n > 0 && (size_t)n < sizeof builtins)
            g->lib_nvrtc_builtins = dlopen(builtins, FAT5__RTLD);
    }
    return FAT5_OK;
}

// ---- choosing the target ------------------------------------------------------------------------

// The compile target for compute capability cc (major*10 + minor, e.g. 90) from NVRTC's ascending
// list: the newest listed sm_XY with the device's major and XY <= cc (a cubin runs on every later
// minor of its major); else PTX (compute_XY) for the newest listed XY <= cc, which the driver
// JIT-compiles (a device newer than this NVRTC). Returns 0, or -1 when nothing listed is <= cc.
static FAT5__UNUSED int fat5__dev_pick_arch(int cc, const int *archs, int n, char *arch, size_t cap,
                                            int *ptx) {
    int i, best_cubin = -1, best_any = -1;
    for (i = 0; i < n; i++) {
        if (archs[i] > cc) continue;
        if (archs[i] / 10 == cc / 10 && archs[i] > best_cubin) best_cubin = archs[i];
        if (archs[i] > best_any) best_any = archs[i];
    }
    if (best_cubin >= 0) {
        snprintf(arch, cap, "sm_%d", best_cubin);
        *ptx = 0;
        return 0;
    }
    if (best_any >= 0) {
        snprintf(arch, cap, "compute_%d", best_any);
        *ptx = 1;
        return 0;
    }
    return -1;
}

// A kernel switch of fat5_ctx_config: on for a field > 0, off for < 0; for 0 the environment
// variable `env` ("0" off, any other non-empty value on), else `dflt`.
static int fat5__dev_switch(int field, const char *env, int dflt) {
    const char *v;
    if (field != 0) return field > 0;
    v = getenv(env);
    return v && v[0] ? strcmp(v, "0") != 0 : dflt;
}

// Sets g->arch / g->ptx for compute capability cc from the loaded NVRTC's supported targets.
static fat5_status fat5__dev_choose_arch(fat5_ctx *ctx, struct fat5__gpu *g, int cc) {
    int n = 0, archs[128];
    fat5__nvrtcResult r;
    if (cc < 80)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "%s is sm_%d: fat5 needs compute capability 8.0 or newer (bf16)",
                         g->name[0] ? g->name : "the device", cc);
    if ((r = g->nvrtc.nvrtcGetNumSupportedArchs(&n)) != FAT5__NVRTC_SUCCESS || n <= 0 || n > 128 ||
        (r = g->nvrtc.nvrtcGetSupportedArchs(archs)) != FAT5__NVRTC_SUCCESS)
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcGetSupportedArchs: %s (%d targets)",
                         fat5__dev_nvrtc_text(g, r), n);
    if (fat5__dev_pick_arch(cc, archs, n, g->arch, sizeof g->arch, &g->ptx) != 0)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "sm_%d is older than every target of NVRTC %d.%d (oldest sm_%d)", cc,
                         g->nvrtc_major, g->nvrtc_minor, archs[0]);
    // sm_90 (H100, H200) gets its architecture-specific target, whose wgmma and setmaxnreg the
    // attention kernels of attention_wg.cu use (NVRTC 12+; the cubin runs on sm_90 only, which
    // is this device); FAT5_ATTN_WG=0 keeps the plain sm_90 program
    if (!g->ptx && strcmp(g->arch, "sm_90") == 0 && cc == 90 && g->nvrtc_major >= 12 &&
        fat5__dev_switch(ctx->cfg.attn_wg, "FAT5_ATTN_WG", 1))
        snprintf(g->arch, sizeof g->arch, "sm_90a");
    return FAT5_OK;
}

// ---- the kernel program -------------------------------------------------------------------------

// Every kernels/*.cu file joined into one program, each behind a #line directive so that NVRTC
// messages name the file and line. From the embedded fat5_kernels.cuh, or, with FAT5_KERNELS_DIR
// set, the same file names read from that directory. *out: fat5__free.
static fat5_status fat5__dev_source(fat5_ctx *ctx, char **out, size_t *out_len) {
    const char *dir = getenv("FAT5_KERNELS_DIR");
    fat5__sb b;
    int k, i;
    *out = NULL;
    *out_len = 0;
    if (dir && !dir[0]) dir = NULL;
    fat5__sb_init(&b, ctx);
    for (k = 0; fat5__kernel_files[k].name; k++) {
        const char *name = fat5__kernel_files[k].name;
        if (dir) {
            char path[1024], *text = NULL;
            size_t len = 0;
            fat5_status st;
            if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
                fat5__sb_free(&b);
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "FAT5_KERNELS_DIR is too long: %s", dir);
            }
            if ((st = fat5__read_file(ctx, path, (size_t)64 << 20, &text, &len)) != FAT5_OK) {
                fat5__sb_free(&b);
                return fat5__err_prefix(ctx, st, "FAT5_KERNELS_DIR: ");
            }
            // name the real file in messages, unless the path would break the directive
            if (strpbrk(path, "\"\\\n"))
                fat5__sb_printf(&b, "#line 1 \"kernels/%s\"\n", name);
            else
                fat5__sb_printf(&b, "#line 1 \"%s\"\n", path);
            fat5__sb_putn(&b, text, len);
            if (len && text[len - 1] != '\n') fat5__sb_putn(&b, "\n", 1);
            fat5__free(ctx, text);
        } else {
            fat5__sb_printf(&b, "#line 1 \"kernels/%s\"\n", name);
            for (i = 0; fat5__kernel_files[k].lines[i]; i++)
                fat5__sb_puts(&b, fat5__kernel_files[k].lines[i]);
        }
    }
    if (k == 0) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_kernels.cuh holds no kernel files");
    }
    if (b.oom || !b.buf) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory joining the kernel sources");
    }
    *out = b.buf;
    *out_len = b.len;
    return FAT5_OK;
}

// ---- disk cache ---------------------------------------------------------------------------------

// The kernel program's parts (FAT5__K_PARTS, section [2]'s kernel list): one file in the cache,
// a bundle of the parts' images (u32 count, then a u64 size per part, then the images).
#define FAT5__KCACHE_FORMAT 2u
#define FAT5__KCACHE_HEADER 56u
#define FAT5__KCACHE_MAX ((size_t)1 << 30)
static const char fat5__kcache_magic[8] = {'f', 'a', 't', '5', 'k', 'e', 'r', 'n'};

static void fat5__dev_put_le(unsigned char *p, uint64_t v, int n) {
    int i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t fat5__dev_get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

// The cache directory into buf: cfg.cache_dir, else $FAT5_CACHE_DIR, else $XDG_CACHE_HOME/fat5
// (absolute paths only, per the XDG spec), else $HOME/.cache/fat5. Returns 0 when the cache is off:
// an empty cfg.cache_dir or $FAT5_CACHE_DIR, no HOME, or a name that does not fit.
static FAT5__UNUSED int fat5__dev_cache_dir(const fat5_ctx *ctx, char *buf, size_t cap) {
    const char *env;
    int n;
    if (ctx->cfg.cache_dir) {
        n = snprintf(buf, cap, "%s", ctx->cfg.cache_dir);
    } else if ((env = getenv("FAT5_CACHE_DIR")) != NULL) {
        n = snprintf(buf, cap, "%s", env);
    } else if ((env = getenv("XDG_CACHE_HOME")) != NULL && env[0] == '/') {
        n = snprintf(buf, cap, "%s/fat5", env);
    } else if ((env = getenv("HOME")) != NULL && env[0]) {
        n = snprintf(buf, cap, "%s/.cache/fat5", env);
    } else {
        n = 0;
    }
    if (n <= 0 || (size_t)n >= cap) {
        if (cap) buf[0] = 0;
        return 0;
    }
    return 1;
}

// mkdir -p; returns 1 when dir exists as a directory afterwards
static int fat5__dev_mkdirs(const char *dir) {
    char p[1024];
    size_t i, n = strlen(dir);
    struct stat sb;
    if (n == 0 || n >= sizeof p) return 0;
    memcpy(p, dir, n + 1);
    for (i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            (void)mkdir(p, 0755);  // EEXIST, or EACCES on an existing parent: the stat decides
            p[i] = c;
        }
    }
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
}

// Checks a cache file; NULL when valid (payload at buf + FAT5__KCACHE_HEADER), else why not.
static const char *fat5__dev_cache_verify(const void *data, size_t len, fat5__h128 key, int ptx,
                                          size_t *payload_len) {
    const unsigned char *buf = FAT5__CAST(const unsigned char *, data);
    uint64_t size;
    fat5__h128 h;
    if (len < FAT5__KCACHE_HEADER) return "shorter than its header";
    if (memcmp(buf, fat5__kcache_magic, 8) != 0) return "bad magic";
    if (fat5__dev_get_le(buf + 8, 4) != FAT5__KCACHE_FORMAT) return "another cache format";
    if (fat5__dev_get_le(buf + 12, 4) != (uint64_t)ptx) return "wrong image kind";
    size = fat5__dev_get_le(buf + 16, 8);
    if (fat5__dev_get_le(buf + 24, 8) != key.a || fat5__dev_get_le(buf + 32, 8) != key.b)
        return "key mismatch";
    if (size != (uint64_t)(len - FAT5__KCACHE_HEADER)) return "size mismatch (truncated?)";
    if (size == 0) return "empty payload";
    h = fat5__h128_of(buf + FAT5__KCACHE_HEADER, (size_t)size);
    if (fat5__dev_get_le(buf + 40, 8) != h.a || fat5__dev_get_le(buf + 48, 8) != h.b)
        return "payload hash mismatch";
    *payload_len = (size_t)size;
    return NULL;
}

// Writes the cache file atomically. Failures are logged, never fatal (the cache is an optimisation).
static void fat5__dev_cache_write(fat5_ctx *ctx, const char *path, const char *dir, fat5__h128 key,
                                  int ptx, const char *img, size_t size) {
    unsigned char *buf;
    size_t total;
    fat5__h128 h;
    fat5_status st;
    char saved[FAT5__ERRMSG_CAP];
    if (!fat5__dev_mkdirs(dir)) {
        fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: cannot create %s: %s", dir, strerror(errno));
        return;
    }
    if (!fat5__add_ok(size, FAT5__KCACHE_HEADER, &total)) return;
    buf = FAT5__CAST(unsigned char *, fat5__malloc(ctx, total));
    if (!buf) return;
    h = fat5__h128_of(img, size);
    memcpy(buf, fat5__kcache_magic, 8);
    fat5__dev_put_le(buf + 8, FAT5__KCACHE_FORMAT, 4);
    fat5__dev_put_le(buf + 12, (uint64_t)ptx, 4);
    fat5__dev_put_le(buf + 16, (uint64_t)size, 8);
    fat5__dev_put_le(buf + 24, key.a, 8);
    fat5__dev_put_le(buf + 32, key.b, 8);
    fat5__dev_put_le(buf + 40, h.a, 8);
    fat5__dev_put_le(buf + 48, h.b, 8);
    memcpy(buf + FAT5__KCACHE_HEADER, img, size);
    memcpy(saved, ctx->err, sizeof saved);
    st = fat5_write_file_atomic(ctx, path, buf, total);
    if (st != FAT5_OK) fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s", ctx->err);
    memcpy(ctx->err, saved, sizeof saved);
    fat5__free(ctx, buf);
}

// ---- NVRTC compile ------------------------------------------------------------------------------

// One part's compile: the NVRTC program and its result. NVRTC compiles different programs on
// different threads at once; run by a worker thread, it touches nothing but its job.
typedef struct fat5__kjob {
    struct fat5__gpu *g;
    const char *src;
    const char *const *opts;
    int n_opts;
    fat5__nvrtcProgram prog;
    fat5__nvrtcResult created, compiled;
    double ms;
} fat5__kjob;

static void fat5__kjob_run(fat5__kjob *j) {
    double t0 = fat5__now_s();
    j->prog = NULL;
    j->created = j->g->nvrtc.nvrtcCreateProgram(&j->prog, j->src, "fat5_kernels.cu", 0, NULL, NULL);
    j->compiled = j->created == FAT5__NVRTC_SUCCESS ? j->g->nvrtc.nvrtcCompileProgram(j->prog, j->n_opts, j->opts)
                                                    : j->created;
    j->ms = 1e3 * (fat5__now_s() - t0);
}

#if FAT5__THREADS
// Workers take the jobs in order from a shared counter until none is left.
typedef struct fat5__kpool {
    fat5__kjob *jobs;
    int n;
    int32_t next;
} fat5__kpool;

static void *fat5__kpool_work(void *arg) {
    fat5__kpool *p = (fat5__kpool *)arg;
    int i;
    while ((i = __atomic_fetch_add(&p->next, 1, __ATOMIC_ACQ_REL)) < p->n) fat5__kjob_run(&p->jobs[i]);
    return NULL;
}
#endif

// Runs the n jobs on up to the host's online cores (the calling thread is one of them).
static void fat5__kjobs_run(fat5__kjob *jobs, int n) {
#if FAT5__THREADS
    pthread_t th[FAT5__K_PARTS];
    fat5__kpool pool;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int w, started = 0;
    pool.jobs = jobs;
    pool.n = n;
    pool.next = 0;
    for (w = 1; w < n && w < cpus && w < FAT5__K_PARTS; w++)
        if (pthread_create(&th[started], NULL, fat5__kpool_work, &pool) == 0) started++;
    fat5__kpool_work(&pool);
    for (w = 0; w < started; w++) pthread_join(th[w], NULL);
#else
    int i;
    for (i = 0; i < n; i++) fat5__kjob_run(&jobs[i]);
#endif
}

// A compiled job's image (cubin, or NUL-terminated PTX) into *img (fat5__free), the program
// destroyed. A compile error reports the NVRTC log with the target and options.
static fat5_status fat5__kjob_finish(fat5_ctx *ctx, struct fat5__gpu *g, fat5__kjob *j, int part,
                                     const char *opts_text, char **img, size_t *img_size) {
    fat5__nvrtcProgram prog = j->prog;
    fat5__nvrtcResult r, cr = j->compiled;
    size_t log_size = 0, size = 0;
    char *log = NULL, *out;
    *img = NULL;
    *img_size = 0;
    if (j->created != FAT5__NVRTC_SUCCESS)
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcCreateProgram: %s", fat5__dev_nvrtc_text(g, j->created));
    // always fetch the log (its size counts the NUL), then look at the result
    if (g->nvrtc.nvrtcGetProgramLogSize(prog, &log_size) == FAT5__NVRTC_SUCCESS && log_size > 1) {
        log = FAT5__CAST(char *, fat5__malloc(ctx, log_size));
        if (log && g->nvrtc.nvrtcGetProgramLog(prog, log) == FAT5__NVRTC_SUCCESS) {
            log[log_size - 1] = 0;
        } else {
            fat5__free(ctx, log);
            log = NULL;
        }
    }
    if (cr != FAT5__NVRTC_SUCCESS) {
        fat5__err(ctx, FAT5_ERR_NVRTC,
                  "%s compiling the kernels for %s (part %d; options: %s; NVRTC %d.%d):\n%s",
                  fat5__dev_nvrtc_text(g, cr), g->arch, part, opts_text, g->nvrtc_major, g->nvrtc_minor,
                  log ? log : "(no log)");
        fat5__free(ctx, log);
        g->nvrtc.nvrtcDestroyProgram(&prog);
        return FAT5_ERR_NVRTC;
    }
    if (log) fat5__log(ctx, FAT5_LOG_DEBUG, "NVRTC messages for %s, part %d: %s", g->arch, part, log);
    fat5__free(ctx, log);
    r = g->ptx ? g->nvrtc.nvrtcGetPTXSize(prog, &size) : g->nvrtc.nvrtcGetCUBINSize(prog, &size);
    if (r != FAT5__NVRTC_SUCCESS || size == 0) {
        g->nvrtc.nvrtcDestroyProgram(&prog);
        return fat5__err(ctx, FAT5_ERR_NVRTC, "NVRTC produced no %s for %s: %s",
                         g->ptx ? "PTX" : "cubin", g->arch,
                         r ? fat5__dev_nvrtc_text(g, r) : "empty image");
    }
    out = FAT5__CAST(char *, fat5__malloc(ctx, size + 1));
    if (!out) {
        g->nvrtc.nvrtcDestroyProgram(&prog);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY,
                         "out of memory for the kernel image (%zu bytes)", size);
    }
    r = g->ptx ? g->nvrtc.nvrtcGetPTX(prog, out) : g->nvrtc.nvrtcGetCUBIN(prog, out);
    g->nvrtc.nvrtcDestroyProgram(&prog);
    if (r != FAT5__NVRTC_SUCCESS) {
        fat5__free(ctx, out);
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcGet%s: %s", g->ptx ? "PTX" : "CUBIN",
                         fat5__dev_nvrtc_text(g, r));
    }
    out[size] = 0;
    *img = out;
    *img_size = size + 1;   // with the NUL: PTX must end in one, and a cubin does not mind it
    return FAT5_OK;
}

// Compiles the FAT5__K_PARTS parts of src for g->arch in parallel into one bundle (*img,
// fat5__free): u32 part count, a u64 image size per part, the images. g->compile_ms: the wall time.
static fat5_status fat5__dev_compile(fat5_ctx *ctx, struct fat5__gpu *g, const char *src,
                                     const char *const *opts, int n_opts, const char *opts_text,
                                     char **img, size_t *img_size) {
    fat5__kjob jobs[FAT5__K_PARTS];
    char *srcs[FAT5__K_PARTS], *part_img[FAT5__K_PARTS], *out = NULL;
    size_t part_size[FAT5__K_PARTS], n = strlen(src), total = 4 + 8 * FAT5__K_PARTS, at;
    fat5_status st = FAT5_OK;
    double t0 = fat5__now_s();
    int i;
    *img = NULL;
    *img_size = 0;
    memset(part_img, 0, sizeof part_img);
    for (i = 0; i < FAT5__K_PARTS; i++) {   // each part: "#define FAT5_PART i" before the program
        srcs[i] = FAT5__CAST(char *, fat5__malloc(ctx, n + 32));
        if (!srcs[i]) {
            while (i-- > 0) fat5__free(ctx, srcs[i]);
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory for the kernel sources");
        }
        snprintf(srcs[i], 32, "#define FAT5_PART %d\n", i);
        memcpy(srcs[i] + strlen(srcs[i]), src, n + 1);
        jobs[i].g = g;
        jobs[i].src = srcs[i];
        jobs[i].opts = opts;
        jobs[i].n_opts = n_opts;
    }
    fat5__kjobs_run(jobs, FAT5__K_PARTS);
    g->compile_ms = 1e3 * (fat5__now_s() - t0);
    for (i = 0; i < FAT5__K_PARTS; i++) {   // every program is finished (destroyed), failed or not
        fat5_status s2;
        if (st) {
            if (jobs[i].created == FAT5__NVRTC_SUCCESS) g->nvrtc.nvrtcDestroyProgram(&jobs[i].prog);
            continue;
        }
        s2 = fat5__kjob_finish(ctx, g, &jobs[i], i, opts_text, &part_img[i], &part_size[i]);
        if (s2) st = s2;
        else total += part_size[i];
    }
    for (i = 0; i < FAT5__K_PARTS; i++) fat5__free(ctx, srcs[i]);
    if (!st && !(out = FAT5__CAST(char *, fat5__malloc(ctx, total + 1))))
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory for the kernel images (%zu bytes)", total);
    if (!st) {
        fat5__dev_put_le((unsigned char *)out, FAT5__K_PARTS, 4);
        for (i = 0, at = 4 + 8 * FAT5__K_PARTS; i < FAT5__K_PARTS; i++) {
            fat5__dev_put_le((unsigned char *)out + 4 + 8 * i, part_size[i], 8);
            memcpy(out + at, part_img[i], part_size[i]);
            at += part_size[i];
        }
        out[total] = 0;
        *img = out;
        *img_size = total;
        char times[FAT5__K_PARTS * 12];
        size_t tl = 0;
        for (i = 0; i < FAT5__K_PARTS; i++)
            tl += (size_t)snprintf(times + tl, sizeof times - tl, "%s%.0f", i ? " " : "", jobs[i].ms);
        fat5__log(ctx, FAT5_LOG_DEBUG, "kernels: %d parts compiled in %.0f ms; each part's ms: %s", FAT5__K_PARTS,
                  g->compile_ms, times);
    }
    for (i = 0; i < FAT5__K_PARTS; i++) fat5__free(ctx, part_img[i]);
    return st;
}

// Part i of a bundle: its image and size. 0 when the bundle is malformed.
static int fat5__dev_bundle_part(const char *b, size_t len, int i, const char **img, size_t *size) {
    size_t at = 4 + 8 * FAT5__K_PARTS, k;
    if (len < at || fat5__dev_get_le((const unsigned char *)b, 4) != FAT5__K_PARTS) return 0;
    for (k = 0; k <= (size_t)i; k++) {
        uint64_t sz = fat5__dev_get_le((const unsigned char *)b + 4 + 8 * k, 8);
        if (sz == 0 || sz > len - at) return 0;
        if (k == (size_t)i) {
            *img = b + at;
            *size = (size_t)sz;
            return 1;
        }
        at += (size_t)sz;
    }
    return 0;
}

// The module image for g->arch with the ctx's dtype: from the disk cache when a valid entry exists
// (unless no_read), else compiled by NVRTC and stored. Sets g->cache_hit, cache_rejected,
// compile_ms, cache_file. *img: fat5__free.
static fat5_status fat5__dev_build(fat5_ctx *ctx, struct fat5__gpu *g, int no_read, char **img,
                                   size_t *img_size) {
    char opt_arch[40], dir[900], keyhex[33], saved[FAT5__ERRMSG_CAP], opts_text[256], ver[64];
    const char *opts[4];
    char *src = NULL, *file = NULL;
    size_t src_len = 0, file_len = 0, payload_len = 0;
    fat5__h128 hk, key;
    fat5_status st;
    int cache_on, i, bf16 = ctx->cfg.dtype == FAT5_DTYPE_BF16;
    *img = NULL;
    *img_size = 0;
    g->cache_hit = 0;
    g->compile_ms = 0;
    g->cache_file[0] = 0;

    snprintf(opt_arch, sizeof opt_arch, "-arch=%s", g->arch);
    opts[0] = opt_arch;
    opts[1] = "--std=c++17";
    opts[2] = "-default-device";
    opts[3] = bf16 ? "-DFAT5_ACT_BF16=1" : "-DFAT5_ACT_BF16=0";
    snprintf(opts_text, sizeof opts_text, "%s %s %s %s", opts[0], opts[1], opts[2], opts[3]);
    if ((st = fat5__dev_source(ctx, &src, &src_len)) != FAT5_OK) return st;

    // key: format, fat5 version, source, options, NVRTC version, driver version, target
    fat5__h128_init(&hk);
    snprintf(ver, sizeof ver, "%u|%s|%d.%d|%d|%d", FAT5__KCACHE_FORMAT, FAT5_VERSION_STRING,
             g->nvrtc_major, g->nvrtc_minor, g->driver_version, g->ptx);
    fat5__h128_field(&hk, ver, strlen(ver));
    fat5__h128_field(&hk, src, src_len);
    fat5__h128_field(&hk, opts_text, strlen(opts_text));
    fat5__h128_field(&hk, g->arch, strlen(g->arch));
    key = fat5__h128_final(&hk);
    for (i = 0; i < 16; i++) {
        uint64_t w = i < 8 ? key.a : key.b;
        snprintf(keyhex + 2 * i, 3, "%02x", (unsigned)((w >> (8 * (7 - i % 8))) & 0xff));
    }

    cache_on = fat5__dev_cache_dir(ctx, dir, sizeof dir);
    if (cache_on && snprintf(g->cache_file, sizeof g->cache_file, "%s/fat5-%s-%s.%s", dir, keyhex,
                             g->arch, g->ptx ? "ptx" : "cubin") >= (int)sizeof g->cache_file)
        cache_on = 0;
    if (!cache_on) g->cache_file[0] = 0;

    if (cache_on && !no_read) {
        struct stat sb;
        if (stat(g->cache_file, &sb) == 0) {
            memcpy(saved, ctx->err, sizeof saved);
            st = fat5__read_file(ctx, g->cache_file, FAT5__KCACHE_MAX, &file, &file_len);
            if (st == FAT5_OK) {
                const char *why = fat5__dev_cache_verify(file, file_len, key, g->ptx, &payload_len);
                if (!why) {
                    // the image is the payload, moved to the front (with read_file's NUL)
                    memmove(file, file + FAT5__KCACHE_HEADER, payload_len + 1);
                    *img = file;
                    *img_size = payload_len;
                    g->cache_hit = 1;
                    fat5__free(ctx, src);
                    return FAT5_OK;
                }
                g->cache_rejected = 1;
                fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s is invalid (%s); recompiling",
                          g->cache_file, why);
                fat5__free(ctx, file);
            } else {
                fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s", ctx->err);
            }
            memcpy(ctx->err, saved, sizeof saved);
        }
    }

    // the first run on this machine (or after a change of the kernels) waits minutes here: said at
    // WARN, which programs show by default, before the wait rather than after it
    fat5__log(ctx, FAT5_LOG_WARN, "compiling the kernels for %s in %d parts on %ld cores (%s; %s%s)", g->arch,
              FAT5__K_PARTS, sysconf(_SC_NPROCESSORS_ONLN),
              g->cache_rejected ? "the cached image was unusable" : "none cached yet",
              cache_on ? "once, then cached in " : "the kernel cache is off: every process compiles them",
              cache_on ? g->cache_file : "");
    st = fat5__dev_compile(ctx, g, src, opts, 4, opts_text, img, img_size);
    fat5__free(ctx, src);
    if (st != FAT5_OK) return st;
    if (cache_on) fat5__dev_cache_write(ctx, g->cache_file, dir, key, g->ptx, *img, *img_size);
    return FAT5_OK;
}

// ---- open / close -------------------------------------------------------------------------------

// Releases everything g holds (in reverse order of acquisition) and frees it.
static void fat5__dev_prof_free(fat5_ctx *ctx, struct fat5__gpu *g);

// ---- cuBLASLt -----------------------------------------------------------------------------------
// cublasGemmEx asks cuBLAS's heuristic for every product size it has not seen, and the model's
// sizes change with every packed batch (the tokens): measured on one H200, FAT5-small's products
// spent 10.5 ms of host time a step there (0.2 ms a new size, 3-5 ms more when that brought a
// new kernel; up to 38.6 ms on some steps), which left the GPU waiting. So the products go
// through cuBLASLt with an algorithm chosen once per size class: the free dimension (the tokens)
// rounded up to one of 4 classes per octave, the heuristic asked for the class's largest size,
// its first choice kept and run for every size of the class (batched products too: their batch
// count and which strides are 0 are part of the class). Without libcublasLt, with
// FAT5_CUBLASLT=0, for a class the heuristic has no algorithm for, or where a kept algorithm
// refuses a size up front, cublasGemmEx (cublasGemmStridedBatchedEx) runs the product instead.
// The same sizes get the same algorithms in every process, so runs stay reproducible.
#define FAT5__LT_SLOTS 4096                 // slots for size classes; 3/4 of them are used, then a new
                                            // class is asked for again at each of its products
#define FAT5__LT_WS ((size_t)32 << 20)      // the products' workspace (split-K), as cuBLAS's own

static void fat5__dev_close_lt(fat5_ctx *ctx, struct fat5__gpu *g) {
    int i;
    if (g->lt_calls || g->lt_fallbacks)
        fat5__log(ctx, FAT5_LOG_INFO, "products: %lld on cuBLASLt (%d size classes, %lld heuristic queries), "
                  "%lld passed to cublasGemmEx", g->lt_calls, g->lt_n, g->lt_queries, g->lt_fallbacks);
    if (g->lt_ws && g->cu.cuMemFree) g->cu.cuMemFree(g->lt_ws);
    g->lt_ws = 0;
    if (g->lt_pref) g->lt.cublasLtMatmulPreferenceDestroy(g->lt_pref);
    g->lt_pref = NULL;
    for (i = 0; i < 3; i++)
        if (g->lt_desc[i]) g->lt.cublasLtMatmulDescDestroy(g->lt_desc[i]);
    memset(g->lt_desc, 0, sizeof g->lt_desc);
    if (g->lt_handle) g->lt.cublasLtDestroy(g->lt_handle);
    g->lt_handle = NULL;
    fat5__free(ctx, g->lt_cache);
    g->lt_cache = NULL;
    g->lt_n = 0;
}


// Opens cuBLASLt when it can (after cuBLAS); otherwise leaves lt_handle NULL and says why in lt_off.
static void fat5__dev_open_lt(fat5_ctx *ctx, struct fat5__gpu *g) {
    const char *names[2], *missing;
    char buf[2][64];
    fat5__sb errs;
    const unsigned ops[3][2] = {{FAT5__CUBLAS_OP_T, FAT5__CUBLAS_OP_N},   // NT: op(B), op(A) (see fat5__gpu_mm_ops)
                                {FAT5__CUBLAS_OP_N, FAT5__CUBLAS_OP_N},   // NN
                                {FAT5__CUBLAS_OP_N, FAT5__CUBLAS_OP_T}};  // TN
    uint64_t ws = FAT5__LT_WS;
    int i, ok = 1;
    if (!fat5__dev_switch(ctx->cfg.cublaslt, "FAT5_CUBLASLT", 1)) {
        snprintf(g->lt_off, sizeof g->lt_off, "cublaslt off (fat5_ctx_config.cublaslt or FAT5_CUBLASLT=0)");
        return;
    }
    fat5__dev_sonames("libcublasLt", g->driver_version, buf, names);
    fat5__sb_init(&errs, ctx);
    g->lib_cublaslt = fat5__dev_dlopen(&errs, names, 2, g->path_cublaslt, sizeof g->path_cublaslt);
    fat5__sb_free(&errs);
    if (!g->lib_cublaslt) {
        snprintf(g->lt_off, sizeof g->lt_off, "%s not found", names[0]);
        return;
    }
    if ((missing = fat5__dev_load_cublaslt(g)) != NULL) {
        snprintf(g->lt_off, sizeof g->lt_off, "%s lacks %s", g->path_cublaslt, missing);
        return;
    }
    g->lt_cache = FAT5__CAST(fat5__lt_algo *, fat5__calloc(ctx, FAT5__LT_SLOTS, sizeof(fat5__lt_algo)));
    if (!g->lt_cache || g->lt.cublasLtCreate(&g->lt_handle) != FAT5__CUBLAS_STATUS_SUCCESS) g->lt_handle = NULL, ok = 0;
    for (i = 0; i < 3 && ok; i++)
        ok = g->lt.cublasLtMatmulDescCreate(&g->lt_desc[i], FAT5__CUBLAS_COMPUTE_32F, FAT5__CUDA_R_32F) ==
                 FAT5__CUBLAS_STATUS_SUCCESS &&
             g->lt.cublasLtMatmulDescSetAttribute(g->lt_desc[i], FAT5__CUBLASLT_MATMUL_DESC_TRANSA, &ops[i][0],
                                                  sizeof ops[i][0]) == FAT5__CUBLAS_STATUS_SUCCESS &&
             g->lt.cublasLtMatmulDescSetAttribute(g->lt_desc[i], FAT5__CUBLASLT_MATMUL_DESC_TRANSB, &ops[i][1],
                                                  sizeof ops[i][1]) == FAT5__CUBLAS_STATUS_SUCCESS;
    ok = ok && g->lt.cublasLtMatmulPreferenceCreate(&g->lt_pref) == FAT5__CUBLAS_STATUS_SUCCESS &&
         g->lt.cublasLtMatmulPreferenceSetAttribute(g->lt_pref, FAT5__CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                    sizeof ws) == FAT5__CUBLAS_STATUS_SUCCESS;
    if (!ok) {
        fat5__dev_close_lt(ctx, g);
        snprintf(g->lt_off, sizeof g->lt_off, "%s: setting up a handle or descriptor failed", g->path_cublaslt);
    } else if (g->cu.cuMemAlloc(&g->lt_ws, FAT5__LT_WS) != FAT5__CUDA_SUCCESS) {
        g->lt_ws = 0;
        fat5__dev_close_lt(ctx, g);
        snprintf(g->lt_off, sizeof g->lt_off, "no device memory for its %d MiB workspace", (int)(FAT5__LT_WS >> 20));
    }
}

static void fat5__dev_release(fat5_ctx *ctx, struct fat5__gpu *g) {
    if (!g) return;
    if (g->cuctx && g->cu.cuCtxSetCurrent) g->cu.cuCtxSetCurrent(g->cuctx);
    if (g->stream && g->cu.cuStreamSynchronize) g->cu.cuStreamSynchronize(g->stream);
    fat5__dev_prof_free(ctx, g);
    fat5__dev_close_lt(ctx, g);
    if (g->blas && g->cublas.cublasDestroy) g->cublas.cublasDestroy(g->blas);
    {
        int i;
        for (i = 0; i < FAT5__K_PARTS; i++)
            if (g->module[i] && g->cu.cuModuleUnload) g->cu.cuModuleUnload(g->module[i]);
    }
    if (g->stream && g->cu.cuStreamDestroy) g->cu.cuStreamDestroy(g->stream);
    if (g->ctx_retained && g->cu.cuDevicePrimaryCtxRelease) g->cu.cuDevicePrimaryCtxRelease(g->dev);
    if (g->lib_cublaslt) dlclose(g->lib_cublaslt);
    if (g->lib_cublas) dlclose(g->lib_cublas);
    if (g->lib_nvrtc) dlclose(g->lib_nvrtc);
    if (g->lib_nvrtc_builtins) dlclose(g->lib_nvrtc_builtins);
    if (g->lib_cuda) dlclose(g->lib_cuda);
    fat5__free(ctx, g);
}

static void fat5__dev_close(fat5_ctx *ctx) {
    struct fat5__gpu *g;
    if (!ctx || !ctx->gpu) return;
    g = ctx->gpu;
    ctx->gpu = NULL;
    fat5__dev_release(ctx, g);
}

// Loads one part's image into the current context; the JIT log (PTX) goes into the error.
static fat5_status fat5__dev_load_part(fat5_ctx *ctx, struct fat5__gpu *g, int part, const char *img) {
    char jit_log[2048];
    fat5__CUjit_option keys[2];
    void *vals[2];
    fat5__CUresult r;
    char what[160];
    jit_log[0] = 0;
    keys[0] = FAT5__CU_JIT_ERROR_LOG_BUFFER;
    vals[0] = jit_log;
    keys[1] = FAT5__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    vals[1] = (void *)(uintptr_t)sizeof jit_log;
    r = g->cu.cuModuleLoadDataEx(&g->module[part], img, 2, keys, vals);
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    g->module[part] = NULL;
    jit_log[sizeof jit_log - 1] = 0;
    snprintf(what, sizeof what, "cuModuleLoadDataEx (%s %s, NVRTC %d.%d, driver %d.%d)",
             g->ptx ? "PTX" : "cubin", g->arch, g->nvrtc_major, g->nvrtc_minor,
             g->driver_version / 1000, g->driver_version % 1000 / 10);
    fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, what);
    if (g->nvrtc_major * 1000 > g->driver_version) {
        size_t n = strlen(ctx->err);
        snprintf(ctx->err + n, sizeof ctx->err - n,
                 " [NVRTC %d.%d is newer than the driver: update the driver, or make libnvrtc.so.%d "
                 "and libcublas.so.%d the ones found]", g->nvrtc_major, g->nvrtc_minor,
                 g->driver_version / 1000, g->driver_version / 1000);
    }
    if (jit_log[0]) {
        size_t n = strlen(ctx->err);
        snprintf(ctx->err + n, sizeof ctx->err - n, ":\n%s", jit_log);
    }
    return FAT5_ERR_CUDA;
}

// Loads every part of a bundle (fat5__dev_compile) as a module of its own.
static fat5_status fat5__dev_load_module(fat5_ctx *ctx, struct fat5__gpu *g, const char *img, size_t size) {
    int i;
    fat5_status st;
    for (i = 0; i < FAT5__K_PARTS; i++) {
        const char *part;
        size_t n;
        if (!fat5__dev_bundle_part(img, size, i, &part, &n))
            return fat5__err(ctx, FAT5_ERR_CUDA, "the kernel image bundle is malformed at part %d", i);
        if ((st = fat5__dev_load_part(ctx, g, i, part))) return st;
    }
    return FAT5_OK;
}

static fat5_status fat5__dev_open(fat5_ctx *ctx) {
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so"};
    struct fat5__gpu *g;
    fat5__sb errs;
    fat5__CUresult r;
    fat5_status st;
    char buf[2][64], *img = NULL;
    const char *names[2], *missing;
    size_t img_size = 0;
    int count = 0, k, n_missing = 0;
    double t0 = 1e3 * fat5__now_s();

    if (ctx->gpu) return FAT5_OK;
    if (ctx->cfg.dtype != FAT5_DTYPE_FP32 && ctx->cfg.dtype != FAT5_DTYPE_BF16)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown dtype %d",
                         (int)ctx->cfg.dtype);
    g = FAT5__CAST(struct fat5__gpu *, fat5__calloc(ctx, 1, sizeof *g));
    if (!g) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory opening the GPU");
    ctx->gpu = g;
    g->ordinal = ctx->cfg.device_ordinal;
    g->last_kernel = -1;
    g->sync_launches = fat5__dev_switch(ctx->cfg.sync_launches, "FAT5_SYNC_LAUNCHES", 0);
    g->attn_tc = fat5__dev_switch(ctx->cfg.attn_tc, "FAT5_ATTN_TC", 1);
    g->mm_rows = fat5__dev_switch(ctx->cfg.mm_rows, "FAT5_MM_ROWS", 1) ? FAT5__MM_ROWS : 0;

    // 1. the driver
    fat5__sb_init(&errs, ctx);
    g->lib_cuda = fat5__dev_dlopen(&errs, cuda_names, 2, g->path_cuda, sizeof g->path_cuda);
    if (!g->lib_cuda) {
        fat5__err(ctx, FAT5_ERR_NO_DEVICE, "no CUDA driver (libcuda.so.1): %s",
                  errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        st = FAT5_ERR_NO_DEVICE;
        goto fail;
    }
    fat5__sb_free(&errs);
    if ((missing = fat5__dev_load_cu(g)) != NULL) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "the CUDA driver %s lacks %s (driver too old?)",
                       g->path_cuda, missing);
        goto fail;
    }
    if ((r = g->cu.cuDriverGetVersion(&g->driver_version)) != FAT5__CUDA_SUCCESS) {
        st = fat5__dev_cu_fail(ctx, FAT5_ERR_NO_DEVICE, r, "cuDriverGetVersion");
        fat5__err_prefix(ctx, st, "%s: ", g->path_cuda);
        goto fail;
    }

    // 2. NVRTC and cuBLAS, so that a missing library is reported before any device work
    if ((st = fat5__dev_open_nvrtc(ctx, g)) != FAT5_OK) goto fail;
    fat5__dev_sonames("libcublas", g->driver_version, buf, names);
    fat5__sb_init(&errs, ctx);
    g->lib_cublas = fat5__dev_dlopen(&errs, names, 2, g->path_cublas, sizeof g->path_cublas);
    if (!g->lib_cublas) {
        fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                  "cuBLAS not found (%s or %s; set CUDA_HOME or LD_LIBRARY_PATH): %s", names[0],
                  names[1], errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        st = FAT5_ERR_NO_DEVICE;
        goto fail;
    }
    fat5__sb_free(&errs);
    if ((missing = fat5__dev_load_cublas(g)) != NULL) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s lacks %s", g->path_cublas, missing);
        goto fail;
    }

    // 3. the device
    if ((r = g->cu.cuInit(0)) != FAT5__CUDA_SUCCESS) {
        st = fat5__dev_cu_fail(ctx, FAT5_ERR_NO_DEVICE, r, "cuInit");
        fat5__err_prefix(ctx, st, "%s: ", g->path_cuda);
        goto fail;
    }
    if ((r = g->cu.cuDeviceGetCount(&count)) != FAT5__CUDA_SUCCESS) {
        st = fat5__dev_cu_fail(ctx, FAT5_ERR_NO_DEVICE, r, "cuDeviceGetCount");
        goto fail;
    }
    if (count <= 0) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "no CUDA device (driver %d.%d loaded)",
                       g->driver_version / 1000, g->driver_version % 1000 / 10);
        goto fail;
    }
    if (g->ordinal < 0 || g->ordinal >= count) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                       "device_ordinal %d is out of range: %d CUDA device%s (0..%d)", g->ordinal,
                       count, count == 1 ? "" : "s", count - 1);
        goto fail;
    }
    if ((st = fat5__dev_check(ctx, g->cu.cuDeviceGet(&g->dev, g->ordinal), "cuDeviceGet")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetName(g->name, (int)sizeof g->name - 1, g->dev),
                              "cuDeviceGetName")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceTotalMem(&g->total_mem, g->dev),
                              "cuDeviceTotalMem")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetAttribute(&g->cc_major,
                              FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev),
                              "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetAttribute(&g->cc_minor,
                              FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev),
                              "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetAttribute(&g->sm_count,
                              FAT5__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev),
                              "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)")))
        goto fail;
    g->name[sizeof g->name - 1] = 0;
    if (g->cu.cuDeviceGetAttribute(&g->smem_optin,
                                   FAT5__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                   g->dev) != FAT5__CUDA_SUCCESS)
        g->smem_optin = 48 * 1024;
    if ((st = fat5__dev_choose_arch(ctx, g, g->cc_major * 10 + g->cc_minor)) != FAT5_OK) goto fail;
    g->launch_ex = (fat5__PFN_cuLaunchKernelEx)fat5__dev_sym(g->lib_cuda, "cuLaunchKernelEx");
    // Hopper's attention kernels: a program compiled for sm_90a, a driver that makes tensor maps
    g->tmap_encode = (fat5__PFN_cuTensorMapEncodeTiled)fat5__dev_sym(g->lib_cuda, "cuTensorMapEncodeTiled");
    g->attn_wg = g->attn_wg_ok = g->tmap_encode && strcmp(g->arch, "sm_90a") == 0;
    {   // the kernels must be compiled for sm_90+ too (an older NVRTC may target compute_8x here):
        // below that fat5_pdl_begin compiles to nothing and a dependent would not wait
        const char *u = strchr(g->arch, '_');
        g->pdl = g->launch_ex && g->cc_major >= 9 && u && atoi(u + 1) >= 90 && fat5__dev_switch(ctx->cfg.pdl, "FAT5_PDL", 1);
    }

    // 4. context (the primary one, which cuBLAS also uses) and the stream
    if ((st = fat5__dev_check(ctx, g->cu.cuDevicePrimaryCtxRetain(&g->cuctx, g->dev),
                              "cuDevicePrimaryCtxRetain")))
        goto fail;
    g->ctx_retained = 1;
    if ((st = fat5__dev_check(ctx, g->cu.cuCtxSetCurrent(g->cuctx), "cuCtxSetCurrent")) ||
        (st = fat5__dev_check(ctx, g->cu.cuStreamCreate(&g->stream, FAT5__CU_STREAM_NON_BLOCKING),
                              "cuStreamCreate")))
        goto fail;

    // 5. kernels: cache or compile, load, look every entry point up
    if ((st = fat5__dev_build(ctx, g, 0, &img, &img_size)) != FAT5_OK) goto fail;
    st = fat5__dev_load_module(ctx, g, img, img_size);
    if (st != FAT5_OK && g->cache_hit) {
        fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s does not load (%s); recompiling",
                  g->cache_file, ctx->err);
        fat5__free(ctx, img);
        img = NULL;
        g->cache_rejected = 1;
        for (k = 0; k < FAT5__K_PARTS; k++)   // the parts that did load go: all come from the new image
            if (g->module[k]) {
                (void)g->cu.cuModuleUnload(g->module[k]);
                g->module[k] = NULL;
            }
        if ((st = fat5__dev_build(ctx, g, 1, &img, &img_size)) != FAT5_OK) goto fail;
        st = fat5__dev_load_module(ctx, g, img, img_size);
    }
    fat5__free(ctx, img);
    img = NULL;
    if (st != FAT5_OK) goto fail;
    for (k = 0; k < FAT5__K_COUNT; k++) {
        int part;
        r = FAT5__CUDA_ERROR_NOT_FOUND;   // in the first part that has it
        for (part = 0; part < FAT5__K_PARTS && r == FAT5__CUDA_ERROR_NOT_FOUND; part++)
            r = g->cu.cuModuleGetFunction(&g->fn[k], g->module[part], fat5__kernel_names[k]);
        if (r == FAT5__CUDA_ERROR_NOT_FOUND) {
            g->fn[k] = NULL;
            n_missing++;
        } else if (r != FAT5__CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "cuModuleGetFunction(%s)", fat5__kernel_names[k]);
            st = fat5__dev_check(ctx, r, what);
            goto fail;
        }
    }
    if (n_missing) {
        fat5__sb list;
        fat5__sb_init(&list, ctx);
        for (k = 0; k < FAT5__K_COUNT; k++)
            if (!g->fn[k])
                fat5__sb_printf(&list, "%s%s", list.len ? ", " : "", fat5__kernel_names[k]);
        fat5__err(ctx, FAT5_ERR_CUDA,
                  "the kernel module lacks %d of %d entry points: %s (each needs an extern \"C\" "
                  "__global__ function of that name in kernels/*.cu)",
                  n_missing, (int)FAT5__K_COUNT, list.buf ? list.buf : "(out of memory)");
        fat5__sb_free(&list);
        st = FAT5_ERR_CUDA;
        goto fail;
    }

    // 6. cuBLAS on our stream; fp32 compute with the default math mode (no TF32), fp32 reductions
    st = fat5__dev_blas_check(ctx, g->cublas.cublasCreate(&g->blas), "cublasCreate");
    if (st != FAT5_OK) {
        g->blas = NULL;
        fat5__err_prefix(ctx, st, "%s with driver %d.%d: ", g->path_cublas,
                         g->driver_version / 1000, g->driver_version % 1000 / 10);
        goto fail;
    }
    if ((st = fat5__dev_blas_check(ctx, g->cublas.cublasSetStream(g->blas, g->stream),
                                   "cublasSetStream")) ||
        (st = fat5__dev_blas_check(ctx, g->cublas.cublasSetMathMode(g->blas,
                  FAT5__CUBLAS_DEFAULT_MATH | FAT5__CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
                  "cublasSetMathMode")))
        goto fail;
    if (g->cublas.cublasGetVersion(g->blas, &g->cublas_version) != FAT5__CUBLAS_STATUS_SUCCESS)
        g->cublas_version = 0;
    fat5__dev_open_lt(ctx, g);   // 7. cuBLASLt, when there is one

    fat5__log(ctx, FAT5_LOG_INFO,
              "GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB; driver %d.%d, NVRTC %d.%d (%s), cuBLAS %d (%s)",
              g->ordinal, g->name, g->cc_major, g->cc_minor, g->sm_count,
              (double)g->total_mem / (1024.0 * 1024.0 * 1024.0), g->driver_version / 1000,
              g->driver_version % 1000 / 10, g->nvrtc_major, g->nvrtc_minor, g->path_nvrtc,
              g->cublas_version, g->path_cublas);
    if (g->lt_handle)
        fat5__log(ctx, FAT5_LOG_INFO, "products: cuBLASLt (%s), one algorithm per size class", g->path_cublaslt);
    else
        fat5__log(ctx, FAT5_LOG_INFO, "products: cublasGemmEx (cuBLASLt off: %s)", g->lt_off);
    if (g->cache_hit)
        fat5__log(ctx, FAT5_LOG_INFO, "kernels: %s %s from the cache (%s)", g->ptx ? "PTX" : "cubin",
                  g->arch, g->cache_file);
    else
        fat5__log(ctx, FAT5_LOG_INFO, "kernels: compiled for %s in %.0f ms (%s%s)", g->arch,
                  g->compile_ms, g->cache_file[0] ? "cached at " : "cache off",
                  g->cache_file);
    fat5__log(ctx, FAT5_LOG_DEBUG, "GPU open took %.0f ms", 1e3 * fat5__now_s() - t0);
    return FAT5_OK;

fail:
    fat5__free(ctx, img);
    fat5__dev_close(ctx);
    return st;
}

// Test hook: finds in the cache or compiles the kernel module for compute capability cc (e.g. 90)
// with ctx's dtype and cache settings, with NVRTC alone (no driver, no GPU; driver version 0 in
// the key). Reports whether the cache was hit or a cache file rejected, and the file's path.
static FAT5__UNUSED fat5_status fat5__dev_build_offline(fat5_ctx *ctx, int cc, int *cache_hit,
                                                        int *cache_rejected, char *cache_file,
                                                        size_t cap) {
    struct fat5__gpu *g = FAT5__CAST(struct fat5__gpu *, fat5__calloc(ctx, 1, sizeof *g));
    char *img = NULL;
    size_t img_size = 0;
    fat5_status st;
    if (!g) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(g->name, sizeof g->name, "sm_%d (offline)", cc);
    if ((st = fat5__dev_open_nvrtc(ctx, g)) == FAT5_OK &&
        (st = fat5__dev_choose_arch(ctx, g, cc)) == FAT5_OK)
        st = fat5__dev_build(ctx, g, 0, &img, &img_size);
    if (cache_hit) *cache_hit = g->cache_hit;
    if (cache_rejected) *cache_rejected = g->cache_rejected;
    if (cache_file && cap) snprintf(cache_file, cap, "%s", g->cache_file);
    fat5__free(ctx, img);
    fat5__dev_release(ctx, g);
    return st;
}

// ---- memory, launch, GEMM -----------------------------------------------------------------------

// Makes the ctx's context current on this thread (a ctx may move between threads, and several ctxs
// may share one).
static fat5_status fat5__dev_enter(fat5_ctx *ctx, const char *what) {
    fat5__CUresult r;
    if (!ctx || !ctx->gpu)
        return fat5__err(ctx, FAT5_ERR_STATE, "%s: the context has no open GPU", what);
    r = ctx->gpu->cu.cuCtxSetCurrent(ctx->gpu->cuctx);
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    return fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, "cuCtxSetCurrent");
}

// Synchronizes the stream; an asynchronous fault is reported with the last kernel launched.
static FAT5__UNUSED fat5_status fat5__dev_sync(fat5_ctx *ctx) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_sync");
    fat5__CUresult r;
    char what[128];
    if (st) return st;
    r = ctx->gpu->cu.cuStreamSynchronize(ctx->gpu->stream);
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    snprintf(what, sizeof what, "cuStreamSynchronize (last kernel launched: %s)",
             fat5__dev_kname(ctx->gpu->last_kernel));
    return fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, what);
}

// ---- the per-kernel profile: off unless fat5__dev_prof_enable turned it on (dev/bench step) ----

static void fat5__dev_prof_free(fat5_ctx *ctx, struct fat5__gpu *g) {
    struct fat5__prof *p = g ? g->prof : NULL;
    int i;
    if (!p) return;
    for (i = 0; i < p->n_ev; i++) g->ev.cuEventDestroy(p->ev[i]);
    fat5__free(ctx, p->e);
    fat5__free(ctx, p);
    g->prof = NULL;
}

// The driver's event calls into ctx->gpu->ev, once: FAT5_ERR_UNSUPPORTED, for `what`, without them.
static fat5_status fat5__dev_load_events(fat5_ctx *ctx, const char *what) {
    struct fat5__gpu *g = ctx->gpu;
    if (g->ev.cuEventCreate) return FAT5_OK;
#define FAT5__EV_LOAD(api, sym) g->ev.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cuda, sym);
    FAT5__CU_EVENT_API(FAT5__EV_LOAD)
#undef FAT5__EV_LOAD
    if (!g->ev.cuEventElapsedTime)
        g->ev.cuEventElapsedTime = (fat5__PFN_cuEventElapsedTime)fat5__dev_sym(g->lib_cuda, "cuEventElapsedTime");
    if (!g->ev.cuEventCreate || !g->ev.cuEventRecord || !g->ev.cuEventSynchronize || !g->ev.cuEventDestroy ||
        !g->ev.cuEventElapsedTime) {
        g->ev.cuEventCreate = NULL;
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: %s lacks the event calls (cuEventCreate, cuEventElapsedTime, ...)",
                         what, g->path_cuda);
    }
    return FAT5_OK;
}

// Turns the profile on (a new, empty table) or off. On needs the driver's event calls: without
// them FAT5_ERR_UNSUPPORTED.
static FAT5__UNUSED fat5_status fat5__dev_prof_enable(fat5_ctx *ctx, int on) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_prof_enable");
    struct fat5__gpu *g;
    if (st) return st;
    g = ctx->gpu;
    if ((st = fat5__dev_sync(ctx))) return st;
    fat5__dev_prof_free(ctx, g);
    if (!on) return FAT5_OK;
    if ((st = fat5__dev_load_events(ctx, "profile"))) return st;
    g->prof = FAT5__CAST(struct fat5__prof *, fat5__calloc(ctx, 1, sizeof(struct fat5__prof)));
    if (!g->prof) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "profile: out of memory");
    return FAT5_OK;
}

// Waits for the pending calls and adds their times to their entries.
// Entry i of the collected profile: its key, calls and milliseconds; returns the entry count (0
// when the profile is off).
static FAT5__UNUSED int fat5__dev_prof_entry(fat5_ctx *ctx, int i, const char **key, long long *calls, double *ms) {
    const struct fat5__prof *p = ctx->gpu ? ctx->gpu->prof : NULL;
    if (!p) return 0;
    if (i >= 0 && i < p->n_e) {
        *key = p->e[i].key;
        *calls = p->e[i].calls;
        *ms = p->e[i].ms;
    }
    return p->n_e;
}

static FAT5__UNUSED fat5_status fat5__dev_prof_collect(fat5_ctx *ctx) {
    struct fat5__gpu *g = ctx->gpu;
    struct fat5__prof *p = g ? g->prof : NULL;
    int i;
    if (!p || !p->n_pending) return FAT5_OK;
    for (i = 0; i < p->n_pending; i++) {
        float ms = 0;
        fat5__CUresult r = g->ev.cuEventSynchronize(p->ev[2 * i + 1]);
        if (r == FAT5__CUDA_SUCCESS) r = g->ev.cuEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]);
        if (r != FAT5__CUDA_SUCCESS) {
            p->n_pending = 0;
            return fat5__dev_check(ctx, r, "profile: cuEventElapsedTime");
        }
        p->e[p->pending[i]].calls++;
        p->e[p->pending[i]].ms += ms;
    }
    p->n_pending = 0;
    return FAT5_OK;
}

// Opens a profiled call: its start event, after collecting a full buffer. Returns the call's slot,
// or -1 when the profile is off (or capturing a graph, or failing: the call runs unprofiled).
static int fat5__dev_prof_begin(fat5_ctx *ctx) {
    struct fat5__gpu *g = ctx->gpu;
    struct fat5__prof *p = g ? g->prof : NULL;
    int i;
    if (!p || g->capturing) return -1;
    if (p->n_pending == FAT5__PROF_PENDING && fat5__dev_prof_collect(ctx)) return -1;
    i = p->n_pending;
    while (p->n_ev < 2 * i + 2)
        if (g->ev.cuEventCreate(&p->ev[p->n_ev], 0) != FAT5__CUDA_SUCCESS) return -1;
        else p->n_ev++;
    return g->ev.cuEventRecord(p->ev[2 * i], g->stream) == FAT5__CUDA_SUCCESS ? i : -1;
}

// Closes the call of `slot` (from fat5__dev_prof_begin) under `key`.
static void fat5__dev_prof_end(fat5_ctx *ctx, int slot, const char *key) {
    struct fat5__gpu *g = ctx->gpu;
    struct fat5__prof *p = g->prof;
    int j;
    if (slot < 0 || !p || slot != p->n_pending) return;
    for (j = 0; j < p->n_e; j++)
        if (!strcmp(p->e[j].key, key)) break;
    if (j == p->n_e) {
        if (p->n_e == p->cap_e) {
            int cap = p->cap_e ? 2 * p->cap_e : 64;
            fat5__prof_entry *e = FAT5__CAST(fat5__prof_entry *,
                                             fat5__realloc(ctx, p->e, (size_t)cap * sizeof(fat5__prof_entry)));
            if (!e) return;
            p->e = e;
            p->cap_e = cap;
        }
        memset(&p->e[j], 0, sizeof p->e[j]);
        snprintf(p->e[j].key, sizeof p->e[j].key, "%s", key);
        p->n_e++;
    }
    if (g->ev.cuEventRecord(p->ev[2 * slot + 1], g->stream) != FAT5__CUDA_SUCCESS) return;
    p->pending[slot] = j;
    p->n_pending++;
}

static FAT5__UNUSED fat5_status fat5__dev_mem_info(fat5_ctx *ctx, size_t *free_b, size_t *total_b) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_mem_info");
    if (st) return st;
    return fat5__dev_check(ctx, ctx->gpu->cu.cuMemGetInfo(free_b, total_b), "cuMemGetInfo");
}

// Zero-filled device memory; bytes == 0 gives *out = 0 (which fat5__dev_free ignores).
static FAT5__UNUSED fat5_status fat5__dev_alloc(fat5_ctx *ctx, size_t bytes, fat5__dptr *out) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_alloc");
    struct fat5__gpu *g;
    fat5__dptr p = 0;
    fat5__CUresult r;
    *out = 0;
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    g = ctx->gpu;
    r = g->cu.cuMemAlloc(&p, bytes);
    if (r == FAT5__CUDA_ERROR_OUT_OF_MEMORY) {
        size_t fr = 0, tot = 0;
        g->cu.cuMemGetInfo(&fr, &tot);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY,
                         "GPU out of memory: allocating %zu bytes (%.1f MiB) with %.1f MiB free of "
                         "%.1f MiB on %s", bytes, (double)bytes / 1048576.0, (double)fr / 1048576.0,
                         (double)tot / 1048576.0, g->name);
    }
    if (r != FAT5__CUDA_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "cuMemAlloc(%zu bytes)", bytes);
        return fat5__dev_check(ctx, r, what);
    }
    r = g->cu.cuMemsetD8Async(p, 0, bytes, g->stream);
    if (r != FAT5__CUDA_SUCCESS) {
        g->cu.cuMemFree(p);
        return fat5__dev_check(ctx, r, "cuMemsetD8Async (zero-filling a new allocation)");
    }
    *out = p;
    return FAT5_OK;
}

// Frees device memory after the stream has finished with it; 0 is a no-op.
static FAT5__UNUSED void fat5__dev_free(fat5_ctx *ctx, fat5__dptr p) {
    struct fat5__gpu *g;
    if (!p || !ctx || !ctx->gpu) return;
    g = ctx->gpu;
    if (g->cu.cuCtxSetCurrent(g->cuctx) != FAT5__CUDA_SUCCESS) return;
    g->cu.cuStreamSynchronize(g->stream);
    g->cu.cuMemFree(p);
}

// Waits for a copy just queued (r: the result of queuing it); errors name the copy and the last
// kernel launched, since an earlier kernel's fault surfaces here.
static fat5_status fat5__dev_copy_done(fat5_ctx *ctx, fat5__CUresult r, const char *dir, size_t bytes) {
    if (r == FAT5__CUDA_SUCCESS) r = ctx->gpu->cu.cuStreamSynchronize(ctx->gpu->stream);
    if (r != FAT5__CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "%s of %zu bytes (last kernel launched: %s)", dir, bytes,
                 fat5__dev_kname(ctx->gpu->last_kernel));
        return fat5__dev_check(ctx, r, what);
    }
    return FAT5_OK;
}

// Host to device. Returns when the copy is complete (src may be reused at once).
static FAT5__UNUSED fat5_status fat5__dev_upload(fat5_ctx *ctx, fat5__dptr dst, const void *src,
                                                 size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_upload");
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!dst || !src)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_upload: NULL %s for %zu bytes",
                         dst ? "source" : "destination", bytes);
    return fat5__dev_copy_done(ctx, ctx->gpu->cu.cuMemcpyHtoDAsync(dst, src, bytes, ctx->gpu->stream),
                               "upload", bytes);
}

// Device to host, after all work queued before it; returns when dst holds the data.
static FAT5__UNUSED fat5_status fat5__dev_download(fat5_ctx *ctx, void *dst, fat5__dptr src,
                                                   size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_download");
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!dst || !src)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_download: NULL %s for %zu bytes",
                         src ? "destination" : "source", bytes);
    return fat5__dev_copy_done(ctx, ctx->gpu->cu.cuMemcpyDtoHAsync(dst, src, bytes, ctx->gpu->stream),
                               "download", bytes);
}

static FAT5__UNUSED fat5_status fat5__dev_memset0(fat5_ctx *ctx, fat5__dptr p, size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_memset0");
    int slot;
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!p)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_memset0: NULL pointer for %zu bytes",
                         bytes);
    slot = fat5__dev_prof_begin(ctx);
    st = fat5__dev_check(ctx, ctx->gpu->cu.cuMemsetD8Async(p, 0, bytes, ctx->gpu->stream), "cuMemsetD8Async");
    if (!st) fat5__dev_prof_end(ctx, slot, "memset");
    return st;
}

// Device to device, queued on the stream.
static FAT5__UNUSED fat5_status fat5__dev_copy(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src,
                                               size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_copy");
    int slot;
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!dst || !src)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_copy: NULL %s for %zu bytes",
                         dst ? "source" : "destination", bytes);
    slot = fat5__dev_prof_begin(ctx);
    st = fat5__dev_check(ctx, ctx->gpu->cu.cuMemcpyDtoDAsync(dst, src, bytes, ctx->gpu->stream),
                         "cuMemcpyDtoDAsync");
    if (!st) fat5__dev_prof_end(ctx, slot, "copy");
    return st;
}

static FAT5__UNUSED size_t fat5__dev_act_size(const fat5_ctx *ctx) {
    return ctx->cfg.dtype == FAT5_DTYPE_BF16 ? 2 : 4;
}

// The most threads a block of `kernel` can have on this device (its register use decides), asked
// once; 0 when no device or module is there.
static FAT5__UNUSED int fat5__dev_max_threads(fat5_ctx *ctx, int kernel) {
    struct fat5__gpu *g = ctx->gpu;
    int v = 0;
    if (!g || kernel < 0 || kernel >= FAT5__K_COUNT || !g->fn[kernel]) return 0;
    if (!g->max_threads[kernel] &&
        g->cu.cuFuncGetAttribute(&v, FAT5__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, g->fn[kernel]) ==
            FAT5__CUDA_SUCCESS)
        g->max_threads[kernel] = v;
    return g->max_threads[kernel];
}

// The kernels of a decode step, which begin with fat5_pdl_begin (kernels/00_common.cu): on sm_90+
// they launch as programmatic dependents, so that the launch of each overlaps the end of the one
// before it (a step is ~100 short kernels; graphs alone leave ~1.5 us between them).
static int fat5__dev_pdl_kernel(int k) {
    return k == FAT5__K_embed_fwd || k == FAT5__K_rmsnorm_fwd || k == FAT5__K_norm_mm || k == FAT5__K_mm ||
           k == FAT5__K_attn_decode || k == FAT5__K_attn_decode_alibi || k == FAT5__K_attn_decode_fire ||
           k == FAT5__K_cache_write || k == FAT5__K_add_i32 || k == FAT5__K_gen_process || k == FAT5__K_gen_select;
}

// Queues kernel `kernel` (a FAT5__K_ id) on the stream. args: the kernel's parameters, one pointer
// per parameter. Dynamic shared memory above 48 KiB is opted into automatically.
static FAT5__UNUSED fat5_status fat5__dev_launch(fat5_ctx *ctx, int kernel, unsigned gx, unsigned gy,
                                                 unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                                 unsigned smem, void **args) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_launch");
    struct fat5__gpu *g;
    fat5__CUresult r;
    char what[200];
    int slot;
    if (st) return st;
    g = ctx->gpu;
    if (kernel < 0 || kernel >= FAT5__K_COUNT)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_launch: no kernel with id %d", kernel);
    if (!g->fn[kernel])
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5__dev_launch: %s is not loaded",
                         fat5__kernel_names[kernel]);
    if (smem > 48u * 1024u && smem > g->smem_set[kernel]) {
        if (smem > (unsigned)g->smem_optin)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "launching %s: %u bytes of dynamic shared memory, %s allows %d",
                             fat5__kernel_names[kernel], smem, g->name, g->smem_optin);
        r = g->cu.cuFuncSetAttribute(
            g->fn[kernel], FAT5__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
        if (r != FAT5__CUDA_SUCCESS) {
            snprintf(what, sizeof what, "cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES=%u)",
                     fat5__kernel_names[kernel], smem);
            return fat5__dev_check(ctx, r, what);
        }
        g->smem_set[kernel] = smem;
    }
    slot = fat5__dev_prof_begin(ctx);
    if (g->pdl && fat5__dev_pdl_kernel(kernel)) {
        // a programmatic dependent: its blocks may start while the kernel before it finishes, and
        // wait (griddepcontrol.wait, fat5_pdl_begin) for it to complete before touching memory
        fat5__CUlaunchAttribute at;
        fat5__CUlaunchConfig lc;
        memset(&at, 0, sizeof at);
        at.id = FAT5__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.i = 1;
        lc.gx = gx, lc.gy = gy, lc.gz = gz, lc.bx = bx, lc.by = by, lc.bz = bz, lc.smem = smem;
        lc.stream = g->stream;
        lc.attrs = &at;
        lc.n_attrs = 1;
        r = g->launch_ex(&lc, g->fn[kernel], args, NULL);
    } else {
        r = g->cu.cuLaunchKernel(g->fn[kernel], gx, gy, gz, bx, by, bz, smem, g->stream, args, NULL);
    }
    if (r == FAT5__CUDA_SUCCESS) {
        g->last_kernel = kernel;
        fat5__dev_prof_end(ctx, slot, fat5__kernel_names[kernel] + 5);  // the op's name: "fat5_" left out
        if (!g->sync_launches) return FAT5_OK;
        r = g->cu.cuStreamSynchronize(g->stream);
        if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
        snprintf(what, sizeof what,
                 "%s (fault found by sync_launches (FAT5_SYNC_LAUNCHES); grid %ux%ux%u, block %ux%ux%u)",
                 fat5__kernel_names[kernel], gx, gy, gz, bx, by, bz);
        return fat5__dev_check(ctx, r, what);
    }
    snprintf(what, sizeof what, "launching %s (grid %ux%ux%u, block %ux%ux%u, %u B shared)",
             fat5__kernel_names[kernel], gx, gy, gz, bx, by, bz, smem);
    return fat5__dev_check(ctx, r, what);
}

// ---- CUDA graphs: work enqueued on the stream between capture_begin and capture_end is recorded
// instead of run, and replayed by graph_launch (the decoder's steps). During a capture nothing may
// synchronise or copy from pageable host memory; FAT5_SYNC_LAUNCHES (a synchronisation after every
// launch) cannot be captured, so capture_begin refuses with FAT5_ERR_UNSUPPORTED and callers run
// plain launches.
static FAT5__UNUSED fat5_status fat5__dev_capture_begin(fat5_ctx *ctx) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_capture_begin");
    if (st) return st;
    if (ctx->gpu->sync_launches)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "CUDA graph capture is off with sync_launches (fat5_ctx_config.sync_launches or FAT5_SYNC_LAUNCHES)");
    st = fat5__dev_check(ctx, ctx->gpu->cu.cuStreamBeginCapture(ctx->gpu->stream,
                                                                FAT5__CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                         "cuStreamBeginCapture");
    ctx->gpu->capturing = st == FAT5_OK;
    return st;
}

// Ends the capture and instantiates it into *exec (a fat5__CUgraphExec). With `keep` 0 (a capture
// abandoned after an error) the recording is discarded and *exec stays NULL; the error that ended
// it is kept as the message.
static FAT5__UNUSED fat5_status fat5__dev_capture_end(fat5_ctx *ctx, int keep, void **exec) {
    struct fat5__gpu *g = ctx->gpu;
    fat5__CUgraph graph = NULL;
    fat5__CUgraphExec e = NULL;
    fat5__CUresult r;
    *exec = NULL;
    if (!g) return fat5__err(ctx, FAT5_ERR_STATE, "fat5__dev_capture_end: no device");
    r = g->cu.cuStreamEndCapture(g->stream, &graph);
    g->capturing = 0;
    if (!keep) {
        if (graph) g->cu.cuGraphDestroy(graph);
        return FAT5_OK;
    }
    if (r != FAT5__CUDA_SUCCESS) {
        if (graph) g->cu.cuGraphDestroy(graph);
        return fat5__dev_check(ctx, r, "cuStreamEndCapture");
    }
    r = g->cu.cuGraphInstantiate(&e, graph, 0);
    g->cu.cuGraphDestroy(graph);
    if (r != FAT5__CUDA_SUCCESS) return fat5__dev_check(ctx, r, "cuGraphInstantiate");
    *exec = (void *)e;
    return FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__dev_graph_launch(fat5_ctx *ctx, void *exec) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_graph_launch");
    if (st) return st;
    return fat5__dev_check(ctx, ctx->gpu->cu.cuGraphLaunch((fat5__CUgraphExec)exec, ctx->gpu->stream),
                           "cuGraphLaunch");
}

static FAT5__UNUSED void fat5__dev_graph_destroy(fat5_ctx *ctx, void *exec) {
    if (exec && ctx->gpu) ctx->gpu->cu.cuGraphExecDestroy((fat5__CUgraphExec)exec);
}

// Products of at most this many rows may run the fused row kernels (fat5_mm, norm_mm); 0 with the
// context's mm_rows switch off.
static FAT5__UNUSED int64_t fat5__dev_fused_rows(const fat5_ctx *ctx) { return ctx->gpu->mm_rows ? INT64_MAX : 0; }

// the bf16 attention kernels of this context: tensor cores (on) or the exact FMA ones
static FAT5__UNUSED void fat5__dev_set_attn_tc(fat5_ctx *ctx, int on) {
    if (ctx->gpu) ctx->gpu->attn_tc = on != 0;
    if (ctx->gpu) ctx->gpu->attn_wg = on >= 2 && ctx->gpu->attn_wg_ok;
}

// H100 / H200 dense bf16 tensor-core peak; fp32 runs are not measured against a peak.
static FAT5__UNUSED double fat5__dev_peak_flops(const fat5_ctx *ctx) { return fat5__dev_act_size(ctx) == 2 ? 989e12 : 0; }
#else  // FAT5_NO_CUDA: the device layer reduced to an error
static fat5_status fat5__dev_open(fat5_ctx *ctx) {
    return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "fat5 was built with FAT5_NO_CUDA: no GPU path");
}
static void fat5__dev_close(fat5_ctx *ctx) { (void)ctx; }
#endif  // FAT5_NO_CUDA

